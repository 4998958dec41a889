package control

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/client"
)

// server is the API layer: it maps the HTTP/JSON API (package client's types)
// onto the Service and the Service's results and errors back onto it. The
// handlers are in api_*.go, one file per resource.
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

// decode reads a request body strictly: an unknown field is an error.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot decode the request: " + err.Error()}
	}
	return nil
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	h := client.Health{PID: os.Getpid(), BuildID: s.opts.BuildID, Version: s.opts.Version, LogPath: LogFile(s.opts.Paths)}
	if s.svc != nil {
		for _, rt := range s.svc.runtimes() {
			h.Engines = append(h.Engines, rt.Location().String())
		}
	}
	writeJSON(w, http.StatusOK, h)
}
