package images

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, false, false)
	p.update("latest", "Pulling from x/y", nil)
	p.update("aaa", "Pulling fs layer", nil)
	p.update("bbb", "Pulling fs layer", nil)
	p.update("aaa", "Downloading", &jsonProgress{Current: 1, Total: 10})
	p.update("aaa", "Downloading", &jsonProgress{Current: 5, Total: 10})
	p.update("bbb", "Already exists", nil)
	p.update("aaa", "Pull complete", nil)
	p.update("", "Digest: sha256:0123", nil)
	p.update("", "Status: Downloaded newer image for x/y", nil)
	p.done()
	want := "latest: Pulling from x/y\naaa: Pulling fs layer\nbbb: Pulling fs layer\naaa: Downloading\n" +
		"bbb: Already exists\naaa: Pull complete\nDigest: sha256:0123\nStatus: Downloaded newer image for x/y\n"
	if buf.String() != want {
		t.Errorf("plain progress:\n%s\nwant:\n%s", buf.String(), want)
	}

	buf.Reset()
	p = newProgress(&buf, true, true)
	p.update("aaa", "Downloading", nil)
	if buf.Len() != 0 {
		t.Errorf("quiet progress wrote %q", buf.String())
	}
}

// screen replays the output of the terminal progress on a minimal terminal (cursor
// up, clear line, carriage return, newline) and returns its lines.
func screen(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	row := 0
	for len(out) > 0 {
		switch {
		case strings.HasPrefix(out, "\x1b["):
			end := strings.IndexAny(out[2:], "AK")
			if end < 0 {
				t.Fatalf("unterminated escape in %q", out)
			}
			arg, cmd := out[2:2+end], out[2+end]
			out = out[3+end:]
			switch cmd {
			case 'A':
				var n int
				for _, c := range arg {
					n = n*10 + int(c-'0')
				}
				if row -= n; row < 0 {
					t.Fatalf("cursor moved above the output")
				}
			case 'K':
				if row < len(lines) {
					lines[row] = ""
				}
			}
		case out[0] == '\r':
			out = out[1:]
		case out[0] == '\n':
			row++
			out = out[1:]
		default:
			i := strings.IndexAny(out, "\x1b\r\n")
			if i < 0 {
				i = len(out)
			}
			for len(lines) <= row {
				lines = append(lines, "")
			}
			lines[row] += out[:i]
			out = out[i:]
		}
	}
	if row != len(lines) {
		t.Errorf("cursor on row %d, want %d (below the output)", row, len(lines))
	}
	return lines
}

func TestProgressTTY(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, true, false)
	p.update("aaa", "Pulling fs layer", nil)
	p.update("bbb", "Pulling fs layer", nil)
	p.update("aaa", "Downloading", &jsonProgress{Current: 1000, Total: 2000})
	p.update("", "a message without a layer", nil)
	p.update("bbb", "Downloading "+strings.Repeat("=", 200), nil)
	p.update("aaa", "Pull complete", nil)
	p.done()
	got := screen(t, buf.String())
	want := []string{
		"aaa: Downloading 1kB/2kB",
		"bbb: Pulling fs layer",
		"a message without a layer",
		"bbb: Downloading " + strings.Repeat("=", progressWidth-len("bbb: Downloading ")-1) + "…",
		"aaa: Pull complete",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("terminal shows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	buf.Reset()
	p = newProgress(&buf, true, false)
	p.update("aaa", "Downloading", &jsonProgress{Current: 1500, Total: 3_000_000})
	if got := screen(t, buf.String()); len(got) != 1 || got[0] != "aaa: Downloading 1.5kB/3MB" {
		t.Errorf("terminal shows %q", got)
	}
}
