package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/control"
	dockerclient "github.com/docker/docker/client"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/test/testenv"
)

// fakeDaemon is a control daemon for the CLI's tests, after pebble's
// cmd_<name>_test.go: the routes of control/server.go on a Unix socket in a
// temporary directory, where the CLI looks for its daemon (XDG_RUNTIME_DIR). It
// serves sandbox records and event histories the test sets up, in the client
// package's wire types (a field renamed there shows here), and records every
// request, so that a test asserts what the user sees and what the daemon was
// asked. It answers the CLI's handshake (GET /v1/health with this build's ID),
// so the CLI never starts or replaces a real daemon.
//
// State changes happen as with the real daemon: stop and delete are accepted at
// once and complete later; here they complete when the client reads the event
// stream (as client.WaitState does), or at the second GET of the sandbox.
//
// Every daemon comes with a fakeEngine (DOCKER_HOST and each sandbox's Engine
// point at it) for the commands that read a sandbox through the Engine API:
// logs, exec, and stop's shutdown lines.
type fakeDaemon struct {
	fakeServer
	env    map[string]string
	engine *fakeEngine
	quit   chan struct{}

	order    []string
	boxes    map[string]*client.Sandbox
	events   map[string][]client.Event
	pending  map[string]*pendingChange
	errs     map[string]*client.Error
	execs    map[string]*client.Exec
	attached map[string]int
	ended    map[string]bool
	health   client.Health
	// dropCreates is how many creates the daemon accepts and then goes
	// away before answering: the sandbox is recorded, pending without a
	// container (as the daemon that starts next finds it), and the
	// connection closed.
	dropCreates int
}

// pendingChange is an accepted stop or delete that has not completed yet.
type pendingChange struct {
	ev   client.Event
	gets int
}

// fakeServer is what the fake daemon and the fake Engine share: a lock over
// their state, the requests received, and a channel closed at each change, so
// that a test waits on a condition without sleeping.
type fakeServer struct {
	t       *testing.T
	mu      sync.Mutex
	reqs    []fakeRequest
	changes testenv.Changes
}

// serve serves h on a Unix socket until the test ends.
func (s *fakeServer) serve(socket string, h http.Handler) {
	s.t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		s.t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s.t.Cleanup(srv.Close)
}

// notify wakes whoever waits for a change; s.mu is held.
func (s *fakeServer) notify() { s.changes.Notify() }

// record adds a request to those received (s.mu is held), leaving its body to
// read again.
func (s *fakeServer) record(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.reqs = append(s.reqs, fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Body: body})
	s.notify()
}

// waitFor waits until cond (called with s.mu held) is true.
func (s *fakeServer) waitFor(what string, cond func() bool) {
	s.t.Helper()
	s.changes.Await(s.t, &s.mu, waitTimeout, what, cond, func() string { return "received:\n" + s.requestList() })
}

// requestList is the requests received, one a line, for failure messages.
func (s *fakeServer) requestList() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, r := range s.reqs {
		fmt.Fprintf(&b, "  %s %s\n", r, bytes.TrimSpace(r.Body))
	}
	return b.String()
}

// waitTimeout bounds each wait of the CLI's tests for a condition.
const waitTimeout = 10 * time.Second

// fakeRequest is one request a fake received.
type fakeRequest struct {
	Method string
	Path   string
	Query  url.Values
	Body   []byte
}

func (r fakeRequest) String() string {
	s := r.Method + " " + r.Path
	if len(r.Query) > 0 {
		s += "?" + r.Query.Encode()
	}
	return s
}

// decode decodes the body into v as the daemon does: unknown fields are errors.
func (r fakeRequest) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: cannot decode the body %q: %v", r, r.Body, err)
	}
}

// fakeEpoch is when the fake's sandboxes were made and its events happened.
var fakeEpoch = time.Date(2025, 3, 4, 10, 20, 30, 0, time.UTC)

// newFakeDaemon starts a fake daemon and its fake Engine, both stopped when the
// test ends.
func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	base := t.TempDir()
	if len(base) > 60 {
		// A Unix socket's path has at most 104 bytes (macOS; 108 on Linux).
		short, err := os.MkdirTemp("", "al")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(short) })
		base = short
	}
	runDir := filepath.Join(base, "run")
	if err := os.MkdirAll(filepath.Join(runDir, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	f := &fakeDaemon{
		fakeServer: fakeServer{t: t},
		quit:       make(chan struct{}),
		env: map[string]string{
			"HOME":            filepath.Join(base, "home"),
			"XDG_CONFIG_HOME": filepath.Join(base, "config"),
			"XDG_DATA_HOME":   filepath.Join(base, "data"),
			"XDG_RUNTIME_DIR": runDir,
			"DOCKER_CONFIG":   filepath.Join(base, "docker"),
		},
		boxes:    map[string]*client.Sandbox{},
		events:   map[string][]client.Event{},
		pending:  map[string]*pendingChange{},
		errs:     map[string]*client.Error{},
		execs:    map[string]*client.Exec{},
		attached: map[string]int{},
		ended:    map[string]bool{},
		// PID 0: were the build IDs ever to differ, the CLI could not stop it.
		health: client.Health{PID: 0, BuildID: BuildID, Version: Version, LogPath: filepath.Join(base, "airlockd.log")},
	}
	f.engine = newFakeEngine(t, filepath.Join(base, "engine.sock"), f.quit)
	f.env["DOCKER_HOST"] = f.engine.host

	p, err := paths.FromEnv(f.getenv)
	if err != nil {
		t.Fatal(err)
	}
	socket := p.Socket()
	if want := filepath.Join(runDir, "airlock", "airlockd.sock"); socket != want {
		// The CLI would start a daemon of its own (this test binary).
		t.Fatalf("the CLI would look for its daemon at %s, not at the fake's %s", socket, want)
	}
	f.serve(socket, f.routes())
	t.Cleanup(func() { close(f.quit) }) // runs first: ends the streams srv.Close waits for
	return f
}

func (f *fakeDaemon) getenv(k string) (string, bool) {
	v, ok := f.env[k]
	return v, ok
}

// add stores a sandbox record with a history that led to its state: created,
// then ready, stopped, failed or deleted. Unset fields get defaults: state
// ready, kind up, created an hour before fakeEpoch, container c-<ID>, and the
// fake Engine, which gets the sandbox's primary container.
func (f *fakeDaemon) add(sb client.Sandbox) {
	f.t.Helper()
	if sb.State == "" {
		sb.State = client.StateReady
	}
	if sb.Kind == "" {
		sb.Kind = "up"
	}
	if sb.CreatedAt.IsZero() {
		sb.CreatedAt = fakeEpoch.Add(-time.Hour)
	}
	if sb.Container == "" {
		sb.Container = "c-" + sb.ID
	}
	if sb.Engine == nil {
		sb.Engine = &client.Engine{Host: f.engine.host}
	}
	if sb.Engine.Host == f.engine.host {
		f.engine.addContainer(sb.ID, sb.Container, sb.State == client.StateReady || sb.State == client.StatePending)
	}
	state := sb.State
	sb.State, sb.LastSeq = client.StatePending, 0
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.boxes[sb.ID]; ok {
		f.t.Fatalf("fake daemon: sandbox %s added twice", sb.ID)
	}
	f.boxes[sb.ID] = &sb
	f.order = append(f.order, sb.ID)
	f.emitLocked(sb.ID, client.Event{Kind: "sandbox.created", State: client.StatePending})
	if state != client.StatePending {
		f.emitLocked(sb.ID, client.Event{Kind: "sandbox." + state, State: state})
	}
}

// emit appends an event to a sandbox's history (sequence, time and sandbox ID
// filled in; the state is the sandbox's unless set, and a set one becomes it).
func (f *fakeDaemon) emit(id string, ev client.Event) client.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.emitLocked(id, ev)
}

func (f *fakeDaemon) emitLocked(id string, ev client.Event) client.Event {
	sb := f.boxes[id]
	if sb == nil {
		f.t.Errorf("fake daemon: event for unknown sandbox %s", id)
		return ev
	}
	ev.SandboxID = id
	ev.Sequence = uint64(len(f.events[id]) + 1)
	if ev.Time.IsZero() {
		ev.Time = fakeEpoch.Add(time.Duration(ev.Sequence) * time.Second)
	}
	if ev.State == "" {
		ev.State = sb.State
	}
	sb.State, sb.LastSeq, sb.UpdatedAt = ev.State, ev.Sequence, ev.Time
	if ev.Reason != "" {
		sb.Reason = ev.Reason
	}
	f.events[id] = append(f.events[id], ev)
	f.notify()
	return ev
}

// history returns a sandbox's events.
func (f *fakeDaemon) history(id string) []client.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events[id])
}

// state returns a sandbox's state.
func (f *fakeDaemon) state(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boxes[id].State
}

// fail makes the daemon answer method path (e.g. "DELETE /v1/sandboxes/x")
// with an API error.
func (f *fakeDaemon) fail(method, path string, e *client.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method+" "+path] = e
}

// endEvents ends the event streams of a sandbox after what they sent, as when
// the daemon stops: a following client reads to the end.
func (f *fakeDaemon) endEvents(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended[id] = true
	f.notify()
}

// requests returns the requests received, optionally only those of a method and
// path (the path without its query).
func (f *fakeDaemon) requests(methodPath ...string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.reqs {
		if len(methodPath) == 0 || slices.Contains(methodPath, r.Method+" "+r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// assertRequests checks the requests received, in order, as "METHOD /path"
// (query left out); the CLI's handshake (GET /v1/health) comes first each time
// and is left out too.
func (f *fakeDaemon) assertRequests(want ...string) {
	f.t.Helper()
	var got []string
	for _, r := range f.requests() {
		if r.Method+" "+r.Path != "GET /v1/health" {
			got = append(got, r.Method+" "+r.Path)
		}
	}
	if !slices.Equal(got, want) {
		f.t.Errorf("the daemon received\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// run runs the CLI in-process against the fake, with empty stdin.
func (f *fakeDaemon) run(args ...string) result {
	f.t.Helper()
	return f.runWithStdin("", args...)
}

// cliFailure is an invocation that must fail: its exit code, and its stderr,
// whole or, when that does not end with a newline, its beginning; nothing on
// stdout.
type cliFailure struct {
	args   []string
	code   int
	stderr string
}

// assertFailures runs each invocation against the fake and checks it failed so.
func (f *fakeDaemon) assertFailures(cases []cliFailure) {
	f.t.Helper()
	for _, c := range cases {
		r := f.run(c.args...)
		stderrOK := r.stderr == c.stderr || (!strings.HasSuffix(c.stderr, "\n") && strings.HasPrefix(r.stderr, c.stderr))
		if r.code != c.code || !stderrOK || r.stdout != "" {
			f.t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q", c.args, r.code, r.stdout, r.stderr, c.code, c.stderr)
		}
	}
}

// runWithStdin runs the CLI in-process against the fake.
func (f *fakeDaemon) runWithStdin(stdin string, args ...string) result {
	f.t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, f.getenv)
	return result{code, out.String(), errb.String()}
}

// running is a CLI invocation in progress (see start).
type running struct {
	stdout, stderr *testenv.SyncBuffer
	done           chan int
}

// start runs the CLI in the background, for commands that follow a stream.
func (f *fakeDaemon) start(args ...string) *running {
	r := &running{stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, done: make(chan int, 1)}
	go func() { r.done <- run(args, strings.NewReader(""), r.stdout, r.stderr, f.getenv) }()
	return r
}

// wait waits for the invocation to end and returns what it printed.
func (r *running) wait(t *testing.T) result {
	t.Helper()
	select {
	case code := <-r.done:
		return result{code, r.stdout.String(), r.stderr.String()}
	case <-time.After(waitTimeout):
		t.Fatalf("the command did not end; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	return result{}
}

// projectFile writes a sandbox.toml in a new project directory and returns its
// path (for --file) and the directory (a sandbox's Project).
func projectFile(t *testing.T) (file, dir string) {
	t.Helper()
	dir = project(t, "[sandbox]\nimage = \"busybox\"\n")
	return filepath.Join(dir, "sandbox.toml"), dir
}

// The API, as control/server.go serves it.

func (f *fakeDaemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", f.serveHealth)
	mux.HandleFunc("GET /v1/sandboxes", f.serveList)
	mux.HandleFunc("POST /v1/sandboxes", f.serveCreate)
	mux.HandleFunc("GET /v1/sandboxes/{id}", f.forBox(f.serveGet))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", f.forBox(f.serveDelete))
	mux.HandleFunc("POST /v1/sandboxes/{id}/stop", f.forBox(f.serveStop))
	mux.HandleFunc("GET /v1/sandboxes/{id}/events", f.serveEvents)
	mux.HandleFunc("GET /v1/sandboxes/{id}/attach", f.serveAttach)
	mux.HandleFunc("POST /v1/sandboxes/{id}/attach", f.serveAttachMain)
	mux.HandleFunc("POST /v1/sandboxes/{id}/execs", f.serveExec)
	mux.HandleFunc("GET /v1/sandboxes/{id}/logs", f.serveLogs)
	mux.HandleFunc("GET /v1/sandboxes/{id}/execs/{exec}", f.serveGetExec)
	mux.HandleFunc("POST /v1/sandboxes/{id}/execs/{exec}/finish", f.serveFinishExec)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.record(r)
		e := f.errs[r.Method+" "+r.URL.Path]
		f.mu.Unlock()
		if e != nil {
			fakeError(w, e)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func fakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fakeError answers an API error with the status the daemon gives its reason.
func fakeError(w http.ResponseWriter, e *client.Error) {
	status := e.Status
	if status == 0 {
		switch e.Reason {
		case client.ReasonSandboxNotFound, client.ReasonExecNotFound:
			status = http.StatusNotFound
		case client.ReasonIDAlreadyUsed, client.ReasonInvalidState:
			status = http.StatusConflict
		case client.ReasonInvalidID, client.ReasonInvalidRequest, client.ReasonBadCursor, client.ReasonConfig:
			status = http.StatusBadRequest
		default:
			status = http.StatusInternalServerError
		}
	}
	fakeJSON(w, status, e)
}

// decodeBody decodes a request body as the daemon does (unknown fields refused).
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fakeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot decode the request: " + err.Error()})
		return false
	}
	return true
}

// box returns the sandbox of the request's {id} (f.mu held), or answers 404.
func (f *fakeDaemon) box(w http.ResponseWriter, r *http.Request) *client.Sandbox {
	id := r.PathValue("id")
	sb := f.boxes[id]
	if sb == nil {
		fakeError(w, &client.Error{Reason: client.ReasonSandboxNotFound, Message: fmt.Sprintf("sandbox %s not found", id)})
	}
	return sb
}

// applyPending completes an accepted stop or delete (f.mu held).
func (f *fakeDaemon) applyPending(id string) {
	if p := f.pending[id]; p != nil {
		delete(f.pending, id)
		f.emitLocked(id, p.ev)
	}
}

func (f *fakeDaemon) serveHealth(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	h := f.health
	f.mu.Unlock()
	h.Engines = []string{f.engine.host}
	fakeJSON(w, http.StatusOK, h)
}

func (f *fakeDaemon) serveList(w http.ResponseWriter, r *http.Request) {
	want := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			fakeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "label filters are KEY=VALUE"})
			return
		}
		want[k] = v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	list := []client.Sandbox{}
	for _, id := range f.order {
		sb := f.boxes[id]
		if sb.State == client.StateDeleted {
			continue
		}
		match := true
		for k, v := range want {
			if got, ok := sb.Labels[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			list = append(list, *sb)
		}
	}
	fakeJSON(w, http.StatusOK, list)
}

// withBox calls fn, with f.mu held, with the sandbox of the request's {id}, or
// answers 404 for an unknown one; it reports whether fn ran.
func (f *fakeDaemon) withBox(w http.ResponseWriter, r *http.Request, fn func(*client.Sandbox)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb := f.box(w, r)
	if sb != nil {
		fn(sb)
	}
	return sb != nil
}

// forBox serves a request about the sandbox of its {id} with f.mu held.
func (f *fakeDaemon) forBox(serve func(http.ResponseWriter, *client.Sandbox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.withBox(w, r, func(sb *client.Sandbox) { serve(w, sb) })
	}
}

// serveCreate makes a sandbox of the request's ID (the CLI names a run's):
// accepted, then created with container c-<ID>, answered 202; an ID used
// already is refused (409). See dropCreates.
func (f *fakeDaemon) serveCreate(w http.ResponseWriter, r *http.Request) {
	var req client.CreateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	f.mu.Lock()
	if _, ok := f.boxes[req.ID]; ok || req.ID == "" {
		f.mu.Unlock()
		fakeError(w, &client.Error{Reason: client.ReasonIDAlreadyUsed, Message: fmt.Sprintf("sandbox ID %q is already used", req.ID)})
		return
	}
	sb := &client.Sandbox{ID: req.ID, Kind: req.Kind, State: client.StatePending, CreatedAt: fakeEpoch, Engine: &client.Engine{Host: f.engine.host}}
	f.boxes[sb.ID] = sb
	f.order = append(f.order, sb.ID)
	f.emitLocked(sb.ID, client.Event{Kind: "sandbox.accepted"})
	if f.dropCreates > 0 {
		f.dropCreates--
		f.mu.Unlock()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	sb.Container = "c-" + sb.ID
	f.emitLocked(sb.ID, client.Event{Kind: "sandbox.created"})
	rec := *sb
	f.mu.Unlock()
	fakeJSON(w, http.StatusAccepted, rec)
}

func (f *fakeDaemon) serveGet(w http.ResponseWriter, sb *client.Sandbox) {
	if p := f.pending[sb.ID]; p != nil {
		if p.gets++; p.gets > 1 {
			f.applyPending(sb.ID)
		}
	}
	fakeJSON(w, http.StatusOK, sb)
}

func (f *fakeDaemon) serveStop(w http.ResponseWriter, sb *client.Sandbox) {
	switch {
	case sb.State == client.StateStopped:
	case sb.State != client.StateReady && sb.State != client.StatePending:
		fakeError(w, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s", sb.ID, sb.State)})
		return
	default:
		f.pending[sb.ID] = &pendingChange{ev: client.Event{Kind: "sandbox.stopped", State: client.StateStopped, Reason: "stopped"}}
		f.engine.stopContainer(sb.Container)
	}
	fakeJSON(w, http.StatusAccepted, sb)
}

func (f *fakeDaemon) serveDelete(w http.ResponseWriter, sb *client.Sandbox) {
	if sb.State != client.StateDeleted && sb.State != client.StateDeleting {
		f.emitLocked(sb.ID, client.Event{Kind: "sandbox.deleting", State: client.StateDeleting})
		f.pending[sb.ID] = &pendingChange{ev: client.Event{Kind: "sandbox.deleted", State: client.StateDeleted}}
		f.engine.stopContainer(sb.Container)
	}
	fakeJSON(w, http.StatusAccepted, sb)
}

// serveEvents streams NDJSON: the events after ?from=, then with follow=1 the
// new ones, until endEvents, the client leaves or the test ends.
func (f *fakeDaemon) serveEvents(w http.ResponseWriter, r *http.Request) {
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fakeError(w, &client.Error{Reason: client.ReasonBadCursor, Message: "from must be a sequence number"})
			return
		}
		from = n
	}
	follow := r.URL.Query().Get("follow") == "1"
	var id string
	if !f.withBox(w, r, func(sb *client.Sandbox) { id = sb.ID; f.applyPending(id) }) {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher := w.(http.Flusher)
	sent := from
	for {
		f.mu.Lock()
		var batch []client.Event
		for _, ev := range f.events[id] {
			if ev.Sequence > sent {
				batch = append(batch, ev)
			}
		}
		ended, ch := f.ended[id], f.changes.C()
		f.mu.Unlock()
		for _, ev := range batch {
			if err := enc.Encode(ev); err != nil {
				return
			}
			sent = ev.Sequence
		}
		flusher.Flush()
		if !follow || ended {
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		case <-f.quit:
			return
		}
	}
}

// serveAttachMain attaches to a sandbox's primary (a stream upgrade): once the
// sandbox is no longer running, the fake Engine's stderr of its container as
// the primary's, then exit code 0.
func (f *fakeDaemon) serveAttachMain(w http.ResponseWriter, r *http.Request) {
	var id string
	if !f.withBox(w, r, func(sb *client.Sandbox) { id = sb.ID }) {
		return
	}
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", client.StreamProtocol)
	for {
		f.mu.Lock()
		st, ch := f.boxes[id].State, f.changes.C()
		f.mu.Unlock()
		if st != client.StateReady && st != client.StatePending {
			break
		}
		select {
		case <-ch:
		case <-f.quit:
			return
		}
	}
	f.engine.mu.Lock()
	lines := f.engine.stderr["c-"+id]
	f.engine.mu.Unlock()
	if lines != "" {
		_ = client.WriteFrame(conn, client.FrameStderr, []byte(lines))
	}
	b, _ := json.Marshal(client.ExitFrame{})
	_ = client.WriteFrame(conn, client.FrameExit, b)
}

// attached returns how many clients are attached to a sandbox now.
func (f *fakeDaemon) attachedTo(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attached[id]
}

func (f *fakeDaemon) serveAttach(w http.ResponseWriter, r *http.Request) {
	var id string
	if !f.withBox(w, r, func(sb *client.Sandbox) { id = sb.ID; f.attached[id]++; f.notify() }) {
		return
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-f.quit:
	}
	f.mu.Lock()
	f.attached[id]--
	f.notify()
	f.mu.Unlock()
}

func (f *fakeDaemon) serveExec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), client.StreamProtocol) {
		f.serveExecAttach(w, r, &req)
		return
	}
	f.forBox(func(w http.ResponseWriter, sb *client.Sandbox) { f.startExec(w, sb, &req) })(w, r)
}

func (f *fakeDaemon) startExec(w http.ResponseWriter, sb *client.Sandbox, req *client.ExecRequest) {
	if sb.State != client.StateReady {
		fakeError(w, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s, not ready", sb.ID, sb.State)})
		return
	}
	id := req.ID
	if id == "" {
		id = fmt.Sprintf("exec-%d", len(f.execs)+1)
	}
	ex := &client.Exec{ID: id, SandboxID: sb.ID, Cmd: req.Cmd, StartedAt: fakeEpoch}
	f.execs[sb.ID+"/"+id] = ex
	f.emitLocked(sb.ID, client.Event{Kind: "exec.started", ExecID: id})
	fakeJSON(w, http.StatusAccepted, ex)
}

// withExec calls fn, with f.mu held, with the exec of the request's {id} and
// {exec}, or answers 404 for an unknown one.
func (f *fakeDaemon) withExec(w http.ResponseWriter, r *http.Request, fn func(*client.Exec)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ex := f.execs[r.PathValue("id")+"/"+r.PathValue("exec")]
	if ex == nil {
		fakeError(w, &client.Error{Reason: client.ReasonExecNotFound, Message: fmt.Sprintf("exec %s not found", r.PathValue("exec"))})
		return
	}
	fn(ex)
}

func (f *fakeDaemon) serveGetExec(w http.ResponseWriter, r *http.Request) {
	f.withExec(w, r, func(ex *client.Exec) { fakeJSON(w, http.StatusOK, ex) })
}

func (f *fakeDaemon) serveFinishExec(w http.ResponseWriter, r *http.Request) {
	var req client.FinishRequest
	if !decodeBody(w, r, &req) {
		return
	}
	f.withExec(w, r, func(ex *client.Exec) {
		now, code := fakeEpoch.Add(time.Minute), req.ExitCode
		ex.FinishedAt, ex.ExitCode = &now, &code
		f.emitLocked(ex.SandboxID, client.Event{Kind: "exec.finished", ExecID: ex.ID, ExitCode: &code})
		fakeJSON(w, http.StatusOK, ex)
	})
}

// serveExecAttach answers an attached exec (client.StreamProtocol) as the
// daemon does: it records the exec, switches protocols, runs it with the fake
// Engine's exec function (stdin from the client's frames, output as frames),
// and ends with the exit frame. A stopped container fails it with 125 and the
// daemon's message on stderr.
func (f *fakeDaemon) serveExecAttach(w http.ResponseWriter, r *http.Request, req *client.ExecRequest) {
	f.mu.Lock()
	sb := f.box(w, r)
	if sb == nil {
		f.mu.Unlock()
		return
	}
	if sb.State != client.StateReady {
		f.mu.Unlock()
		fakeError(w, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s, not ready", sb.ID, sb.State)})
		return
	}
	id := fmt.Sprintf("exec-%d", len(f.execs)+1)
	ex := &client.Exec{ID: id, SandboxID: sb.ID, Cmd: req.Cmd, StartedAt: fakeEpoch}
	f.execs[sb.ID+"/"+id] = ex
	f.emitLocked(sb.ID, client.Event{Kind: "exec.started", ExecID: id})
	sbID, container := sb.ID, sb.Container
	f.mu.Unlock()

	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		f.t.Errorf("fake daemon: cannot hijack: %v", err)
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + client.StreamProtocol + "\r\n\r\n")
	_ = rw.Flush()
	var wmu sync.Mutex
	frames := func(typ byte) io.Writer {
		return writerFunc(func(p []byte) (int, error) {
			wmu.Lock()
			defer wmu.Unlock()
			return len(p), client.WriteFrame(conn, typ, p)
		})
	}
	stdinR, stdinW := io.Pipe()
	go func() {
		defer stdinW.Close()
		for {
			typ, p, err := client.ReadFrame(rw.Reader)
			if err != nil || typ == client.FrameStdin && len(p) == 0 {
				return
			}
			if typ == client.FrameStdin {
				_, _ = stdinW.Write(p)
			}
		}
	}()
	call := &fakeExecCall{Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir, TTY: req.TTY, Stdin: stdinR, Stdout: frames(client.FrameStdout), Stderr: frames(client.FrameStderr)}
	f.engine.mu.Lock()
	fn, running := f.engine.execFunc, f.engine.running[container]
	f.engine.mu.Unlock()
	code := ExitAirlock
	switch {
	case !running:
		fmt.Fprintf(call.Stderr, "airlock: sandbox %s is not running (start it with `airlock up -d`)\n", sbID)
	case fn == nil:
		fmt.Fprintf(call.Stderr, "fake daemon: no exec function for %q\n", call.Cmd)
	default:
		code = fn(call)
	}
	f.mu.Lock()
	ex.ExitCode = &code
	f.emitLocked(sbID, client.Event{Kind: "exec.finished", ExecID: id, ExitCode: &code})
	f.mu.Unlock()
	b, _ := json.Marshal(client.ExitFrame{ExecID: id, ExitCode: code})
	wmu.Lock()
	_ = client.WriteFrame(conn, client.FrameExit, b)
	wmu.Unlock()
}

type writerFunc func(p []byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// serveLogs serves a daemon's log as the daemon does (control.WriteDaemonLog),
// read from the fake Engine.
func (f *fakeDaemon) serveLogs(w http.ResponseWriter, r *http.Request) {
	var sb client.Sandbox
	if !f.withBox(w, r, func(b *client.Sandbox) { sb = *b }) {
		return
	}
	q := r.URL.Query()
	if !slices.Contains(sb.DaemonNames, q.Get("daemon")) {
		fakeError(w, &client.Error{Reason: client.ReasonInvalidRequest, Message: "no daemon " + q.Get("daemon")})
		return
	}
	tail := -1
	if v := q.Get("tail"); v != "" {
		tail, _ = strconv.Atoi(v)
	}
	eng, err := dockerclient.NewClientWithOpts(dockerclient.WithHost(f.engine.host), dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		fakeError(w, &client.Error{Reason: client.ReasonInternal, Message: err.Error()})
		return
	}
	defer eng.Close()
	w.WriteHeader(http.StatusOK)
	stream := q.Get("stream")
	switch {
	case q.Get("stderr") == "1":
		stream = client.StreamStderr
	case stream == "":
		stream = client.StreamBoth
	}
	control.WriteDaemonLog(r.Context(), &docker.Runtime{Engine: eng, Quiet: true}, sb.State == client.StateReady,
		sb.Container, q.Get("daemon"), stream, tail, q.Get("follow") == "1", flushEach{w})
}

// flushEach flushes every write of a response.
type flushEach struct{ w http.ResponseWriter }

func (f flushEach) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.w.(http.Flusher).Flush()
	return n, err
}
