package control

import (
	"net/http"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
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
