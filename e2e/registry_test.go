package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// TestPrivateRegistry: sandbox.image in a registry with htpasswd auth. Without
// credentials `airlock run` fails (125) saying which docker login to run and
// leaves nothing; with the auths of ~/.docker/config.json, as docker login
// writes them, it runs; so does a sandbox the control daemon creates for an API
// client, the daemon pulling with the same credentials. The password appears in
// no output, event, log or file of airlock's.
func TestPrivateRegistry(t *testing.T) {
	limit(t)
	password := "pw-" + rand.Text()
	reg := testenv.AuthRegistry(t, "airlock", password)
	e := newEnv(t, "")
	ref := reg + "/airlock-e2e/private:" + strings.ToLower(rand.Text()[:8])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.Cli.ImageTag(ctx, e.Image, ref); err != nil {
		t.Fatal(err)
	}
	untag := func() {
		// Only the tag: the busybox image it names stays.
		if _, err := e.Cli.ImageRemove(context.Background(), ref, image.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cannot untag %s: %v", ref, err)
		}
	}
	t.Cleanup(untag)
	pushWithAuth(t, e, ref, "airlock", password)
	untag()
	e.WriteManifest("[sandbox]\nimage = \"" + ref + "\"\nnetwork = \"none\"\n")
	basicAuth := base64.StdEncoding.EncodeToString([]byte("airlock:" + password))
	noSecret := func(what, s string) {
		t.Helper()
		if strings.Contains(s, password) || strings.Contains(s, basicAuth) {
			t.Errorf("%s shows the password:\n%s", what, s)
		}
	}

	// No credentials: HOME has no .docker.
	r := e.Run("run", "--", "echo", "hello")
	t.Logf("run without credentials: %s", r)
	noSecret("airlock run", r.String())
	want := "cannot pull image " + ref + ": unauthorized: run docker login " + reg + " (no credentials for " + reg + " in " + filepath.Join(e.Home, ".docker", "config.json") + ")"
	if r.Code != 125 || !strings.Contains(r.Stderr, want) {
		t.Errorf("run without credentials: want exit 125 and %q, got %s", want, r)
	}
	e.assertClean()
	if _, err := e.Cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
		t.Errorf("image %s after the failed pull: %v", ref, err)
	}

	// auths in ~/.docker/config.json: the CLI pulls.
	if err := os.MkdirAll(filepath.Join(e.Home, ".docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"auths": {"` + reg + `": {"auth": "` + basicAuth + `"}}}`
	if err := os.WriteFile(filepath.Join(e.Home, ".docker", "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.Run("run", "--", "echo", "hello")
	t.Logf("run with credentials: %s", r)
	noSecret("airlock run", r.String())
	if r.Code != 0 || r.Stdout != "hello\n" {
		t.Errorf("run with credentials: want exit 0 and hello, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "airlock: pulling image "+ref)
	e.assertClean()

	// The control daemon (started by that run, with its HOME) pulls for a client
	// of its API. The image is gone again first.
	untag()
	c := e.daemonAPI()
	wm, _ := clitest.WireManifest(t, e.Project, e.Getenv)
	sb, err := c.Create(ctx, &client.CreateRequest{Kind: "up", Manifest: wm, Start: true})
	if err != nil {
		t.Fatalf("create through the API: %v", err)
	}
	got, _, err := c.WaitState(ctx, sb.ID, client.StateReady, client.StateFailed)
	t.Logf("daemon's create with credentials: %+v, %v", got, err)
	if err != nil || got.State != client.StateReady {
		t.Errorf("a sandbox of a private image created by the daemon: %+v, %v; want ready", got, err)
	}
	if _, err := e.Cli.ImageInspect(ctx, ref); err != nil {
		t.Errorf("the daemon did not pull %s: %v", ref, err)
	}
	e.deleteThroughAPI(c, sb.ID)

	// Without credentials the daemon's failure says the same.
	untag()
	if err := os.Remove(filepath.Join(e.Home, ".docker", "config.json")); err != nil {
		t.Fatal(err)
	}
	// The same manifest as above (not read again: twice in about twenty runs the
	// project's sandbox.toml was gone at this point; the note says what is left).
	if _, err := os.Stat(filepath.Join(e.Project, "sandbox.toml")); err != nil {
		entries, _ := os.ReadDir(e.Project)
		t.Logf("note: %v; the project dir holds %d entries", err, len(entries))
	}
	sb, err = c.Create(ctx, &client.CreateRequest{Kind: "up", Manifest: wm, Start: true})
	if err != nil {
		t.Logf("daemon's create without credentials: %v", err)
		noSecret("the API's error", err.Error())
		if !strings.Contains(err.Error(), "unauthorized: run docker login "+reg) {
			t.Errorf("create without credentials: %v", err)
		}
	} else {
		got, _, err := c.WaitState(ctx, sb.ID, client.StateFailed, client.StateReady)
		t.Logf("daemon's create without credentials: %+v, %v", got, err)
		if err != nil || got.State != client.StateFailed || !strings.Contains(got.Reason, "unauthorized: run docker login "+reg) {
			t.Errorf("a daemon's create without credentials: %+v, %v; want failed, saying to run docker login", got, err)
		}
		evs, err := c.Events(ctx, sb.ID, 0, false)
		if err == nil {
			for {
				ev, err := evs.Next()
				if err != nil {
					break
				}
				b, _ := json.Marshal(ev)
				noSecret("an event", string(b))
			}
			evs.Close()
		}
		e.deleteThroughAPI(c, sb.ID)
	}

	// No file of airlock's holds the password: state, logs, events.
	for _, dir := range []string{e.Config, e.Data, e.Runtime, e.Project} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err == nil {
				noSecret(p, string(b))
			}
			return nil
		})
	}
	e.assertClean()
}

// pushWithAuth pushes ref to its registry as user.
func pushWithAuth(t *testing.T, e *env, ref, user, password string) {
	t.Helper()
	host, _, _ := strings.Cut(ref, "/")
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: user, Password: password, ServerAddress: host})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := e.Cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if m.Error != "" {
			t.Fatalf("cannot push %s: %s", ref, m.Error)
		}
	}
}

// daemonAPI is a client of the control daemon an invocation of this env started.
func (e *env) daemonAPI() *client.Client { return client.New(e.Socket()) }

// deleteThroughAPI deletes a sandbox and waits until it is gone.
func (e *env) deleteThroughAPI(c *client.Client, id string) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Delete(ctx, id); err != nil {
		e.T.Errorf("cannot delete %s: %v", id, err)
		return
	}
	if _, _, err := c.WaitState(ctx, id, client.StateDeleted); err != nil {
		e.T.Errorf("sandbox %s is not deleted: %v", id, err)
	}
}
