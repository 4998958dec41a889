package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// The CLI's end of a sandbox on a cluster: its terminal I/O through the Pod
// attach API, its end from the Pod's status, signals through `supervise signal`.

// Attach connects the CLI's streams to the primary (the supervisor, which holds
// the main command until Start). It returns once the connection is up, so that
// no output of the main command is missed; the channel ends with the stream.
func (rt *Runtime) Attach(ctx context.Context, sb *backend.Sandbox, s backend.Streams) (<-chan error, error) {
	rt.mu.Lock()
	if st := rt.live[sb.ID]; st != nil && st.parked && st.claimW == nil {
		// Its claim goes first on this stdin (Claim), then the run's: one
		// write on a stream already open, no exec.
		pr, pw := io.Pipe()
		st.claimW, st.claimIn = pw, s.Stdin
		s.Stdin = pr
	}
	rt.mu.Unlock()
	req := rt.pods().Sub(sb.PrimaryID, "attach", &corev1.PodAttachOptions{
		Container: MainContainer, Stdin: s.Stdin != nil, Stdout: true, Stderr: !sb.TTY, TTY: sb.TTY,
	})
	transport, upgrader, err := spdy.RoundTripperFor(rt.rest)
	if err != nil {
		return nil, failed("cannot attach to the sandbox: %v", err)
	}
	connected := make(chan struct{})
	ex, err := remotecommand.NewSPDYExecutorForTransports(transport, &signalUpgrader{Upgrader: upgrader, connected: connected}, "POST", req.URL())
	if err != nil {
		return nil, failed("cannot attach to the sandbox: %v", err)
	}
	rt.mu.Lock()
	if rt.sizes == nil {
		rt.sizes = map[string]*sizeQueue{}
	}
	sizes := newSizeQueue()
	rt.sizes[sb.ID] = sizes
	rt.mu.Unlock()
	done := make(chan error, 1)
	var stderr io.Writer = s.Stderr
	if sb.TTY {
		stderr = nil
	}
	go func() {
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: s.Stdin, Stdout: s.Stdout, Stderr: stderr, Tty: sb.TTY, TerminalSizeQueue: sizes})
		sizes.close()
		done <- err
	}()
	select {
	case <-connected:
		return done, nil
	case err := <-done:
		if err == nil {
			return closedStream(), nil
		}
		return nil, failed("cannot attach to the sandbox: %v", err)
	case <-ctx.Done():
		return nil, failed("cannot attach to the sandbox: %v", ctx.Err())
	}
}

func closedStream() <-chan error {
	c := make(chan error, 1)
	c <- nil
	return c
}

// signalUpgrader closes connected once the attach connection is upgraded.
type signalUpgrader struct {
	spdy.Upgrader
	connected chan struct{}
}

func (u *signalUpgrader) NewConnection(resp *http.Response) (httpstream.Connection, error) {
	c, err := u.Upgrader.NewConnection(resp)
	if err == nil {
		close(u.connected)
	}
	return c, err
}

// WaitExit waits for the primary to end and returns its exit code (from the Pod's
// status); a Pod deleted before that is an error.
func (rt *Runtime) WaitExit(ctx context.Context, sb *backend.Sandbox) (<-chan int, <-chan error) {
	codes := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		pod, err := rt.waitPod(ctx, sb.PrimaryID, func(p *corev1.Pod) (bool, error) {
			if takenAway(p, nil) != "" {
				return true, nil
			}
			return primaryEnded(p)
		})
		if err == nil {
			// Taken away (a lost node's kubelet never reports the end; an
			// evicted primary's code is that of its SIGTERM): not its code.
			if why := rt.whyTakenAway(ctx, pod); why != "" {
				errs <- failed("the sandbox's Pod %s was %s before its main command ended", sb.PrimaryID, why)
				return
			}
		}
		if err == errGone {
			errs <- failed("the sandbox's Pod %s was deleted before its main command ended", sb.PrimaryID)
			return
		}
		if err != nil {
			errs <- err
			return
		}
		cs := mainStatus(pod)
		if cs == nil || cs.State.Terminated == nil {
			errs <- failed("the sandbox's Pod %s ended without its primary (%s %s)", sb.PrimaryID, pod.Status.Reason, pod.Status.Message)
			return
		}
		codes <- int(cs.State.Terminated.ExitCode)
	}()
	return codes, errs
}

// Kill sends a signal to the supervisor, which forwards it to the main command.
func (rt *Runtime) Kill(ctx context.Context, sb *backend.Sandbox, signal string) error {
	return rt.KillPrimary(ctx, sb.PrimaryID, signal)
}

// Resize sets the primary's terminal size.
func (rt *Runtime) Resize(_ context.Context, sb *backend.Sandbox, height, width uint) error {
	rt.mu.Lock()
	q := rt.sizes[sb.ID]
	rt.mu.Unlock()
	if q != nil {
		q.set(height, width)
	}
	return nil
}

// Prepare checks what it can before a sandbox is created: the keys a cluster
// cannot honour. Images are pulled by the cluster (its own credentials): o's
// are not used.
func (rt *Runtime) Prepare(_ context.Context, r *manifest.Resolved, _ backend.PrepareOptions) error {
	if _, err := manifest.CheckBackend(r, manifest.Backend{Name: manifest.BackendKubernetes, AllowPrivileged: rt.cfg.AllowPrivileged}); err != nil {
		return configErr("%v", err)
	}
	return nil
}

// ProjectCopied is true: a cluster cannot see this host's files.
func (rt *Runtime) ProjectCopied(*manifest.Resolved) bool { return true }

// CopyOut copies rel (relative to the project dir) from the running primary back
// into the project dir through `supervise tar`, as the Docker backend does through
// the Engine's archive API, by the same rules (projectfs.Output).
func (rt *Runtime) CopyOut(ctx context.Context, pod string, out *projectfs.Output, rel string) ([]string, error) {
	src, err := projectfs.OutputPath(out.ProjectDir, rel)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		// The primary ended: its files are read through the keeper (BuildPod).
		var errOut bytes.Buffer
		code, err := rt.execIn(ctx, pod, KeeperContainer, []string{"/airlock", "supervise", "tar", "--", src}, nil, pw, &errOut)
		if err == nil && code != 0 {
			err = fmt.Errorf("%s", bytes.TrimSpace(errOut.Bytes()))
		}
		pw.CloseWithError(err)
	}()
	warnings, err := out.Extract(pr, rel)
	pr.Close()
	return warnings, err
}

// CopyFile streams a file of the running primary to w from an offset and returns
// the offset after it.
func (rt *Runtime) CopyFile(ctx context.Context, pod, file string, from int64, w io.Writer) (int64, error) {
	rc, err := backend.TailFile(ctx, rt, pod, file, from, false, "")
	if err != nil {
		return from, err
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	return from + n, err
}

// Shell is the shell for `up`: sandbox.shell, else /bin/sh (a cluster does not
// say what an image's environment holds).
func (rt *Runtime) Shell(_ context.Context, sb *backend.Sandbox) []string {
	rt.mu.Lock()
	st := rt.live[sb.ID]
	rt.mu.Unlock()
	if st != nil && st.resolved != nil && len(st.resolved.Sandbox.Shell) > 0 {
		return st.resolved.Sandbox.Shell
	}
	return []string{"/bin/sh"}
}

// PlanHashFor is the plan hash a sandbox made from r now would carry (the image
// is named, not inspected: the cluster pulls it).
func (rt *Runtime) PlanHashFor(_ context.Context, r *manifest.Resolved) (string, error) {
	return backend.PlanHash(r, r.Sandbox.Image), nil
}

// FollowOutput copies the primary's output from its start until it ends, all
// to stdout: a Pod's log does not keep stdout and stderr apart.
func (rt *Runtime) FollowOutput(ctx context.Context, sb *backend.Sandbox, stdout, _ io.Writer) <-chan error {
	done := make(chan error, 1)
	rc, err := rt.pods().Logs(sb.PrimaryID, &corev1.PodLogOptions{Container: MainContainer, Follow: true}).Stream(ctx)
	if err != nil {
		done <- failed("cannot read the sandbox's output: %v", err)
		return done
	}
	go func() {
		defer rc.Close()
		_, err := io.Copy(stdout, rc)
		done <- err
	}()
	return done
}

// FollowStderr copies the primary's output written from since on (the
// supervisor's shutdown lines when it is stopped) to w until it ends. A Pod's log
// does not keep stdout and stderr apart: both are copied.
func (rt *Runtime) FollowStderr(ctx context.Context, sb *backend.Sandbox, since time.Time, w io.Writer) <-chan error {
	done := make(chan error, 1)
	t := metav1.NewTime(since)
	rc, err := rt.pods().Logs(sb.PrimaryID, &corev1.PodLogOptions{Container: MainContainer, Follow: true, SinceTime: &t}).Stream(ctx)
	if err != nil {
		done <- err
		return done
	}
	go func() {
		defer rc.Close()
		_, err := io.Copy(w, rc)
		done <- err
	}()
	return done
}
