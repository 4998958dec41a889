package control

import (
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// execRequest is the domain's exec request of an API one: its timeout and
// kill grace checked.
func execRequest(req *client.ExecRequest) (*ExecRequest, error) {
	out := &ExecRequest{ID: req.ID, Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir, Shell: req.Shell}
	var err error
	if out.Timeout, err = seconds("timeout", req.Timeout); err != nil {
		return nil, err
	}
	if out.KillGrace, err = seconds("kill_grace", req.KillGrace); err != nil {
		return nil, err
	}
	return out, nil
}

// signalExec: POST /v1/sandboxes/{id}/execs/{exec}/signal {"signal": "TERM"}
// sends a signal to a running exec's process group; 200 with its record.
func (s *server) signalExec(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Signal == "" {
		writeError(w, errorf(ErrInvalidRequest, "signal: required (a name such as \"TERM\" or a number such as \"15\")"))
		return
	}
	ex, err := s.svc.SignalExec(r.PathValue("id"), r.PathValue("exec"), req.Signal)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toClientExec(ex))
}

// listExecs: GET /v1/sandboxes/{id}/execs[?running=1][&limit=N] lists the
// sandbox's exec records, oldest first.
func (s *server) listExecs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, errorf(ErrInvalidRequest, "limit: %q is not a number of execs (1 or more)", v))
			return
		}
		limit = n
	}
	list, err := s.svc.ListExecs(r.PathValue("id"), truthy(q.Get("running")), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]*client.Exec, 0, len(list))
	for _, ex := range list {
		out = append(out, toClientExec(ex))
	}
	writeJSON(w, http.StatusOK, out)
}

// execOutput: GET /v1/sandboxes/{id}/execs/{exec}/output?stream=stdout|stderr[&from=N][&follow=1]
// answers an output file of an exec run in the background from byte N, as
// bytes; with follow, what the command writes too, until it ends.
func (s *server) execOutput(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stream := q.Get("stream")
	switch stream {
	case "":
		stream = client.OutputStdout
	case client.OutputStdout, client.OutputStderr:
	default:
		writeError(w, errorf(ErrInvalidRequest, "stream: %q is not stdout or stderr", stream))
		return
	}
	var from int64
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, errorf(ErrInvalidRequest, "from: %q is not a byte offset (0 or more)", v))
			return
		}
		from = n
	}
	// Checked before the answer starts: an unknown exec, or one without files.
	ex, err := s.svc.GetExec(r.PathValue("id"), r.PathValue("exec"))
	if err != nil {
		writeError(w, err)
		return
	}
	if ex.StdoutPath == "" {
		writeError(w, errorf(store.ErrInvalidState, "exec %s streamed its output to its caller: it has no output files (start it with \"background\": true)", ex.ID))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := s.svc.ExecOutput(r.Context(), ex.SandboxID, ex.ID, stream == client.OutputStderr, from, truthy(q.Get("follow")), w, func() { _ = rc.Flush() }); err != nil {
		s.log.Warn("cannot stream an exec's output", "sandbox", ex.SandboxID, "exec", ex.ID, "error", err.Error())
	}
}
