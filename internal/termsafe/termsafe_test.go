package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestLineAndText(t *testing.T) {
	for _, c := range []struct{ in, line, text string }{
		{"plain reason", "plain reason", "plain reason"},
		{"héllo ✔ 日本", "héllo ✔ 日本", "héllo ✔ 日本"},
		{"\x1b]0;PWNED\x07\x1b[31mFORGED", `\x1b]0;PWNED\x07\x1b[31mFORGED`, `\x1b]0;PWNED\x07\x1b[31mFORGED`},
		{"a\nb\tc\rd", `a\x0ab\x09c\x0dd`, "a\nb\tc\\x0dd"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"c1 \u009b1m \u0085", `c1 \u009b1m \u0085`, `c1 \u009b1m \u0085`},
		{"bad \x9b utf8 \xff", `bad \x9b utf8 \xff`, `bad \x9b utf8 \xff`},
		{"nul\x00", `nul\x00`, `nul\x00`},
		{`back\slash`, `back\slash`, `back\slash`},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
		if strings.ContainsAny(Line(c.in), "\x1b\x07\n\r\x9b") {
			t.Errorf("Line(%q) keeps a control character", c.in)
		}
	}
}

func TestJSON(t *testing.T) {
	in := map[string]string{"reason": "\x1b]0;x\x07 \u009b31m \x7f ok ✔"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(b)
	if bytes.ContainsAny(out, "\x1b\x07\x7f") || bytes.Contains(out, []byte("\u009b")) {
		t.Errorf("JSON kept a control character: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["reason"] != in["reason"] {
		t.Errorf("JSON changed the value: %q (%v)", back["reason"], err)
	}
	plain := []byte(`{"a":"b ✔"}`)
	if got := JSON(plain); !bytes.Equal(got, plain) {
		t.Errorf("JSON(%q) = %q", plain, got)
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	// The supervisor's own sequences pass, split anywhere; others are escaped.
	in := "\x1b[32m✔\x1b[0m daemon web: shut down\n\x1b[2A\x1b[J⠋ daemon db: stopping\n" +
		"\x1b]0;PWNED\x07\x1b[31mred\x1b[0m \x1b[6n \u009b1m \rx\r\n"
	for _, step := range []int{1, 3, len(in)} {
		for i := 0; i < len(in); i += step {
			if _, err := w.Write([]byte(in[i:min(i+step, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	want := "\x1b[32m✔\x1b[0m daemon web: shut down\n\x1b[2A\x1b[J⠋ daemon db: stopping\n" +
		`\x1b]0;PWNED\x07` + "\x1b[31mred\x1b[0m " + `\x1b[6n \u009b1m \x0dx` + "\r\n"
	if got := b.String(); got != want+want+want {
		t.Errorf("Writer wrote\n%q\nwant three times\n%q", got, want)
	}
	b.Reset()
	_, _ = w.Write([]byte("cut \x1b["))
	_ = w.Flush()
	if got := b.String(); got != `cut \x1b[` {
		t.Errorf("Flush of an unfinished sequence: %q", got)
	}
}
