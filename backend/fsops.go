package backend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/fsentry"
	"github.com/airlock-dev/airlock/supervisor"
)

// The files API's operations that the Engine's archive API cannot do (list,
// stat, remove, mkdir, rename, watch): a short exec of `airlock supervise fs`
// in the primary, as the sandbox's user, through the channel every backend
// shares (Execer).

// FsError is an operation `supervise fs` reported as failed: Kind is one of
// fsentry's Kind constants. A missing path also matches ErrNoSuchPath, a
// path below a file ErrNotDirectory, a directory where a file was expected
// ErrIsDirectory.
type FsError struct {
	Kind string
	Msg  string
}

func (e *FsError) Error() string { return e.Msg }

// Is matches the backend's sentinels of the files API.
func (e *FsError) Is(target error) bool {
	switch e.Kind {
	case fsentry.KindNotFound:
		return target == ErrNoSuchPath
	case fsentry.KindNotDirectory:
		return target == ErrNotDirectory
	case fsentry.KindIsDirectory:
		return target == ErrIsDirectory
	}
	return false
}

// maxFsOutput bounds what is read of a `supervise fs` answer (a listing of
// many entries is the largest).
const maxFsOutput = 256 << 20

// fsArgv is the command line of `supervise fs OP ARGS... -- PATHS...`. A
// path that is not UTF-8 goes as "base64:" and its bytes (supervisor.FsPath):
// the Engine's exec API (JSON) would replace its bytes.
func fsArgv(op string, args []string, paths ...string) []string {
	argv := append([]string{SupervisorIn, "supervise", "fs", op, "--spec", SpecIn}, args...)
	argv = append(argv, "--")
	for _, p := range paths {
		if !utf8.ValidString(p) {
			p = supervisor.FsPathPrefix + base64.StdEncoding.EncodeToString([]byte(p))
		}
		argv = append(argv, p)
	}
	return argv
}

// FsCall runs `supervise fs op args -- paths` in containerID and decodes its
// answer into out (nil: none is read).
func FsCall(ctx context.Context, ex Execer, containerID, op string, args []string, out any, paths ...string) error {
	return FsCallInput(ctx, ex, containerID, op, args, nil, out, paths...)
}

// FsCallInput is FsCall with stdin the command's standard input (nil: none):
// the NUL-terminated paths of `supervise fs rm --stdin`, say.
func FsCallInput(ctx context.Context, ex Execer, containerID, op string, args []string, stdin io.Reader, out any, paths ...string) error {
	var stdout bytes.Buffer
	stderr := &limitedBuffer{n: 4096}
	code, err := ex.ExecIn(ctx, containerID, fsArgv(op, args, paths...), stdin, &limitWriter{w: &stdout, n: maxFsOutput}, stderr)
	if err != nil {
		return failed("cannot %s in the sandbox: %v", fsVerb(op), err)
	}
	if code != 0 {
		return fsFailure(op, code, stdout.Bytes(), stderr.bytes())
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return failed("cannot %s in the sandbox: its answer is not JSON (%v): %.200q", fsVerb(op), err, stdout.Bytes())
	}
	return nil
}

// fsFailure is the error of a `supervise fs` that exited with code.
func fsFailure(op string, code int, stdout, stderr []byte) error {
	var f fsentry.Failure
	if json.Unmarshal(bytes.TrimSpace(stdout), &f) == nil && f.Error.Kind != "" {
		return &FsError{Kind: f.Error.Kind, Msg: f.Error.Message}
	}
	msg := bytes.TrimSpace(append(stdout, stderr...))
	if bytes.Contains(msg, []byte(`unknown command "fs"`)) {
		return failed("cannot %s: the sandbox runs the supervisor of an older airlock, which has no files operations; recreate the sandbox", fsVerb(op))
	}
	return failed("cannot %s in the sandbox (exit code %d): %s", fsVerb(op), code, msg)
}

func fsVerb(op string) string {
	switch op {
	case "list":
		return "list files"
	case "rm":
		return "remove a file"
	case "mkdir":
		return "make a directory"
	case "mv":
		return "rename a file"
	case "watch":
		return "watch files"
	}
	return op + " a file"
}

// limitWriter keeps at most n bytes, then fails.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		return 0, errors.New("the answer is too large")
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// FsWatcher is a running `supervise fs watch`: Ready is its first event;
// Events carries the others until the watch ends (Err says why, nil for an
// end of the watched directory or Close).
type FsWatcher struct {
	Ready  fsentry.Event
	Events <-chan fsentry.Event
	cancel func()
	mu     sync.Mutex
	err    error
	done   chan struct{}
}

// Err is why the watch ended, once Events is closed.
func (w *FsWatcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close ends the watch and its exec: the watcher in the sandbox ends with
// its stdin.
func (w *FsWatcher) Close() {
	w.cancel()
	<-w.done
}

// FsWatch starts `supervise fs watch args -- dir` in containerID and returns
// once it is ready (or failed: the error of FsCall's kinds).
func FsWatch(ctx context.Context, ex Execer, containerID string, args []string, dir string) (*FsWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	inR, inW := io.Pipe() // held open: its end is the watcher's end
	outR, outW := io.Pipe()
	stderr := &limitedBuffer{n: 4096}
	exited := make(chan struct{})
	var code int
	var execErr error
	go func() {
		defer close(exited)
		code, execErr = ex.ExecIn(ctx, containerID, fsArgv("watch", args, dir), inR, outW, stderr)
		outW.Close()
	}()
	stop := func() {
		cancel()
		inW.Close()
		outR.Close()
	}
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	next := func() ([]byte, bool) {
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				return line, true
			}
		}
		return nil, false
	}
	first, ok := next()
	var ready fsentry.Event
	if !ok || json.Unmarshal(first, &ready) != nil || ready.Type != fsentry.EventReady {
		// A watch that failed ends by itself: its code and error are
		// its own, not those of a cancel.
		inW.Close()
		var f fsentry.Failure
		if !ok || json.Unmarshal(first, &f) == nil && f.Error.Kind != "" {
			go func() { _, _ = io.Copy(io.Discard, outR) }()
			<-exited
		}
		stop()
		<-exited
		if execErr != nil {
			return nil, failed("cannot watch files in the sandbox: %v", execErr)
		}
		return nil, fsFailure("watch", max(code, 1), first, stderr.bytes())
	}
	events := make(chan fsentry.Event, 64)
	w := &FsWatcher{Ready: ready, Events: events, done: make(chan struct{})}
	w.cancel = stop
	go func() {
		defer close(w.done)
		defer close(events)
		for {
			line, ok := next()
			if !ok {
				break
			}
			var ev fsentry.Event
			if json.Unmarshal(line, &ev) != nil {
				var f fsentry.Failure
				if json.Unmarshal(line, &f) == nil && f.Error.Kind != "" {
					w.mu.Lock()
					w.err = &FsError{Kind: f.Error.Kind, Msg: f.Error.Message}
					w.mu.Unlock()
				}
				continue
			}
			select {
			case events <- ev:
			case <-ctx.Done():
			}
		}
		stop()
		<-exited
		w.mu.Lock()
		if w.err == nil && execErr != nil && ctx.Err() == nil {
			w.err = failed("the watch of %s ended: %v", dir, execErr)
		}
		w.mu.Unlock()
	}()
	return w, nil
}
