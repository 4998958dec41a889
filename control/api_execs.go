package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	xreq, err := execRequest(&req)
	if err != nil {
		writeError(w, err)
		return
	}
	if upgradesTo(r, client.StreamProtocol) && !req.Interactive {
		if req.Background {
			writeError(w, errorf(ErrInvalidRequest, "background: an attached exec has a client; run it in the background without the upgrade"))
			return
		}
		s.execAttach(w, r, &req, xreq, r.PathValue("id"))
		return
	}
	if req.TTY {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot run on a TTY: only an attached exec (Upgrade: " + client.StreamProtocol + ") has one"})
		return
	}
	if accepts(r, client.NDJSON) && !req.Interactive && !req.Background {
		s.execStream(w, r, &req, xreq, r.PathValue("id"))
		return
	}
	if req.Stdin != nil {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot take stdin: only a streamed exec (Accept: application/x-ndjson) reads it"})
		return
	}
	exec := s.svc.Exec
	if req.Interactive {
		exec = s.svc.RecordExec
	}
	ex, err := exec(r.PathValue("id"), xreq)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, toClientExec(ex))
}

func (s *server) getExec(w http.ResponseWriter, r *http.Request) {
	ex, err := s.svc.GetExec(r.PathValue("id"), r.PathValue("exec"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientExec(ex))
}

func (s *server) finishExec(w http.ResponseWriter, r *http.Request) {
	var req client.FinishRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ex, err := s.svc.FinishExec(r.PathValue("id"), r.PathValue("exec"), req.ExitCode)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientExec(ex))
}

// toClientExec is the API's view of an exec record.
func toClientExec(e store.Exec) *client.Exec {
	out := &client.Exec{ID: e.ID, SandboxID: e.SandboxID, Cmd: e.Cmd, StartedAt: e.StartedAt, ExitCode: e.ExitCode, Stdout: e.StdoutPath, Stderr: e.StderrPath, Truncated: e.Truncated, TimedOut: e.TimedOut}
	if !e.FinishedAt.IsZero() {
		t := e.FinishedAt
		out.FinishedAt = &t
	}
	return out
}

// execStream answers a streamed exec: the record, the output frames as they
// come, then the exit code (client.ExecFrame), each flushed at once. A client
// that goes away before the end has the command killed.
func (s *server) execStream(w http.ResponseWriter, r *http.Request, req *client.ExecRequest, xreq *ExecRequest, id string) {
	flusher, _ := w.(http.Flusher)
	frame := func(fr client.ExecFrame) func() error {
		return func() error {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false) // output is read by people and programs, not pasted into HTML
			if err := enc.Encode(fr); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		}
	}
	output := func(name string) func([]byte) func() error {
		return func(p []byte) func() error { return frame(client.OutputFrame(name, p)) }
	}
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = bytes.NewReader(req.Stdin)
	}
	sink := &frameSink{}
	// Output waits for the header and the record frame.
	sink.mu.Lock()
	se, err := s.svc.ExecStream(id, xreq, stdin,
		sink.writer(output("stdout")), sink.writer(output("stderr")))
	if err != nil {
		sink.broken = true
		sink.mu.Unlock()
		writeError(w, err)
		return
	}
	if err := se.Recorded(); err != nil {
		// Its command never starts; what it says goes nowhere.
		sink.broken = true
		sink.mu.Unlock()
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", client.NDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	sink.sendLocked(frame(client.ExecFrame{Exec: toClientExec(se.Record)}))
	sink.mu.Unlock()
	// The body read to its end: only then does the server watch the
	// connection, and end the request's context when the client goes.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	var code int
	select {
	case code = <-se.Done:
	case <-r.Context().Done():
		// The client went away: the command goes too (its end is recorded).
		se.Kill()
		code = <-se.Done
	}
	sink.send(frame(client.ExecFrame{ExitCode: &code}))
}

// frameSink writes an exec's frames to its client one at a time. A client
// that went away is written to no more, but the command's output is still
// drained (a command blocked on a full pipe would never end).
type frameSink struct {
	mu     sync.Mutex
	broken bool // a write failed
}

// send runs write unless an earlier one failed.
func (f *frameSink) send(write func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sendLocked(write)
}

func (f *frameSink) sendLocked(write func() error) {
	if !f.broken && write() != nil {
		f.broken = true
	}
}

// writer is an output stream whose writes go out as frame(p).
func (f *frameSink) writer(frame func(p []byte) func() error) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		f.send(frame(p))
		return len(p), nil
	})
}

type writerFunc func(p []byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// upgradesTo reports whether the request asks to switch to protocol
// (Connection: Upgrade, Upgrade: protocol).
func upgradesTo(r *http.Request, protocol string) bool {
	upgrade := false
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			upgrade = upgrade || strings.EqualFold(strings.TrimSpace(t), "upgrade")
		}
	}
	return upgrade && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), protocol)
}

// execAttach answers an attached exec: 101, then frames both ways
// (client.StreamProtocol): stdin and resizes in, output out, the exit frame last.
func (s *server) execAttach(w http.ResponseWriter, r *http.Request, req *client.ExecRequest, xreq *ExecRequest, id string) {
	if req.Stdin != nil {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot take stdin in the request of an attached exec: send it on the stream"})
		return
	}
	// A terminal's stream is handed over whole to a client on this host
	// (client.FrameDirect), which asked for it.
	_, local := r.Context().Value(http.LocalAddrContextKey).(*net.UnixAddr)
	direct := req.Direct && req.TTY && local
	serveStream(w, req.TTY, direct, func(stdin io.Reader, stdout, stderr io.Writer) (streamTarget, error) {
		xreq.TTY, xreq.Direct, xreq.Height, xreq.Width = req.TTY, direct, req.Height, req.Width
		se, err := s.svc.ExecStream(id, xreq, stdin, stdout, stderr)
		if err != nil {
			return nil, err
		}
		return execTarget{se}, nil
	})
}

// execTarget is an attached exec as serveStream drives it.
type execTarget struct{ se *StreamedExec }

func (e execTarget) running() <-chan struct{}        { return e.se.Running() }
func (e execTarget) resize(height, width uint) error { return e.se.Resize(height, width) }
func (e execTarget) signal(sig string) error         { return e.se.Signal(sig) }

// close: the client went away; the command is killed unless it ended.
func (e execTarget) close()                     { e.se.Kill() }
func (e execTarget) direct() (*os.File, []byte) { return e.se.Direct() }
func (e execTarget) endDirect()                 { e.se.EndDirect() }
func (e execTarget) resume()                    {}
func (e execTarget) wait() client.ExitFrame {
	return client.ExitFrame{ExecID: e.se.Record.ID, ExitCode: <-e.se.Done}
}

// handOver sends the client the first frame of a direct stream
// (client.FrameDirect): with the terminal's stream itself (SCM_RIGHTS) when
// the target has one, else without, and the frames carry it as for any other
// client. Should the connection not take a descriptor, the stream is copied
// to and from frames here.
func handOver(conn net.Conn, sink *frameSink, target streamTarget, stdin io.Reader, stdout func([]byte) func() error) {
	<-target.running()
	f, ahead := target.direct()
	uc, unix := conn.(*net.UnixConn)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(ahead) > 0 {
		// Before the stream: the client writes the frames it reads in order.
		sink.sendLocked(stdout(ahead))
	}
	if f == nil || !unix {
		sink.sendLocked(func() error { return client.WriteFrame(conn, client.FrameDirect, nil) })
		if f != nil {
			go func() {
				defer f.Close()
				defer target.endDirect()
				_, _ = io.Copy(sink.writer(stdout), f)
			}()
			go func() { _, _ = io.Copy(f, stdin) }()
		}
		return
	}
	defer f.Close()
	sink.sendLocked(func() error {
		_, _, err := uc.WriteMsgUnix(client.FrameBytes(client.FrameDirect, []byte(client.DirectFD)), syscall.UnixRights(int(f.Fd())), nil)
		return err
	})
}

// streamTarget is what an attached stream's frames drive: an exec, or a
// sandbox's main command.
type streamTarget interface {
	// running is closed once input may be sent (a size sent first is set).
	running() <-chan struct{}
	resize(height, width uint) error
	signal(sig string) error
	// direct is, once running is closed, the terminal stream handed over
	// for the client (nil: the streams given to start carry it) and the
	// output read before it, which goes first; endDirect says its holder
	// read its end.
	direct() (*os.File, []byte)
	endDirect()
	// resume starts the sandbox of an attached main command (FrameResume);
	// nothing for an exec.
	resume()
	// wait gives the exit frame once the target ended and its output was sent.
	wait() client.ExitFrame
	// close ends the attachment early: the client went away (an exec runs
	// on to its end, recorded; a main command too, unattached).
	close()
}

// serveStream answers a stream upgrade (client.StreamProtocol): start is
// given the stdin the client's frames feed and writers that send output
// frames; once it started, 101, then frames both ways — stdin, resizes and
// signals in, output out, the exit frame last. An error from start is an
// ordinary JSON answer.
func serveStream(w http.ResponseWriter, tty, direct bool, start func(stdin io.Reader, stdout, stderr io.Writer) (streamTarget, error)) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, errors.New("cannot attach: the connection cannot be taken over"))
		return
	}
	stdinR, stdinW := io.Pipe()
	var conn net.Conn // set before any output goes out
	frames := func(typ byte) func([]byte) func() error {
		return func(p []byte) func() error {
			return func() error {
				for len(p) > 0 {
					n := min(len(p), client.MaxFramePayload)
					if err := client.WriteFrame(conn, typ, p[:n]); err != nil {
						return err
					}
					p = p[n:]
				}
				return nil
			}
		}
	}
	sink := &frameSink{}
	// Output waits for the 101 answer.
	sink.mu.Lock()
	target, err := start(stdinR, sink.writer(frames(client.FrameStdout)), sink.writer(frames(client.FrameStderr)))
	if err != nil {
		sink.broken = true
		sink.mu.Unlock()
		stdinW.Close()
		writeError(w, err)
		return
	}
	var bufrw *bufio.ReadWriter
	conn, bufrw, err = hj.Hijack()
	if err == nil {
		extra := ""
		if direct {
			extra = client.DirectHeader + ": 1\r\n" // a FrameDirect comes first
		}
		_, err = fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s\r\n", client.StreamProtocol, extra)
	}
	if err != nil {
		// The target runs to its end unseen (an exec's record has the code).
		sink.broken = true
		sink.mu.Unlock()
		stdinW.Close()
		target.close()
		if conn != nil {
			conn.Close()
		}
		return
	}
	sink.mu.Unlock()
	go func() {
		// The client's frames: stdin until its end, resizes and signals.
		defer stdinW.Close()
		for {
			typ, p, err := client.ReadFrame(bufrw.Reader)
			if err != nil {
				target.close() // the client went away
				return
			}
			switch typ {
			case client.FrameStdin:
				if len(p) == 0 {
					// On a TTY the end of stdin is not passed on: the Engine
					// would end the terminal's output with it.
					if !tty {
						stdinW.Close()
					}
					continue
				}
				<-target.running() // a size sent first is set before the input arrives
				_, _ = stdinW.Write(p)
			case client.FrameResize:
				var sz client.ResizeFrame
				if json.Unmarshal(p, &sz) == nil && sz.Height > 0 && sz.Width > 0 {
					_ = target.resize(sz.Height, sz.Width)
				}
			case client.FrameSignal:
				var sf client.SignalFrame
				if json.Unmarshal(p, &sf) == nil && sf.Signal != "" {
					_ = target.signal(sf.Signal)
				}
			case client.FrameDirectEnded:
				target.endDirect()
			case client.FrameResume:
				target.resume()
			}
		}
	}()
	if direct {
		handOver(conn, sink, target, stdinR, frames(client.FrameStdout))
	}
	exit := target.wait()
	b, _ := json.Marshal(exit)
	sink.send(frames(client.FrameExit)(b))
	conn.Close()
}
