package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// Exec starts a command in the sandbox through `airlock supervise exec`, which
// gives it the sandbox's [env] (substituted values included) from the spec and
// the caller's -e values delivered apart (ExecArgv), so the exec's own
// configuration holds neither.
//
// The Engine sometimes fails to start an exec's process for a passing reason
// (runc under load: "read init-p: connection reset by peer"); it then answers
// 126 with its message where the command's output would be. Without stdin, whose
// bytes an attempt may have taken, Exec starts such an exec again, up to
// execStartRetries times, and the caller sees only the attempt that ran. An exec
// that still does not start ends with the Engine's code (126 on Engine 20.10;
// 126, 127 or 128 on a current one: notStartedCode) and its message on stderr.
func (rt *Runtime) Exec(ctx context.Context, sb *backend.Sandbox, req backend.ExecRequest, s backend.Streams) (*backend.Exec, error) {
	return (&execs{engine: rt.Engine, channel: rt.channelOf(sb.PrimaryID)}).start(ctx, sb, req, s)
}

// execs are the commands run in sandboxes through the Engine's exec API, or a
// sandbox's command channel when it has one (cmdchannel.go).
type execs struct {
	engine  client.APIClient
	channel *cmdChannel
}

// start is Exec.
func (x *execs) start(ctx context.Context, sb *backend.Sandbox, req backend.ExecRequest, s backend.Streams) (*backend.Exec, error) {
	argv, err := backend.ExecArgv(ctx, execChannel{engine: x.engine}, sb.PrimaryID, req)
	if err != nil {
		if strings.Contains(err.Error(), "is not running") {
			return nil, failed("sandbox %s is not running (start it with `airlock up -d`)", sb.ID)
		}
		return nil, err
	}
	if !req.Stdin {
		s.Stdin = nil
	}
	if ch := x.channel; ch.usable(req) {
		if req.BeforeStart != nil {
			if err := req.BeforeStart(); err != nil {
				return nil, err
			}
		}
		if ex, ok := ch.start(argv, s); ok {
			return ex, nil
		}
		req.BeforeStart = nil // called once
	}
	id, hj, err := x.startExec(ctx, sb, argv, req, req.BeforeStart)
	if err != nil {
		return nil, err
	}
	cur := &execID{id: id}
	exitCode := func(ctx context.Context) (int, error) {
		id, code, ok := cur.ended()
		if ok {
			return code, nil // execSettled saw the end: no second inspect
		}
		return x.execCode(ctx, id)
	}
	resize := func(ctx context.Context, height, width uint) error {
		return x.engine.ContainerExecResize(ctx, cur.get(), container.ResizeOptions{Height: height, Width: width})
	}
	if req.Direct && req.TTY && req.Stdin {
		if f := rawFile(hj.Conn); f != nil {
			// What came with the Engine's answer was read with it, into the
			// client's buffer: it goes first (the command's first output).
			var ahead []byte
			if n := hj.Reader.Buffered(); n > 0 {
				b, _ := hj.Reader.Peek(n)
				ahead = append([]byte(nil), b...)
			}
			hj.Close() // f holds the stream
			ended := make(chan struct{})
			ex := backend.NewDirectExec(id, f, ended, x.directDone(ctx, cur, ended), exitCode, resize)
			ex.DirectAhead = ahead
			return ex, nil
		}
	}
	if req.Stdin {
		// Not started again (the attempt may have taken some of stdin), but
		// not silent either.
		done := make(chan error, 1)
		go func() {
			err := <-pump(hj, req.TTY, s)
			if err == nil && !x.execSettled(ctx, cur) {
				_, _ = fmt.Fprintln(streamWriter(s, true), "airlock: the Engine could not start the command (its connection ended before the command ran)")
			}
			done <- err
		}()
		return backend.NewExec(id, done, exitCode, resize), nil
	}
	return backend.NewExec(id, x.pumpRetrying(ctx, sb, argv, req, s, cur, hj), exitCode, resize), nil
}

// pumpRetrying copies an exec's output (without stdin) to s, and starts it
// again, up to execStartRetries times, while the Engine says it did not start
// its process; the output of an attempt that did not start is held back
// (startGate). Its channel yields once the exec that ran, or the last
// attempt, ended.
func (x *execs) pumpRetrying(ctx context.Context, sb *backend.Sandbox, argv []string, req backend.ExecRequest, s backend.Streams, cur *execID, hj types.HijackedResponse) <-chan error {
	done := make(chan error, 1)
	go func() {
		for attempt := 0; ; attempt++ {
			gate := &startGate{started: func() bool { return x.execStarted(ctx, cur.get()) }, out: s}
			err := <-pump(hj, req.TTY, backend.Streams{Stdout: gate.writer(false), Stderr: gate.writer(true)})
			started := gate.open() || err != nil || x.execSettled(ctx, cur)
			if started || attempt == execStartRetries {
				done <- errors.Join(err, gate.flush(!started))
				return
			}
			select {
			case <-ctx.Done():
				done <- errors.Join(ctx.Err(), gate.flush(true))
				return
			case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
			}
			id, next, err := x.startExec(ctx, sb, argv, req, nil)
			if err != nil {
				// The first attempt's code and message stand.
				done <- gate.flush(true)
				return
			}
			cur.set(id)
			hj = next
		}
	}()
	return done
}

// rawFile is a duplicate of a hijacked connection's socket (the Engine client
// gives the socket itself when it is a plain one), so that its stream can be
// handed over; nil otherwise (TLS). What the client read ahead with the
// answer is in its reader, not in the socket (Exec hands it over apart).
func rawFile(conn net.Conn) *os.File {
	var f *os.File
	var err error
	switch c := conn.(type) {
	case *net.UnixConn:
		f, err = c.File()
	case *net.TCPConn:
		f, err = c.File()
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return f
}

// directPoll is how often the end of a Direct exec whose holder did not say
// (it went away) is asked of the Engine.
const directPoll = time.Second

// directDone ends once the holder of a Direct exec's stream says it ended
// (Exec.EndDirect closes ended), or the Engine says the exec no longer runs.
func (x *execs) directDone(ctx context.Context, cur *execID, ended <-chan struct{}) <-chan error {
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(directPoll)
		defer t.Stop()
		for {
			select {
			case <-ended:
				done <- nil
				return
			case <-ctx.Done():
				done <- ctx.Err()
				return
			case <-t.C:
				if in, err := x.engine.ContainerExecInspect(ctx, cur.get()); err == nil && !in.Running {
					done <- nil
					return
				}
			}
		}
	}()
	return done
}

// execStartRetries is how many more times Exec starts an exec the Engine failed
// to start.
const execStartRetries = 2

// startExec creates an Engine exec of argv and attaches to it, which starts
// it; before, when not nil, is called between the two.
func (x *execs) startExec(ctx context.Context, sb *backend.Sandbox, argv []string, req backend.ExecRequest, before func() error) (string, types.HijackedResponse, error) {
	resp, err := x.engine.ContainerExecCreate(ctx, sb.PrimaryID, container.ExecOptions{
		Cmd: argv, Tty: req.TTY, AttachStdin: req.Stdin, AttachStdout: true, AttachStderr: true,
		WorkingDir: req.Workdir,
	})
	if err != nil {
		if strings.Contains(err.Error(), "is not running") {
			return "", types.HijackedResponse{}, failed("sandbox %s is not running (start it with `airlock up -d`)", sb.ID)
		}
		return "", types.HijackedResponse{}, failed("cannot create the exec: %v", err)
	}
	if before != nil {
		if err := before(); err != nil {
			return "", types.HijackedResponse{}, err
		}
	}
	hj, err := x.engine.ContainerExecAttach(ctx, resp.ID, container.ExecAttachOptions{Tty: req.TTY})
	if err != nil {
		return "", types.HijackedResponse{}, failed("cannot attach to the exec: %v", err)
	}
	return resp.ID, hj, nil
}

// execStarted tells whether the Engine started the exec's process: it runs, or
// it ran (it has a PID), or it ended with another code than those the Engine
// gives an exec it could not start (notStartedCode). When the Engine cannot say,
// it answers yes: then nothing is retried or held back.
func (x *execs) execStarted(ctx context.Context, id string) bool {
	in, err := x.engine.ContainerExecInspect(ctx, id)
	if err != nil {
		return true
	}
	return in.Running || in.Pid != 0 || !notStartedCode(in.ExitCode)
}

// notStartedCode tells whether code is one the Engine gives an exec whose process
// it could not start: 126 on Engine 20.10 whatever the cause; a current Engine
// chooses by runc's message, as for a container's start: 126 (permission
// denied), 127 (not found, no such file or directory: a missing working
// directory too; a failed runc exec call) or 128 (anything else, as runc's
// "read init-p: connection reset by peer" under load). A process that ran has a
// PID, whatever its code (docs/engines.md).
func notStartedCode(code int) bool { return code >= ExitNotStarted && code <= 128 }

// execSettled waits, at most execSettleWait, until the Engine no longer runs
// the exec, and tells whether it started its process (execStarted): the
// Engine marks an exec running before it starts the process, and a start that
// fails late (its connection to the client ended first) ends with no PID and
// 126 only then.
func (x *execs) execSettled(ctx context.Context, cur *execID) bool {
	deadline := time.Now().Add(execSettleWait)
	for {
		id := cur.get()
		in, err := x.engine.ContainerExecInspect(ctx, id)
		switch {
		case err != nil:
			return true
		case !in.Running:
			cur.saw(id, in.ExitCode)
			return in.Pid != 0 || !notStartedCode(in.ExitCode)
		case time.Now().After(deadline):
			return in.Running || in.Pid != 0 || !notStartedCode(in.ExitCode)
		}
		select {
		case <-ctx.Done():
			return true
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// execSettleWait bounds execSettled's wait.
const execSettleWait = 5 * time.Second

// ExitNotStarted is the code Engine 20.10 gives an exec whose process it could
// not start (a current Engine 126, 127 or 128: notStartedCode).
const ExitNotStarted = 126

// execID is the Engine ID of an exec's current attempt, and its exit code
// once an inspect saw it end.
type execID struct {
	mu   sync.Mutex
	id   string
	done bool
	code int
}

func (e *execID) get() string   { e.mu.Lock(); defer e.mu.Unlock(); return e.id }
func (e *execID) set(id string) { e.mu.Lock(); e.id, e.done = id, false; e.mu.Unlock() }

// saw records that the attempt id ended with code.
func (e *execID) saw(id string, code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id == e.id {
		e.done, e.code = true, code
	}
}

// ended returns the current attempt, and its exit code when it was seen to end.
func (e *execID) ended() (string, int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.id, e.code, e.done
}

// startGate holds an exec attempt's output back until the Engine says its
// process started: what comes before that is the Engine's message that it could
// not start it. The output of a process that started passes at once after the
// first check (one Engine call on its first write); more than maxGateHeld bytes
// open the gate too.
type startGate struct {
	mu      sync.Mutex
	started func() bool
	out     backend.Streams
	checked bool
	opened  bool
	held    bytes.Buffer
	order   []gateChunk
}

type gateChunk struct {
	stderr bool
	n      int
}

const maxGateHeld = 64 << 10

func (g *startGate) open() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.opened }

func (g *startGate) writer(stderr bool) io.Writer {
	return gateWriter{g: g, stderr: stderr}
}

type gateWriter struct {
	g      *startGate
	stderr bool
}

func (w gateWriter) Write(p []byte) (int, error) {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened && !g.checked {
		g.checked = true
		g.opened = g.started()
	}
	if !g.opened && g.held.Len()+len(p) > maxGateHeld {
		if err := g.release(false); err != nil {
			return 0, err
		}
	}
	if g.opened {
		return streamWriter(g.out, w.stderr).Write(p)
	}
	g.held.Write(p)
	g.order = append(g.order, gateChunk{stderr: w.stderr, n: len(p)})
	return len(p), nil
}

// flush writes what the gate holds: as it came, or, when the process never
// started, as the Engine's message on stderr.
func (g *startGate) flush(notStarted bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.release(notStarted)
}

func (g *startGate) release(notStarted bool) error {
	g.opened = true
	held := g.held.Bytes()
	g.held = bytes.Buffer{}
	order := g.order
	g.order = nil
	if notStarted {
		if msg := bytes.TrimSpace(held); len(msg) > 0 {
			_, err := fmt.Fprintf(streamWriter(g.out, true), "airlock: the Engine could not start the command: %s\n", msg)
			return err
		}
		return nil
	}
	for _, c := range order {
		if _, err := streamWriter(g.out, c.stderr).Write(held[:c.n]); err != nil {
			return err
		}
		held = held[c.n:]
	}
	return nil
}

// writer is the stream a gate writes to: stderr falls back to stdout (a TTY has one).
func streamWriter(s backend.Streams, stderr bool) io.Writer {
	switch {
	case stderr && s.Stderr != nil:
		return s.Stderr
	case s.Stdout != nil:
		return s.Stdout
	}
	return io.Discard
}

// execCode returns the exit code of a finished Engine exec.
func (x *execs) execCode(ctx context.Context, id string) (int, error) {
	in, err := x.engine.ContainerExecInspect(ctx, id)
	if err != nil {
		return 0, failed("cannot inspect the exec: %v", err)
	}
	if in.Running {
		return 0, fmt.Errorf("cannot read the exit code: exec %s still runs", id)
	}
	return in.ExitCode, nil
}
