package control_test

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// TestExecTTYSizeAtStart: a TTY exec asked with a size has it from its first
// instruction, on a handed-over stream and on frames alike — not only once
// the daemon's resize after the start reached the Engine (a command that read
// its size at once saw none: busybox's `stty size` failed).
func TestExecTTYSizeAtStart(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	port := freePort(t)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--unsafe-no-token")
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, d.client, "").ID
	tcp := client.NewTCP(fmt.Sprintf("127.0.0.1:%d", port), "")
	for i := range 8 {
		for _, c := range []*client.Client{d.client, tcp} {
			direct := c == d.client
			height, width := uint(20+i), uint(70+i)
			var out bytes.Buffer
			stdin, stdinW := io.Pipe()
			req := &client.ExecRequest{Cmd: []string{"stty", "size"}, TTY: true, Height: height, Width: width}
			s, err := c.ExecAttach(ctx, id, req, stdin, &out, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			_, code, err := s.Wait()
			stdinW.Close()
			want := fmt.Sprintf("%d %d", height, width)
			if err != nil || code != 0 || strings.TrimSpace(out.String()) != want {
				t.Errorf("run %d (direct %v): stty size: code %d, %v, output %q; want %q", i, direct, code, err, out.String(), want)
			}
		}
	}
}
