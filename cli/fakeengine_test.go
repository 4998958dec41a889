package cli

import (
	"archive/tar"
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/supervisor"
)

// fakeEngine answers the few Engine API calls the CLI makes to read a running
// sandbox (docker.Runtime's Open, CopyFile, FollowFile, Exec, FollowStderr):
// the ping, the container list and inspect, archive reads of the files a test
// put in a container, and execs over a hijacked connection, where `supervise
// tail` streams a file and `supervise exec` runs the test's execFunc. It
// records every request.
type fakeEngine struct {
	fakeServer
	host string
	quit chan struct{}

	containers map[string]string // sandbox ID → primary container ID
	running    map[string]bool   // container ID → running
	files      map[string]string // container ID + ":" + path → content
	stderr     map[string]string // container ID → its stderr (the supervisor's shutdown lines)
	execs      map[string]*fakeEngineExec
	execFunc   func(*fakeExecCall) int
}

// fakeEngineExec is an exec the fake Engine created.
type fakeEngineExec struct {
	id, container string
	opts          container.ExecOptions
	running       bool
	exitCode      int
}

// fakeExecCall is a `supervise exec` run in the fake Engine: what the CLI asked
// for, and the exec's streams.
type fakeExecCall struct {
	Cmd     []string // the command after --
	Env     []string // -e NAME=VALUE, then those of --values
	Values  string   // --values PATH: the file `supervise deliver --exec-env` wrote
	Workdir string
	TTY     bool
	Stdin   io.Reader // nil when stdin is not attached
	Stdout  io.Writer
	Stderr  io.Writer
}

func newFakeEngine(t *testing.T, socket string, quit chan struct{}) *fakeEngine {
	t.Helper()
	e := &fakeEngine{
		fakeServer: fakeServer{t: t}, host: "unix://" + socket, quit: quit,
		containers: map[string]string{}, running: map[string]bool{}, files: map[string]string{},
		stderr: map[string]string{}, execs: map[string]*fakeEngineExec{},
	}
	e.serve(socket, e.routes())
	return e
}

func (e *fakeEngine) addContainer(sandboxID, containerID string, running bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.containers[sandboxID] = containerID
	e.running[containerID] = running
}

// stopContainer stops a container: the tails of its files end.
func (e *fakeEngine) stopContainer(containerID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running[containerID] = false
	e.notify()
}

// writeFile sets a file of a container; appendFile adds to it (a tail sees it).
func (e *fakeEngine) writeFile(containerID, path, content string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files[containerID+":"+path] = content
	e.notify()
}

func (e *fakeEngine) appendFile(containerID, path, content string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files[containerID+":"+path] += content
	e.notify()
}

// setStderr sets what the container's log stream gives on stderr.
func (e *fakeEngine) setStderr(containerID, lines string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stderr[containerID] = lines
}

// onExec sets what `supervise exec` does: fn returns the exit code.
func (e *fakeEngine) onExec(fn func(*fakeExecCall) int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.execFunc = fn
}

// requests returns the requests received whose path (API version left out)
// matches the regular expression.
func (e *fakeEngine) requests(method, pathRE string) []fakeRequest {
	re := regexp.MustCompile("^" + pathRE + "$")
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []fakeRequest
	for _, r := range e.reqs {
		if r.Method == method && re.MatchString(r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// createdExecs returns the options of the execs created, in order.
func (e *fakeEngine) createdExecs() []container.ExecOptions {
	var out []container.ExecOptions
	for _, r := range e.requests("POST", "/containers/[^/]+/exec") {
		var o container.ExecOptions
		r.decode(e.t, &o)
		out = append(out, o)
	}
	return out
}

// runningExecs counts the execs still running (e.mu held).
func (e *fakeEngine) runningExecs() int {
	n := 0
	for _, x := range e.execs {
		if x.running {
			n++
		}
	}
	return n
}

var apiVersionPrefix = regexp.MustCompile(`^/v[0-9.]+/`)

func (e *fakeEngine) routes() http.Handler {
	mux := http.NewServeMux()
	ping := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		w.Header().Set("Ostype", "linux")
		_, _ = io.WriteString(w, "OK")
	}
	mux.HandleFunc("GET /_ping", ping)
	mux.HandleFunc("HEAD /_ping", ping)
	mux.HandleFunc("GET /containers/json", e.serveList)
	mux.HandleFunc("GET /containers/{id}/json", e.serveInspect)
	mux.HandleFunc("GET /containers/{id}/archive", e.serveArchive)
	mux.HandleFunc("GET /containers/{id}/logs", e.serveLogs)
	mux.HandleFunc("POST /containers/{id}/exec", e.serveExecCreate)
	mux.HandleFunc("POST /exec/{id}/start", e.serveExecStart)
	mux.HandleFunc("GET /exec/{id}/json", e.serveExecInspect)
	mux.HandleFunc("POST /exec/{id}/resize", func(w http.ResponseWriter, r *http.Request) {})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = apiVersionPrefix.ReplaceAllString(r.URL.Path, "/")
		e.mu.Lock()
		e.record(r)
		e.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

func engineError(w http.ResponseWriter, status int, format string, args ...any) {
	fakeJSON(w, status, map[string]string{"message": fmt.Sprintf(format, args...)})
}

func (e *fakeEngine) serveList(w http.ResponseWriter, r *http.Request) {
	args, err := filters.FromJSON(r.URL.Query().Get("filters"))
	if err != nil {
		engineError(w, http.StatusBadRequest, "%v", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	list := []container.Summary{}
	for id, cid := range e.containers {
		if args.Contains("label") && !args.ExactMatch("label", backend.LabelSandbox+"="+id) {
			continue
		}
		state := "exited"
		if e.running[cid] {
			state = "running"
		}
		list = append(list, container.Summary{ID: cid, State: state, Labels: map[string]string{
			backend.LabelSandbox: id, backend.LabelRole: "primary", backend.LabelKind: "up",
		}})
	}
	fakeJSON(w, http.StatusOK, list)
}

func (e *fakeEngine) known(w http.ResponseWriter, cid string) bool {
	for _, c := range e.containers {
		if c == cid {
			return true
		}
	}
	engineError(w, http.StatusNotFound, "No such container: %s", cid)
	return false
}

func (e *fakeEngine) serveInspect(w http.ResponseWriter, r *http.Request) {
	cid := r.PathValue("id")
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.known(w, cid) {
		return
	}
	fakeJSON(w, http.StatusOK, container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: cid, State: &container.State{
			Running: e.running[cid], Status: "running", StartedAt: fakeEpoch.Format("2006-01-02T15:04:05.999999999Z07:00"),
		}},
		Config: &container.Config{Tty: false},
	})
}

// serveArchive answers a file as the Engine does: a tar of it, its stat in a header.
func (e *fakeEngine) serveArchive(w http.ResponseWriter, r *http.Request) {
	cid, p := r.PathValue("id"), r.URL.Query().Get("path")
	e.mu.Lock()
	content, ok := e.files[cid+":"+p]
	e.mu.Unlock()
	if !ok {
		engineError(w, http.StatusNotFound, "Could not find the file %s in container %s", p, cid)
		return
	}
	name := p[strings.LastIndex(p, "/")+1:]
	stat, _ := json.Marshal(container.PathStat{Name: name, Size: int64(len(content)), Mode: 0o644, Mtime: fakeEpoch})
	w.Header().Set("X-Docker-Container-Path-Stat", base64.StdEncoding.EncodeToString(stat))
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: fakeEpoch})
	_, _ = io.WriteString(tw, content)
	_ = tw.Close()
}

// serveLogs answers the container's stderr, multiplexed, and ends.
func (e *fakeEngine) serveLogs(w http.ResponseWriter, r *http.Request) {
	cid := r.PathValue("id")
	e.mu.Lock()
	lines := e.stderr[cid]
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/vnd.docker.multiplexed-stream")
	if r.URL.Query().Get("stderr") == "1" {
		_, _ = io.WriteString(stdcopy.NewStdWriter(w, stdcopy.Stderr), lines)
	}
}

func (e *fakeEngine) serveExecCreate(w http.ResponseWriter, r *http.Request) {
	cid := r.PathValue("id")
	var opts container.ExecOptions
	if err := json.NewDecoder(r.Body).Decode(&opts); err != nil {
		engineError(w, http.StatusBadRequest, "%v", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.known(w, cid) {
		return
	}
	if !e.running[cid] {
		engineError(w, http.StatusConflict, "container %s is not running", cid)
		return
	}
	id := fmt.Sprintf("x%d", len(e.execs)+1)
	e.execs[id] = &fakeEngineExec{id: id, container: cid, opts: opts}
	fakeJSON(w, http.StatusCreated, container.ExecCreateResponse{ID: id})
}

func (e *fakeEngine) serveExecInspect(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.execs[r.PathValue("id")]
	if x == nil {
		engineError(w, http.StatusNotFound, "No such exec instance: %s", r.PathValue("id"))
		return
	}
	fakeJSON(w, http.StatusOK, container.ExecInspect{ExecID: x.id, ContainerID: x.container, Running: x.running, ExitCode: x.exitCode})
}

// serveExecStart hijacks the connection as the Engine does (101, then the
// exec's raw or multiplexed streams) and runs the exec.
func (e *fakeEngine) serveExecStart(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	x := e.execs[r.PathValue("id")]
	if x != nil {
		x.running = true
		e.notify()
	}
	e.mu.Unlock()
	if x == nil {
		engineError(w, http.StatusNotFound, "No such exec instance: %s", r.PathValue("id"))
		return
	}
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		e.t.Errorf("fake Engine: cannot hijack: %v", err)
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	_ = rw.Flush()
	var stdout, stderr io.Writer = conn, conn
	if !x.opts.Tty {
		stdout, stderr = stdcopy.NewStdWriter(conn, stdcopy.Stdout), stdcopy.NewStdWriter(conn, stdcopy.Stderr)
	}
	code := 0
	argv := x.opts.Cmd
	switch {
	case len(argv) > 2 && argv[0] == backend.SupervisorIn && argv[1] == "supervise" && argv[2] == "tail":
		code = e.tail(x, argv, rw.Reader, stdout, stderr)
	case len(argv) == 5 && argv[0] == backend.SupervisorIn && argv[1] == "supervise" && argv[2] == "deliver" && argv[3] == "--exec-env":
		// The exec's values, kept as the file the supervisor would write.
		b, _ := io.ReadAll(rw.Reader)
		e.mu.Lock()
		e.files[x.container+":"+argv[4]] = string(b)
		e.mu.Unlock()
	case len(argv) > 2 && argv[0] == backend.SupervisorIn && argv[1] == "supervise" && argv[2] == "exec":
		call := parseSuperviseExec(e.t, argv)
		call.TTY, call.Stdout, call.Stderr = x.opts.Tty, stdout, stderr
		if call.Values != "" {
			e.mu.Lock()
			b, ok := e.files[x.container+":"+call.Values]
			delete(e.files, x.container+":"+call.Values)
			e.mu.Unlock()
			var values []string
			if err := json.Unmarshal([]byte(b), &values); !ok || err != nil {
				e.t.Errorf("fake Engine: --values %s: no values delivered (%v)", call.Values, err)
			}
			call.Env = append(call.Env, values...)
		}
		if x.opts.AttachStdin {
			call.Stdin = rw.Reader
		}
		e.mu.Lock()
		fn := e.execFunc
		e.mu.Unlock()
		if fn == nil {
			fmt.Fprintf(stderr, "fake Engine: no exec function for %q\n", call.Cmd)
			code = 127
		} else {
			code = fn(call)
		}
	default:
		fmt.Fprintf(stderr, "fake Engine: unexpected exec %q\n", argv)
		code = 126
	}
	e.mu.Lock()
	x.running, x.exitCode = false, code
	e.notify()
	e.mu.Unlock()
}

// parseSuperviseExec reads `airlock supervise exec --spec F [--values PATH] [-e K=V]... [-w DIR] -- CMD...`.
func parseSuperviseExec(t *testing.T, argv []string) *fakeExecCall {
	call := &fakeExecCall{}
	args := argv[3:]
	for len(args) > 0 {
		switch a := args[0]; {
		case a == "--":
			call.Cmd = args[1:]
			return call
		case a == "--spec" && len(args) > 1:
			args = args[2:]
		case a == "-e" && len(args) > 1:
			call.Env, args = append(call.Env, args[1]), args[2:]
		case a == "--values" && len(args) > 1:
			call.Values, args = args[1], args[2:]
		case a == "-w" && len(args) > 1:
			call.Workdir, args = args[1], args[2:]
		default:
			t.Errorf("fake Engine: unexpected argument %q of %q", a, argv)
			return call
		}
	}
	t.Errorf("fake Engine: no -- in %q", argv)
	return call
}

// tail is `supervise tail [--follow] [--max-line N] [--from N | --lines N] -- FILE`:
// the header, the file from N (or its last N lines, or its start), then with
// --follow what is appended (lines are not cut),
// until the container stops or the client leaves. A file that is not there
// fails (125) after the header, as in a sandbox; with --follow it is waited for.
func (e *fakeEngine) tail(x *fakeEngineExec, argv []string, in *bufio.Reader, stdout, stderr io.Writer) int {
	dash := slices.Index(argv, "--")
	fromAt := slices.Index(argv, "--from")
	linesAt := slices.Index(argv, "--lines")
	follow := slices.Contains(argv, "--follow")
	if dash < 0 || dash != len(argv)-2 || (fromAt >= 0 && linesAt >= 0) {
		fmt.Fprintf(stderr, "fake Engine: bad tail %q\n", argv)
		return 2
	}
	key := x.container + ":" + argv[dash+1]
	var from int
	var err error
	switch {
	case fromAt >= 0:
		from, err = strconv.Atoi(argv[fromAt+1])
	case linesAt >= 0:
		var lines int
		if lines, err = strconv.Atoi(argv[linesAt+1]); err == nil {
			e.mu.Lock()
			content := e.files[key]
			e.mu.Unlock()
			var start int64
			start, err = supervisor.TailStart(strings.NewReader(content), int64(len(content)), lines)
			from = int(start)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "fake Engine: bad --from or --lines in %q\n", argv)
		return 2
	}
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, in); close(gone) }()
	if _, err := io.WriteString(stdout, supervisor.TailHeader); err != nil {
		return 0
	}
	for {
		e.mu.Lock()
		content, exists := e.files[key]
		running, ch := e.running[x.container], e.changes.C()
		e.mu.Unlock()
		if !exists && !follow {
			fmt.Fprintf(stderr, "airlock: open %s: no such file or directory\n", argv[dash+1])
			return 125
		}
		if from > len(content) {
			from = 0
		}
		if from < len(content) {
			if _, err := io.WriteString(stdout, content[from:]); err != nil {
				return 0
			}
			from = len(content)
		}
		if !running || !follow {
			return 0
		}
		select {
		case <-ch:
		case <-gone:
			return 0
		case <-e.quit:
			return 0
		}
	}
}
