package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if upgradesTo(r, client.StreamProtocol) && !req.Interactive {
		s.execAttach(w, &req, r.PathValue("id"))
		return
	}
	if req.TTY {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot run on a TTY: only an attached exec (Upgrade: " + client.StreamProtocol + ") has one"})
		return
	}
	if accepts(r, client.NDJSON) && !req.Interactive {
		s.execStream(w, &req, r.PathValue("id"))
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
	ex, err := exec(r.PathValue("id"), &ExecRequest{ID: req.ID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir})
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
	out := &client.Exec{ID: e.ID, SandboxID: e.SandboxID, Cmd: e.Cmd, StartedAt: e.StartedAt, ExitCode: e.ExitCode, Stdout: e.StdoutPath, Stderr: e.StderrPath, Truncated: e.Truncated}
	if !e.FinishedAt.IsZero() {
		t := e.FinishedAt
		out.FinishedAt = &t
	}
	return out
}

// execStream answers a streamed exec: the record, the output frames as they
// come, then the exit code (client.ExecFrame).
func (s *server) execStream(w http.ResponseWriter, req *client.ExecRequest, id string) {
	fw := &frameWriter{w: w}
	fw.flusher, _ = w.(http.Flusher)
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = bytes.NewReader(req.Stdin)
	}
	// Output waits for the header and the record frame.
	fw.mu.Lock()
	se, err := s.svc.ExecStream(id, &ExecRequest{ID: req.ID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir}, stdin, fw.stream("stdout"), fw.stream("stderr"))
	if err != nil {
		fw.broken = true
		fw.mu.Unlock()
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", client.NDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fw.frameLocked(client.ExecFrame{Exec: toClientExec(se.Record)})
	fw.mu.Unlock()
	code := <-se.Done
	fw.frame(client.ExecFrame{ExitCode: &code})
}

// frameWriter writes the frames of a streamed exec, each flushed at once. A
// caller that went away is written to no more, but the command's output is
// still drained (a command blocked on a full pipe would never end).
type frameWriter struct {
	mu      sync.Mutex
	w       io.Writer
	flusher http.Flusher
	broken  bool
}

func (f *frameWriter) frame(fr client.ExecFrame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frameLocked(fr)
}

func (f *frameWriter) frameLocked(fr client.ExecFrame) {
	if f.broken {
		return
	}
	enc := json.NewEncoder(f.w)
	enc.SetEscapeHTML(false) // output is read by people and programs, not pasted into HTML
	if err := enc.Encode(fr); err != nil {
		f.broken = true
		return
	}
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

// stream is the writer of one output stream.
func (f *frameWriter) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		f.frame(client.OutputFrame(name, p))
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
func (s *server) execAttach(w http.ResponseWriter, req *client.ExecRequest, id string) {
	if req.Stdin != nil {
		writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot take stdin in the request of an attached exec: send it on the stream"})
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, errors.New("cannot attach: the connection cannot be taken over"))
		return
	}
	stdinR, stdinW := io.Pipe()
	out := &streamWriter{}
	// Output waits for the 101 answer.
	out.mu.Lock()
	se, err := s.svc.ExecStream(id, &ExecRequest{ID: req.ID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir, TTY: req.TTY},
		stdinR, out.stream(client.FrameStdout), out.stream(client.FrameStderr))
	if err != nil {
		out.broken = true
		out.mu.Unlock()
		stdinW.Close()
		writeError(w, err)
		return
	}
	conn, bufrw, err := hj.Hijack()
	if err == nil {
		_, err = fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", client.StreamProtocol)
	}
	if err != nil {
		// The command runs to its end unseen; its record has the code.
		out.broken = true
		out.mu.Unlock()
		stdinW.Close()
		if conn != nil {
			conn.Close()
		}
		return
	}
	out.w = conn
	out.mu.Unlock()
	go func() {
		// The client's frames: stdin until its end, and resizes.
		defer stdinW.Close()
		for {
			typ, p, err := client.ReadFrame(bufrw.Reader)
			if err != nil {
				return
			}
			switch typ {
			case client.FrameStdin:
				if len(p) == 0 {
					// On a TTY the end of stdin is not passed on: the Engine
					// would end the terminal's output with it.
					if !req.TTY {
						stdinW.Close()
					}
					continue
				}
				<-se.Running() // a size sent first is set before the input arrives
				_, _ = stdinW.Write(p)
			case client.FrameResize:
				var sz client.ResizeFrame
				if json.Unmarshal(p, &sz) == nil && sz.Height > 0 && sz.Width > 0 {
					_ = se.Resize(sz.Height, sz.Width)
				}
			}
		}
	}()
	code := <-se.Done
	b, _ := json.Marshal(client.ExitFrame{ExecID: se.Record.ID, ExitCode: code})
	out.frame(client.FrameExit, b)
	conn.Close()
}

// streamWriter writes the frames of an attached exec. A client that went away
// is written to no more; the output is still drained.
type streamWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

func (s *streamWriter) frame(typ byte, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(p) > 0 || typ == client.FrameExit {
		if s.broken {
			return
		}
		chunk := p[:min(len(p), client.MaxFramePayload)]
		if err := client.WriteFrame(s.w, typ, chunk); err != nil {
			s.broken = true
			return
		}
		p = p[len(chunk):]
		if typ == client.FrameExit {
			return
		}
	}
}

func (s *streamWriter) stream(typ byte) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		s.frame(typ, p)
		return len(p), nil
	})
}
