package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/secrets"
)

// prepareDaemon serves POST /v1/prepare on a Unix socket: it records each
// request and answers the frames a test set.
type prepareDaemon struct {
	mu       sync.Mutex
	reqs     []client.PrepareRequest
	frames   []client.PrepareFrame
	contexts map[string][]string // build contexts sent, by hash: their entries
}

func (d *prepareDaemon) start(t *testing.T) *client.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "al")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/build-contexts/{sum}", func(w http.ResponseWriter, r *http.Request) {
		var names []string
		tr := tar.NewReader(r.Body)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			names = append(names, h.Name)
		}
		d.mu.Lock()
		if d.contexts == nil {
			d.contexts = map[string][]string{}
		}
		d.contexts[r.PathValue("sum")] = names
		d.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/prepare", func(w http.ResponseWriter, r *http.Request) {
		var req client.PrepareRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("a prepare request that does not decode: %v", err)
		}
		d.mu.Lock()
		d.reqs = append(d.reqs, req)
		frames := d.frames
		d.mu.Unlock()
		w.Header().Set("Content-Type", client.NDJSON)
		for _, f := range frames {
			_ = json.NewEncoder(w).Encode(f)
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return client.New(sock)
}

func exitOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestPrepareViaDaemon: run and up have the daemon pull and build: the
// credentials of the user's docker config for the sandbox's and services'
// images go in the request, the progress frames reach stderr (not with -q),
// and the last frame's exit code is the CLI's (2 a config error, 125 a failed
// pull). Through a daemon on another machine a build's context is sent first
// and the prepare names it; the sandbox is then made from the image built.
func TestPrepareViaDaemon(t *testing.T) {
	home := t.TempDir()
	const password = "pw-prepare-cli-4d2a"
	auth := base64.StdEncoding.EncodeToString([]byte("me:" + password))
	if err := os.MkdirAll(filepath.Join(home, ".docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"auths": {"registry.example:5000": {"auth": "` + auth + `"}}}`
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"HOME": home, "DOCKER_AUTH_CONFIG": ""}
	var stderr bytes.Buffer
	a := &app{stderr: &stderr, redactor: secrets.NewRedactor(), getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	project := t.TempDir()
	load := func(toml string) *manifest.Resolved {
		t.Helper()
		if err := os.WriteFile(filepath.Join(project, "sandbox.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := (&manifest.Loader{Getenv: a.getenv}).Load(filepath.Join(project, "sandbox.toml"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	d := &prepareDaemon{}
	c := d.start(t)
	ctx := context.Background()
	code := func(n int) *int { return &n }

	r := load("[sandbox]\nimage = \"registry.example:5000/team/app:1\"\nnetwork = \"bridge\"\n\n[services.db]\nimage = \"other.example/db:2\"\n")
	d.frames = []client.PrepareFrame{{Progress: "airlock: pulling image registry.example:5000/team/app:1\n"}, {ExitCode: code(0)}}
	if made, err := a.prepareViaDaemon(ctx, c, r, nil); err != nil || made != r {
		t.Fatalf("prepare: %v (made from the manifest as it is: %v)", err, made == r)
	}
	if got := stderr.String(); got != "airlock: pulling image registry.example:5000/team/app:1\n" {
		t.Errorf("stderr %q, want the progress frame's text", got)
	}
	req := d.reqs[0]
	app, db := req.RegistryAuth["registry.example:5000/team/app:1"], req.RegistryAuth["other.example/db:2"]
	sent := func(a client.RegistryAuth) bool {
		return a.Auth == auth || a.Username == "me" && a.Password == password
	}
	if !sent(app) || app.Source != filepath.Join(home, ".docker", "config.json") {
		t.Errorf("the sandbox image's credentials: %+v (sent: %v), want the config's", app, sent(app))
	}
	if db.Auth != "" || db.Password != "" || db.Source != "" || db.Where != filepath.Join(home, ".docker", "config.json") {
		t.Errorf("the service image's credentials: %+v, want none, looked for in the config", db)
	}
	if req.Manifest == nil || req.Quiet || req.BuildAuth != nil {
		t.Errorf("the request: manifest %v, quiet %v, build auth %v", req.Manifest != nil, req.Quiet, req.BuildAuth != nil)
	}
	if s := app.String() + app.GoString(); strings.Contains(s, password) || strings.Contains(s, auth) {
		t.Errorf("a RegistryAuth prints its secret: %s", s)
	}

	// A failed pull: 125 and the daemon's message; a config error: 2, as a
	// config error of the CLI's own reads. -q: no progress.
	stderr.Reset()
	a.opts.quiet = true
	d.frames = []client.PrepareFrame{{ExitCode: code(125), Error: &client.Error{Reason: client.ReasonInternal, Message: "cannot pull image x: unauthorized"}}}
	_, err := a.prepareViaDaemon(ctx, c, r, nil)
	if exitOf(err) != 125 || err.Error() != "cannot pull image x: unauthorized" {
		t.Errorf("a failed pull: %v (exit %d), want 125 and the message", err, exitOf(err))
	}
	if !d.reqs[1].Quiet {
		t.Errorf("-q does not ask for a quiet prepare")
	}
	d.frames = []client.PrepareFrame{{ExitCode: code(2), Error: &client.Error{Reason: client.ReasonConfig, Message: "mounts.data.source: ./x does not exist"}}}
	_, err = a.prepareViaDaemon(ctx, c, r, nil)
	if exitOf(err) != 2 || err.Error() != "config error: mounts.data.source: ./x does not exist" {
		t.Errorf("a config error: %v (exit %d), want 2 and config error: …", err, exitOf(err))
	}

	// A build: every stored credential goes (as docker build sends them), the
	// sandbox image has none of its own. Through a remote daemon: refused.
	d.frames = []client.PrepareFrame{{ExitCode: code(0)}}
	rb := load("[sandbox]\nnetwork = \"none\"\n\n[sandbox.build]\ncontext = \".\"\n")
	if err := os.WriteFile(filepath.Join(project, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.prepareViaDaemon(ctx, c, rb, nil); err != nil {
		t.Fatal(err)
	}
	req = d.reqs[len(d.reqs)-1]
	if !sent(req.BuildAuth["registry.example:5000"]) || len(req.RegistryAuth) != 0 {
		t.Errorf("a build's request: build auth sent %v, pull credentials %v", sent(req.BuildAuth["registry.example:5000"]), len(req.RegistryAuth))
	}
	if len(d.contexts) != 0 {
		t.Errorf("a build through this machine's daemon sent its context: %v", d.contexts)
	}
	a.opts.host = "ssh://builder.example"
	made, err := a.prepareViaDaemon(ctx, c, rb, nil)
	req = d.reqs[len(d.reqs)-1]
	if err != nil || req.BuildContext == "" || !slices.Contains(d.contexts[req.BuildContext], "Dockerfile") || !req.ClientFiles {
		t.Errorf("a build through a remote daemon: %v; prepare names context %q (sent: %v), client files %v", err, req.BuildContext, d.contexts, req.ClientFiles)
	}
	if made == nil || made.Sandbox.Build != nil || !strings.HasPrefix(made.Sandbox.Image, projectfs.BuildRepo+"/") || !strings.HasSuffix(made.Sandbox.Image, req.BuildContext[:16]) || rb.Sandbox.Build == nil {
		t.Errorf("a build through a remote daemon: the sandbox is made from %+v, want the image built from the context sent (and the loaded manifest unchanged)", made)
	}
	if _, err := a.prepareViaDaemon(ctx, c, r, nil); err != nil {
		t.Errorf("a pull through a remote daemon: %v, want it done there", err)
	}
	n := len(d.contexts)
	a.opts.host = "unix:///run/other.sock"
	if _, err := a.prepareViaDaemon(ctx, c, rb, nil); err != nil || len(d.contexts) != n {
		t.Errorf("a build through another daemon on this machine (unix://): %v (contexts sent: %d more)", err, len(d.contexts)-n)
	}
	if strings.Contains(stderr.String(), password) {
		t.Errorf("stderr shows the password: %s", stderr.String())
	}
}
