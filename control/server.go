package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/daemonfiles"
)

// server is the API layer: it maps the HTTP/JSON API (package client's types)
// onto the daemon's domain and its results and errors back onto it. The
// handlers are in api_*.go, one file per resource.
type server struct {
	opts Options
	log  *slog.Logger
	// svc is the domain the handlers call; nil for a daemon without a
	// Service (newServer keeps a nil *Service out of it).
	svc domain
}

// domain is what the handlers see of the daemon: the operations of the API's
// routes, in the domain's types (a *Service is one).
type domain interface {
	Create(ctx context.Context, req *CreateRequest) (Sandbox, error)
	Get(id string) (Sandbox, error)
	List(labels map[string]string) ([]Sandbox, error)
	Delete(id string) (Sandbox, error)
	Stop(id, reason string) (Sandbox, error)
	Resume(id string, secrets map[string]string) (Sandbox, error)
	UpdateLifetime(id string, u LifetimeUpdate) (Sandbox, error)
	Pause(id, reason string) (Sandbox, error)
	Unpause(id string) (Sandbox, error)
	Compare(ctx context.Context, id string, req *CompareRequest) (Comparison, error)
	Subscribe(id string, from uint64, follow bool) (backlog []store.Event, live <-chan store.Event, cancel func(), err error)
	Attach(id string) (release func(), err error)
	AttachPrimary(ctx context.Context, id string, req *AttachRequest, stdin io.Reader, stdout, stderr io.Writer) (*AttachedPrimary, error)

	Exec(id string, req *ExecRequest) (store.Exec, error)
	ExecStream(id string, req *ExecRequest, stdin io.Reader, stdout, stderr io.Writer) (*StreamedExec, error)
	RecordExec(id string, req *ExecRequest) (store.Exec, error)
	GetExec(id, execID string) (store.Exec, error)
	FinishExec(id, execID string, code int) (store.Exec, error)
	SignalExec(id, execID, signal string) (store.Exec, error)
	ListExecs(id string, running bool, limit int) ([]store.Exec, error)
	ExecOutput(ctx context.Context, id, execID string, stderr bool, from int64, follow bool, w io.Writer, flush func()) error

	DaemonLog(id string, q LogRequest) (func(ctx context.Context, w io.Writer), error)
	ReadFiles(ctx context.Context, id, p string, asTar bool) (*Download, error)
	WriteFiles(ctx context.Context, id string, u Upload) error

	Prepare(req *PrepareRequest) (func(ctx context.Context, w io.Writer) error, error)
	PutBuildContext(sum string, r io.Reader) error
	Prune(ctx context.Context, req *PruneRequest) (*PruneResult, error)

	Pools() (list []PoolStatus, total, max int)
	WarmPool(ctx context.Context, req *WarmRequest) (PoolStatus, error)
	DrainPools(ctx context.Context, project string) int

	// runtimes are the backends the daemon holds open (GET /v1/health).
	runtimes() []backend.Backend

	// Metrics are the daemon's metrics now (GET /metrics).
	Metrics(ctx context.Context) ([]MetricFamily, error)

	fileOps // the files operations beside read and write (fsops.go)
}

var _ domain = (*Service)(nil)

// newServer returns the API layer over svc; a nil svc serves only the routes
// that need no Service.
func newServer(opts Options, log *slog.Logger, svc *Service) *server {
	s := &server{opts: opts, log: log}
	if svc != nil {
		s.svc = svc
	}
	return s
}

// apiRoutes is the API: each route's method and path (net/http's pattern
// syntax) and its handler. control/openapi.json documents every one of them and
// nothing else (TestOpenAPIRoutes); needsService marks the routes a daemon
// without a Service does not serve.
var apiRoutes = []struct {
	method, path string
	handler      func(*server, http.ResponseWriter, *http.Request)
	needsService bool
}{
	{"GET", "/v1/health", (*server).health, false},
	{"GET", "/v1/openapi.json", (*server).openAPI, false},
	{"GET", "/metrics", (*server).metrics, false},
	{"POST", "/v1/sandboxes", (*server).create, true},
	{"GET", "/v1/sandboxes", (*server).list, true},
	{"GET", "/v1/sandboxes/{id}", (*server).get, true},
	{"DELETE", "/v1/sandboxes/{id}", (*server).remove, true},
	{"POST", "/v1/sandboxes/{id}/stop", (*server).stop, true},
	{"POST", "/v1/sandboxes/{id}/resume", (*server).resume, true},
	{"POST", "/v1/sandboxes/{id}/compare", (*server).compare, true},
	{"POST", "/v1/sandboxes/{id}/snapshots", (*server).takeSnapshot, true},
	{"GET", "/v1/snapshots", (*server).listSnapshots, true},
	{"DELETE", "/v1/snapshots/{name}", (*server).deleteSnapshot, true},
	{"POST", "/v1/sandboxes/{id}/fork", (*server).fork, true},
	{"GET", "/v1/sandboxes/{id}/events", (*server).events, true},
	{"GET", "/v1/sandboxes/{id}/attach", (*server).attach, true},
	{"POST", "/v1/sandboxes/{id}/attach", (*server).attachPrimary, true},
	{"POST", "/v1/sandboxes/{id}/execs", (*server).exec, true},
	{"GET", "/v1/sandboxes/{id}/execs/{exec}", (*server).getExec, true},
	{"POST", "/v1/sandboxes/{id}/execs/{exec}/finish", (*server).finishExec, true},
	{"GET", "/v1/sandboxes/{id}/logs", (*server).logs, true},
	{"GET", "/v1/sandboxes/{id}/files", (*server).readFiles, true},
	{"PUT", "/v1/sandboxes/{id}/files", (*server).writeFiles, true},
	{"POST", "/v1/prepare", (*server).prepare, true},
	{"POST", "/v1/prune", (*server).prune, true},
	{"GET", "/v1/pools", (*server).pools, true},
	{"POST", "/v1/pools/warm", (*server).warmPool, true},
	{"POST", "/v1/pools/drain", (*server).drainPools, true},
	{"PUT", "/v1/build-contexts/{sum}", (*server).putBuildContext, true},
	{"PATCH", "/v1/sandboxes/{id}", (*server).update, true},
	{"GET", "/v1/sandboxes/{id}/execs", (*server).listExecs, true},
	{"POST", "/v1/sandboxes/{id}/execs/{exec}/signal", (*server).signalExec, true},
	{"GET", "/v1/sandboxes/{id}/execs/{exec}/output", (*server).execOutput, true},
	{"POST", "/v1/sandboxes/{id}/pause", (*server).pause, true},
	{"POST", "/v1/sandboxes/{id}/unpause", (*server).unpause, true},
	{"GET", "/v1/sandboxes/{id}/files/list", (*server).listFiles, true},
	{"GET", "/v1/sandboxes/{id}/files/stat", (*server).statFile, true},
	{"DELETE", "/v1/sandboxes/{id}/files", (*server).removeFile, true},
	{"POST", "/v1/sandboxes/{id}/files/remove", (*server).removeFiles, true},
	{"POST", "/v1/sandboxes/{id}/files/mkdir", (*server).makeDir, true},
	{"POST", "/v1/sandboxes/{id}/files/rename", (*server).renameFile, true},
	{"GET", "/v1/sandboxes/{id}/files/watch", (*server).watchFiles, true},
	{"POST", "/v1/mcp", (*server).mcp, true},
}

// routes is the API's handler; hosts, for the TCP listener, adds the checks
// of every TCP request (guardTCP, requireJSON) around the token's.
func (s *server) routes(hosts *hostCheck) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range apiRoutes {
		if rt.needsService && s.svc == nil {
			continue
		}
		h := rt.handler
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}
	var h http.Handler = noRoute(mux)
	if hosts == nil {
		return h
	}
	h = requireJSON(mux, h)
	if !s.opts.NoToken {
		h = s.requireToken(h)
	}
	return guardTCP(hosts, h)
}

// noRoute answers a request that matches no route (a path the API does not
// have, or a method its path does not take) with the API's JSON error, where
// the mux would answer plain text.
func noRoute(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer says which of the two it is (and the Allow
		// header of a 405); its body is replaced.
		rec := &statusOnly{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, &client.Error{Reason: client.ReasonMethodNotAllowed, Message: fmt.Sprintf("%s %s: the API's route %s does not take %s (Allow: %s)", r.Method, r.URL.Path, r.URL.Path, r.Method, rec.header.Get("Allow"))})
			return
		}
		writeError(w, &client.Error{Reason: client.ReasonRouteNotFound, Message: fmt.Sprintf("%s %s: the API has no such route (GET /v1/openapi.json lists them)", r.Method, r.URL.Path)})
	})
}

// statusOnly is a ResponseWriter that keeps the status and headers and drops
// the body.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return len(b), nil
}
func (s *statusOnly) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
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
			refuse(w, &client.Error{Status: http.StatusUnauthorized, Reason: client.ReasonUnauthorized, Message: "a valid token is required (Authorization: Bearer <token>)"})
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

// accepts reports whether the request's Accept header names mediaType
// (text/event-stream for server-sent events, application/x-ndjson for a
// streamed exec, application/x-tar for an archive); parameters are ignored.
func accepts(r *http.Request, mediaType string) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && strings.EqualFold(mt, mediaType) {
				return true
			}
		}
	}
	return false
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
	h := client.Health{PID: os.Getpid(), BuildID: s.opts.BuildID, Version: s.opts.Version, LogPath: daemonfiles.LogFile(s.opts.Paths)}
	if s.svc != nil {
		for _, rt := range s.svc.runtimes() {
			h.Engines = append(h.Engines, rt.Location().String())
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// mcp serves Options.MCP, the MCP server over streamable HTTP (docs/mcp.md).
func (s *server) mcp(w http.ResponseWriter, r *http.Request) {
	if s.opts.MCP == nil {
		writeError(w, &client.Error{Reason: client.ReasonRouteNotFound, Message: "this daemon serves no MCP server"})
		return
	}
	s.opts.MCP.ServeHTTP(w, r)
}
