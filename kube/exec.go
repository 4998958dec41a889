package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/supervisor"
)

// The channel to a sandbox's supervisor, over the Pod exec and attach API: the
// same `airlock supervise …` commands the Docker backend runs through the
// Engine's exec API.

// stream runs cmd in a container of a Pod with the given streams (nil for none)
// and returns its exit code.
func (rt *Runtime) stream(ctx context.Context, pod, ctr string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool, size remotecommand.TerminalSizeQueue) (int, error) {
	req := rt.pods().Sub(pod, "exec", &corev1.PodExecOptions{
		Container: ctr, Command: cmd, Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil && !tty, TTY: tty,
	})
	ex, err := remotecommand.NewSPDYExecutor(rt.rest, "POST", req.URL())
	if err != nil {
		return 0, err
	}
	if tty {
		stderr = nil
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty, TerminalSizeQueue: size})
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// deliver hands the supervisor its values (none releases a held supervisor): the
// values cross the API on the exec's stdin only.
func (rt *Runtime) deliver(ctx context.Context, pod, ctr string, values map[string]string) error {
	if values == nil {
		values = map[string]string{}
	}
	payload, err := json.Marshal(values)
	if err != nil {
		return failed("cannot encode the secret values")
	}
	var out bytes.Buffer
	code, err := rt.stream(ctx, pod, ctr, []string{sandbox.SupervisorIn, "supervise", "deliver", "--socket", sandbox.SecretsSocketIn},
		bytes.NewReader(payload), &out, &out, false, nil)
	if err != nil {
		return failed("cannot deliver the secret values: %v", err)
	}
	if code != 0 {
		return failed("cannot deliver the secret values: %s", bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// tail streams a file of the primary from an offset (following appends when
// follow) through `supervise tail`; report names the file the follower reports its
// progress in. The stream ends when the exec does.
func (rt *Runtime) tail(ctx context.Context, pod, file string, from int64, follow bool, report string) (io.ReadCloser, error) {
	cmd := []string{sandbox.SupervisorIn, "supervise", "tail", "--from", strconv.FormatInt(from, 10)}
	if follow {
		cmd = append(cmd, "--follow")
	}
	if report != "" {
		cmd = append(cmd, "--report", report)
	}
	cmd = append(cmd, "--", file)
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	errOut := &limited{n: 4096}
	go func() {
		code, err := rt.stream(ctx, pod, MainContainer, cmd, nil, pw, errOut, false, nil)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit status %d: %s", code, bytes.TrimSpace(errOut.bytes()))
		}
		pw.CloseWithError(err)
	}()
	header := make([]byte, len(supervisor.TailHeader))
	if n, err := io.ReadFull(pr, header); err != nil || string(header) != supervisor.TailHeader {
		cancel()
		pr.Close()
		return nil, fmt.Errorf("cannot read %s in the sandbox: %s", file, bytes.TrimSpace(append(header[:n], errOut.bytes()...)))
	}
	return &readCloser{Reader: pr, close: func() { cancel(); pr.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func()
}

func (r *readCloser) Close() error { r.close(); return nil }

// limited keeps the first n bytes written to it.
type limited struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (l *limited) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (l *limited) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}

// FollowStatus follows the supervisor's status stream from a byte offset,
// reporting progress so that the supervisor lets the follower read its last lines.
func (rt *Runtime) FollowStatus(ctx context.Context, pod string, from int64) (io.ReadCloser, error) {
	return rt.tail(ctx, pod, supervisor.StatusFile, from, true, sandbox.StatusReadIn)
}

// FollowFile streams a file of a running sandbox from an offset, and what is appended.
func (rt *Runtime) FollowFile(ctx context.Context, pod, file string, from int64) (io.ReadCloser, error) {
	return rt.tail(ctx, pod, file, from, true, "")
}

// ReadFile reads at most limit bytes of a file of a running sandbox from an
// offset. A Pod's stopped container cannot be read: its files went with it.
func (rt *Runtime) ReadFile(ctx context.Context, pod, file string, from, limit int64) ([]byte, int64, error) {
	rc, err := rt.tail(ctx, pod, file, from, false, "")
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit))
	return b, from + int64(len(b)), err
}

// Exec starts a command in the sandbox through `supervise exec`, as on Docker.
func (rt *Runtime) Exec(ctx context.Context, sb *sandbox.Sandbox, req sandbox.ExecRequest, s sandbox.Streams) (*sandbox.Exec, error) {
	argv := []string{sandbox.SupervisorIn, "supervise", "exec", "--spec", sandbox.SpecIn}
	for _, e := range req.Env {
		argv = append(argv, "-e", e)
	}
	if req.Workdir != "" {
		argv = append(argv, "-w", req.Workdir)
	}
	argv = append(append(argv, "--"), req.Cmd...)
	var stdin io.Reader
	if req.Stdin {
		stdin = s.Stdin
	}
	done := make(chan error, 1)
	var code int
	var mu sync.Mutex
	sizes := newSizeQueue()
	go func() {
		c, err := rt.stream(ctx, sb.PrimaryID, MainContainer, argv, stdin, s.Stdout, s.Stderr, req.TTY, sizes)
		mu.Lock()
		code = c
		mu.Unlock()
		sizes.close()
		done <- err
	}()
	exitCode := func(context.Context) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return code, nil
	}
	return sandbox.NewExec("", done, exitCode, func(_ context.Context, h, w uint) error { sizes.set(h, w); return nil }), nil
}

// sizeQueue hands terminal sizes to a streaming exec or attach.
type sizeQueue struct {
	ch   chan remotecommand.TerminalSize
	once sync.Once
}

func newSizeQueue() *sizeQueue { return &sizeQueue{ch: make(chan remotecommand.TerminalSize, 4)} }

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.ch
	if !ok {
		return nil
	}
	return &s
}

func (q *sizeQueue) set(h, w uint) {
	select {
	case q.ch <- remotecommand.TerminalSize{Height: uint16(h), Width: uint16(w)}:
	default:
	}
}

func (q *sizeQueue) close() { q.once.Do(func() { close(q.ch) }) }
