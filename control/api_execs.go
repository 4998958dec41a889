package control

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
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
	ex, done, err := s.svc.ExecStream(id, &ExecRequest{ID: req.ID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir}, stdin, fw.stream("stdout"), fw.stream("stderr"))
	if err != nil {
		fw.broken = true
		fw.mu.Unlock()
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", client.NDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fw.frameLocked(client.ExecFrame{Exec: toClientExec(ex)})
	fw.mu.Unlock()
	code := <-done
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
