// Command benchsync measures how fast `airlock up` brings the host's edits
// into a sandbox whose project is copied (issue 43): `up` through a daemon
// reached over tcp:// (as a daemon on another machine is), its shell held
// open, then, interleaved, one file edited on the host until the sandbox
// shows it, and 1000 files changed at once (a branch switch) until the
// sandbox shows them all; beside each, the plain case: the same bytes written
// straight through the files API (one PUT) until the sandbox shows them. The
// sandbox is read through the daemon's archive route every 5 ms. Medians
// against the targets (1 s and 5 s); docs/benchmarks.md "## Edits reaching a
// copied project". scripts/bench-sync.sh runs it.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
)

func main() {
	o := benchdoc.Flags("scripts/bench-sync.sh")
	n := flag.Int("n", 7, "samples of each kind")
	files := flag.Int("files", 1000, "files changed at once in a burst")
	flag.Parse()
	benchdoc.Exit("benchsync", bench(o, *n, *files))
}

func bench(o *benchdoc.Options, n, files int) error {
	ctx := context.Background()
	b, err := benchdoc.OpenBusybox(ctx, o.Airlock, "airlock-bench-sync-", benchdoc.PlainManifest)
	if err != nil {
		return err
	}
	defer b.Close()
	for i := range files {
		if err := writeFile(filepath.Join(b.Dir, "tree", strconv.Itoa(i%10), "f"+strconv.Itoa(i)), "v0\n"); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(b.Dir, "edit.txt"), "v0\n"); err != nil {
		return err
	}
	// The daemon, on loopback TCP with a token: the CLI copies the project
	// in through the files API, as for a daemon on another machine.
	token := filepath.Join(b.Home, "token")
	if err := os.WriteFile(token, []byte("bench-sync-token\n"), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	if _, out, err := b.Timed(b.Airlock, "daemon", "start", "--host", "127.0.0.1", "--port", port, "--token-file", token); err != nil {
		return fmt.Errorf("daemon start: %v\n%s", err, out)
	}
	up := b.Command(b.Airlock, "up")
	up.Env = append(up.Env, "AIRLOCK_HOST=tcp://127.0.0.1:"+port, "AIRLOCK_TOKEN=bench-sync-token")
	stdin, err := up.StdinPipe()
	if err != nil {
		return err
	}
	var upErr bytes.Buffer
	up.Stdout, up.Stderr = io.Discard, &upErr
	if err := up.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- up.Wait() }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			_ = up.Process.Kill()
			<-done
		}
		_ = b.Command(b.Airlock, "down").Run()
	}()
	c := b.Client()
	id, err := waitSandbox(ctx, c, b.Dir)
	if err != nil {
		return fmt.Errorf("%v\n%s", err, upErr.String())
	}
	if _, err := waitContent(ctx, c, id, path.Join(b.Dir, "edit.txt"), "v0\n", 1, time.Minute); err != nil {
		return fmt.Errorf("the sandbox's copy: %v\n%s", err, upErr.String())
	}
	time.Sleep(500 * time.Millisecond)

	var edit, editPlain, burst, burstPlain []time.Duration
	for i := 1; i <= n; i++ {
		v := fmt.Sprintf("v%d\n", i)
		// One edit on the host.
		start := time.Now()
		if err := writeFile(filepath.Join(b.Dir, "edit.txt"), v); err != nil {
			return err
		}
		if _, err := waitContent(ctx, c, id, path.Join(b.Dir, "edit.txt"), v, 1, 30*time.Second); err != nil {
			return fmt.Errorf("edit %d: %v\n%s", i, err, upErr.String())
		}
		edit = append(edit, time.Since(start))
		// The plain case: the same file written through the files API.
		pv := fmt.Sprintf("p%d\n", i)
		start = time.Now()
		if err := c.WriteFile(ctx, id, "/tmp/plain-edit.txt", strings.NewReader(pv), 0o644); err != nil {
			return err
		}
		if _, err := waitContent(ctx, c, id, "/tmp/plain-edit.txt", pv, 1, 30*time.Second); err != nil {
			return err
		}
		editPlain = append(editPlain, time.Since(start))

		// files changed at once on the host.
		start = time.Now()
		for f := range files {
			if err := writeFile(filepath.Join(b.Dir, "tree", strconv.Itoa(f%10), "f"+strconv.Itoa(f)), v); err != nil {
				return err
			}
		}
		if _, err := waitContent(ctx, c, id, path.Join(b.Dir, "tree"), v, files, time.Minute); err != nil {
			return fmt.Errorf("burst %d: %v\n%s", i, err, upErr.String())
		}
		burst = append(burst, time.Since(start))
		// The plain case: one tar of them written through the files API.
		start = time.Now()
		var tb bytes.Buffer
		tw := tar.NewWriter(&tb)
		for f := range files {
			name := "plain/" + strconv.Itoa(f%10) + "/f" + strconv.Itoa(f)
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(pv)), ModTime: time.Now(), Typeflag: tar.TypeReg})
			_, _ = tw.Write([]byte(pv))
		}
		_ = tw.Close()
		if err := c.WriteArchive(ctx, id, "/tmp", &tb); err != nil {
			return err
		}
		if _, err := waitContent(ctx, c, id, "/tmp/plain", pv, files, time.Minute); err != nil {
			return err
		}
		burstPlain = append(burstPlain, time.Since(start))
	}
	me, pe, mb, pb := benchdoc.Median(edit), benchdoc.Median(editPlain), benchdoc.Median(burst), benchdoc.Median(burstPlain)
	rows := []benchdoc.Row{
		{Measure: "one host edit → visible in the sandbox (median)", Result: benchdoc.MS(me), Target: "≤ 1000 ms"},
		{Measure: "the same file written through the files API → visible (median)", Result: benchdoc.MS(pe)},
		{Measure: "edit / files API", Result: benchdoc.Ratio(me, pe)},
		{Measure: fmt.Sprintf("%d files changed at once → all visible (median)", files), Result: benchdoc.MS(mb), Target: "≤ 5000 ms"},
		{Measure: fmt.Sprintf("the same %d files as one tar through the files API → visible (median)", files), Result: benchdoc.MS(pb)},
		{Measure: "burst / files API", Result: benchdoc.Ratio(mb, pb)},
	}
	benchdoc.Print(72, rows)
	fmt.Printf("samples: edit %v\n         burst %v\n", round(edit), round(burst))
	return benchdoc.Write(o.Doc, "Edits reaching a copied project",
		fmt.Sprintf("`%s` on %s: `airlock up` through a daemon on loopback tcp:// (the project copied in through the files API), its shell held open; %d interleaved samples of each kind, the sandbox read through the archive route every 5 ms.", o.Command, benchdoc.Machine(), n),
		rows, "The plain case writes the same bytes straight through the files API: the difference is what the watch, the wait for the burst to end (40 ms quiet, 300 ms at most) and the tar of the changed paths add.")
}

// waitSandbox waits for the sandbox of project dir to be ready.
func waitSandbox(ctx context.Context, c *client.Client, dir string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.List(ctx, nil)
		if err == nil {
			for _, s := range list {
				if s.Project == dir && s.State == client.StateReady {
					return s.ID, nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", errors.New("no ready sandbox of the project within 2 minutes")
}

// waitContent reads p in the sandbox (a file, or every file under a
// directory) every 5 ms until count files hold want.
func waitContent(ctx context.Context, c *client.Client, id, p, want string, count int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	got := 0
	for time.Now().Before(deadline) {
		got = 0
		rc, err := c.ReadArchive(ctx, id, p)
		if err == nil {
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				if h.Typeflag != tar.TypeReg {
					continue
				}
				b, _ := io.ReadAll(tr)
				if string(b) == want {
					got++
				}
			}
			rc.Close()
			if got >= count {
				return got, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return got, fmt.Errorf("%s: %d of %d files hold %q after %v", p, got, count, want, timeout)
}

func writeFile(p, content string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

func round(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
