package control

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/client"
)

// server maps the HTTP/JSON API onto the Service.
type server struct {
	opts Options
	log  *slog.Logger
	svc  *Service
}

func (s *server) routes(tcp bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	if s.svc != nil {
		mux.HandleFunc("POST /v1/sandboxes", s.create)
		mux.HandleFunc("GET /v1/sandboxes", s.list)
		mux.HandleFunc("GET /v1/sandboxes/{id}", s.get)
		mux.HandleFunc("DELETE /v1/sandboxes/{id}", s.remove)
		mux.HandleFunc("POST /v1/sandboxes/{id}/stop", s.stop)
		mux.HandleFunc("POST /v1/sandboxes/{id}/resume", s.resume)
		mux.HandleFunc("GET /v1/sandboxes/{id}/events", s.events)
		mux.HandleFunc("GET /v1/sandboxes/{id}/attach", s.attach)
		mux.HandleFunc("POST /v1/sandboxes/{id}/execs", s.exec)
		mux.HandleFunc("GET /v1/sandboxes/{id}/execs/{exec}", s.getExec)
		mux.HandleFunc("POST /v1/sandboxes/{id}/execs/{exec}/finish", s.finishExec)
		mux.HandleFunc("POST /v1/prune", s.prune)
	}
	var h http.Handler = mux
	if tcp && !s.opts.NoToken {
		h = s.requireToken(h)
	}
	return h
}

// requireToken accepts `Authorization: Bearer <t>` or `Token <t>`.
func (s *server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		var got string
		if v, ok := strings.CutPrefix(auth, "Bearer "); ok {
			got = v
		} else if v, ok := strings.CutPrefix(auth, "Token "); ok {
			got = v
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) != 1 {
			writeError(w, &client.Error{Status: http.StatusUnauthorized, Reason: client.ReasonUnauthorized, Message: "a valid token is required (Authorization: Bearer <token>)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var ce *client.Error
	if !errors.As(err, &ce) {
		ce = &client.Error{Status: http.StatusInternalServerError, Reason: client.ReasonInternal, Message: err.Error()}
	}
	if ce.Status == 0 {
		ce.Status = statusOf(ce.Reason)
	}
	writeJSON(w, ce.Status, ce)
}

func statusOf(reason string) int {
	switch reason {
	case client.ReasonSandboxNotFound, client.ReasonExecNotFound:
		return http.StatusNotFound
	case client.ReasonIDAlreadyUsed, client.ReasonInvalidState:
		return http.StatusConflict
	case client.ReasonInvalidID, client.ReasonInvalidRequest, client.ReasonBadCursor, client.ReasonConfig:
		return http.StatusBadRequest
	case client.ReasonUnauthorized:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	h := client.Health{PID: os.Getpid(), BuildID: s.opts.BuildID, Version: s.opts.Version, LogPath: LogFile(s.opts.Paths)}
	if s.svc != nil {
		for _, rt := range s.svc.runtimes() {
			h.Engines = append(h.Engines, rt.Endpoint.String())
		}
	}
	writeJSON(w, http.StatusOK, h)
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot decode the request: " + err.Error()}
	}
	return nil
}

func (s *server) create(w http.ResponseWriter, r *http.Request) {
	var req client.CreateRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	sb, err := s.svc.Create(r.Context(), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, sb)
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	labels := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			writeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "label filters are KEY=VALUE"})
			return
		}
		labels[k] = v
	}
	list, err := s.svc.List(labels)
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []client.Sandbox{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sb)
}

func (s *server) stop(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Stop(r.PathValue("id"), "")
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, sb)
}

func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	var req client.ResumeRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			writeError(w, err)
			return
		}
	}
	sb, err := s.svc.Resume(r.PathValue("id"), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, sb)
}

func (s *server) remove(w http.ResponseWriter, r *http.Request) {
	sb, err := s.svc.Delete(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, sb)
}

// events streams NDJSON: the backlog after `from`, then (with follow=1) live events.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, &client.Error{Reason: client.ReasonBadCursor, Message: "from must be a sequence number"})
			return
		}
		from = n
	}
	follow := r.URL.Query().Get("follow") == "1"
	backlog, live, cancel, err := s.svc.Subscribe(r.PathValue("id"), from, follow)
	if err != nil {
		writeError(w, err)
		return
	}
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	for _, ev := range backlog {
		_ = enc.Encode(ev)
	}
	if flusher != nil {
		flusher.Flush()
	}
	if !follow {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-live:
			if !ok {
				_ = enc.Encode(client.Event{Kind: "stream.error", Reason: "the subscriber fell behind or the daemon stopped; resume from the last sequence"})
				return
			}
			if err := enc.Encode(ev); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// attach holds the request open while a client is attached to the sandbox, so the
// idle reaper leaves it alone.
func (s *server) attach(w http.ResponseWriter, r *http.Request) {
	release, err := s.svc.Attach(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	<-r.Context().Done()
}

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
	ex, err := exec(r.PathValue("id"), &req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, ex)
}

func (s *server) getExec(w http.ResponseWriter, r *http.Request) {
	ex, err := s.svc.GetExec(r.PathValue("id"), r.PathValue("exec"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ex)
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
	writeJSON(w, http.StatusOK, ex)
}
