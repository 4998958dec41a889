package kube

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/airlock-dev/airlock/backend"
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

// ExecIn runs cmd in a container of a sandbox's Pod (backend.Execer): the channel
// code (values delivered, files followed) is the Docker backend's.
func (rt *Runtime) ExecIn(ctx context.Context, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return rt.execIn(ctx, pod, MainContainer, cmd, stdin, stdout, stderr)
}

// execIn is ExecIn in a given container of the Pod.
func (rt *Runtime) execIn(ctx context.Context, pod, ctr string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return rt.stream(ctx, pod, ctr, cmd, stdin, stdout, stderr, false, nil)
}

// primaryEnded reports whether the Pod's main container terminated.
func (rt *Runtime) primaryEnded(ctx context.Context, pod string) bool {
	p, err := rt.pods().Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return false
	}
	cs := mainStatus(p)
	return cs != nil && cs.State.Terminated != nil
}

// OnlyInitRuns tells whether nothing but the supervisor (PID 1) runs in the
// Pod's primary container (`supervise alone` there), or nothing at all (the
// container ended: the kernel ended the rest of its PID namespace with its PID
// 1). The daemon then believes a sealed end marker and ends the run at once,
// instead of waiting for the kubelet to report the container's end (it
// relists containers every second). Whatever else fails, the answer is no:
// the run then ends with the container's reported end, as without a marker.
func (rt *Runtime) OnlyInitRuns(ctx context.Context, pod string) bool {
	for attempt := 0; ; attempt++ {
		code, err := rt.execIn(ctx, pod, MainContainer, []string{backend.SupervisorIn, "supervise", "alone"}, nil, io.Discard, io.Discard)
		switch {
		case err == nil:
			return code == 0
		case containerEnded(err):
			return true
		case attempt == aloneRetries || ctx.Err() != nil:
			return false
		}
		// Another answer (a busy kubelet, a container being torn down):
		// asked again, as the container ends at once after a sealed marker.
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
}

// aloneRetries is how many more times OnlyInitRuns asks after an answer that
// is neither the check's nor a container that ended.
const aloneRetries = 3

// containerEnded recognises the error of an exec into a container that is no
// longer running, as the kubelet and its runtime give it: the kubelet's
// "container not found" (it let go of the container already); containerd's
// "cannot exec in a stopped state", or a "failed to exec in container: …"
// ending in "not found" (no task, no running task, no container: its process
// is gone); CRI-O's "container is not created or running".
func containerEnded(err error) bool {
	msg := err.Error()
	if strings.Contains(msg, "failed to exec in container") && strings.HasSuffix(msg, "not found") {
		return true
	}
	for _, s := range []string{"cannot exec in a stopped state", `container not found ("` + MainContainer + `")`, "container is not created or running", "CONTAINER_EXITED"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// keeperExec runs the supervisor's commands in the Pod's keeper, which shares
// the project and state dirs: the airlock binary is /airlock there, and the
// state dir keeperStateDir.
type keeperExec struct{ rt *Runtime }

func (k keeperExec) ExecIn(ctx context.Context, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	args := make([]string, len(cmd))
	for i, a := range cmd {
		switch {
		case i == 0 && a == backend.SupervisorIn:
			a = "/airlock"
		case strings.HasPrefix(a, supervisor.StateDir+"/"):
			a = keeperStateDir + strings.TrimPrefix(a, supervisor.StateDir)
		}
		args[i] = a
	}
	return k.rt.execIn(ctx, pod, KeeperContainer, args, stdin, stdout, stderr)
}

// inContainer is the Execer of one container of a Pod (a service's sidecar).
type inContainer struct {
	rt  *Runtime
	ctr string
}

func (c inContainer) ExecIn(ctx context.Context, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return c.rt.execIn(ctx, pod, c.ctr, cmd, stdin, stdout, stderr)
}

// FollowStatus follows the supervisor's status stream from a byte offset,
// reporting progress so that the supervisor lets the follower read its last lines.
func (rt *Runtime) FollowStatus(ctx context.Context, pod string, from int64) (io.ReadCloser, error) {
	return backend.TailFile(ctx, rt, pod, supervisor.StatusFile, from, true, backend.StatusReadIn)
}

// FollowFile streams a file of a running sandbox from an offset, and what is appended.
func (rt *Runtime) FollowFile(ctx context.Context, pod, file string, from int64) (io.ReadCloser, error) {
	return backend.TailFile(ctx, rt, pod, file, from, true, "")
}

// TailLog streams a daemon log of the running primary, from its last lines when
// lines >= 0, and with follow what is appended (backend.TailLog).
func (rt *Runtime) TailLog(ctx context.Context, pod, file string, lines int, follow bool) (io.ReadCloser, error) {
	return backend.TailLog(ctx, rt, pod, file, lines, follow)
}

// ReadFile reads at most limit bytes of a file of a running sandbox from an
// offset. A Pod's stopped container cannot be read: its files went with it.
func (rt *Runtime) ReadFile(ctx context.Context, pod, file string, from, limit int64) ([]byte, int64, error) {
	var ex backend.Execer = rt
	if rt.primaryEnded(ctx, pod) {
		// The keeper of a run whose files are kept reads the state dir
		// (the status stream's last lines, once the primary ended).
		ex = keeperExec{rt}
	}
	rc, err := backend.TailFile(ctx, ex, pod, file, from, false, "")
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit))
	return b, from + int64(len(b)), err
}

// Exec starts a command in the sandbox through `supervise exec`, as on Docker:
// its -e values are delivered apart first (backend.ExecArgv), never in the Pod
// exec request, which the API server may log.
func (rt *Runtime) Exec(ctx context.Context, sb *backend.Sandbox, req backend.ExecRequest, s backend.Streams) (*backend.Exec, error) {
	argv, err := backend.ExecArgv(ctx, rt, sb.PrimaryID, req)
	if err != nil {
		return nil, err
	}
	if req.BeforeStart != nil {
		if err := req.BeforeStart(); err != nil {
			return nil, err
		}
	}
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
	return backend.NewExec("", done, exitCode, func(_ context.Context, h, w uint) error { sizes.set(h, w); return nil }), nil
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
