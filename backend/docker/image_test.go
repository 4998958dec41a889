package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/test/testenv"
)

// screen replays the output of the terminal progress on a minimal terminal (cursor
// up, clear line, carriage return, newline) and returns its lines.
func screen(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	row := 0
	for len(out) > 0 {
		switch {
		case strings.HasPrefix(out, "\x1b["):
			end := strings.IndexAny(out[2:], "AK")
			if end < 0 {
				t.Fatalf("unterminated escape in %q", out)
			}
			arg, cmd := out[2:2+end], out[2+end]
			out = out[3+end:]
			switch cmd {
			case 'A':
				var n int
				for _, c := range arg {
					n = n*10 + int(c-'0')
				}
				if row -= n; row < 0 {
					t.Fatalf("cursor moved above the output")
				}
			case 'K':
				if row < len(lines) {
					lines[row] = ""
				}
			}
		case out[0] == '\r':
			out = out[1:]
		case out[0] == '\n':
			row++
			out = out[1:]
		default:
			i := strings.IndexAny(out, "\x1b\r\n")
			if i < 0 {
				i = len(out)
			}
			for len(lines) <= row {
				lines = append(lines, "")
			}
			lines[row] += out[:i]
			out = out[i:]
		}
	}
	if row != len(lines) {
		t.Errorf("cursor on row %d, want %d (below the output)", row, len(lines))
	}
	return lines
}

func TestPullMissingImage(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 2*time.Minute)
	for _, ref := range []string{"airlock-nonexistent/image:nope", testenv.Registry(t) + "/airlock-nonexistent/image:nope"} {
		_, err := g.rt.images(nil).Ensure(ctx, ref)
		t.Logf("Ensure(%s): %v", ref, err)
		var e *backend.Error
		if !errors.As(err, &e) || e.Code != 125 {
			t.Errorf("Ensure(%s) = %v, want an *Error with code 125", ref, err)
			continue
		}
		if !strings.Contains(err.Error(), ref) || !strings.HasPrefix(err.Error(), "cannot pull image ") {
			t.Errorf("Ensure(%s) error %q does not start with \"cannot pull image\" and name the image", ref, err)
		}
	}
}

func TestPullProgress(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	ctx := testContext(t, 3*time.Minute)
	reg := testenv.Registry(t)
	// An image of its own (a nonce layer), so the pull downloads rather than
	// finding every layer already present.
	ref := reg + "/airlock-test/pull-" + strings.ToLower(ids.New()[:8]) + ":v1"
	buildScratch(t, g, ref, ids.New())
	push(t, g, ref)
	removeImage(t, g, ref)
	t.Cleanup(func() { removeImage(t, g, ref) })

	img, err := g.rt.images(nil).Ensure(ctx, ref)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !containsRef(img.RepoTags, ref) {
		t.Errorf("pulled image tags = %v, want %s", img.RepoTags, ref)
	}
	out := g.progress.String()
	t.Logf("plain pull progress:\n%s", out)
	if strings.Contains(out, "\x1b") {
		t.Errorf("plain progress has escape sequences: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("line %q printed twice:\n%s", l, out)
		}
		seen[l] = true
	}
	for _, w := range []string{"airlock: pulling image " + ref, ": Pull complete", "Status: Downloaded newer image for " + ref} {
		if !strings.Contains(out, w) {
			t.Errorf("progress lacks %q:\n%s", w, out)
		}
	}

	// Again on a terminal: the block is redrawn in place.
	removeImage(t, g, ref)
	g.progress.Reset()
	g.rt.ProgressTTY = true
	if _, err := g.rt.images(nil).Ensure(ctx, ref); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	scr := screen(t, g.progress.String())
	t.Logf("terminal pull progress:\n%s", strings.Join(scr, "\n"))
	if !strings.Contains(strings.Join(scr, "\n"), ": Pull complete") {
		t.Errorf("terminal progress ends with:\n%s", strings.Join(scr, "\n"))
	}

	// Present: no pull, no output.
	g.progress.Reset()
	if _, err := g.rt.images(nil).Ensure(ctx, ref); err != nil || g.progress.String() != "" {
		t.Errorf("Ensure of a present image = %v, output %q", err, g.progress.String())
	}
}

func containsRef(tags []string, ref string) bool {
	for _, t := range tags {
		if t == ref {
			return true
		}
	}
	return false
}

// buildScratch builds a FROM-scratch image holding one file with content.
func buildScratch(t *testing.T, g *testRig, ref, content string) {
	t.Helper()
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for name, body := range map[string]string{"Dockerfile": "FROM scratch\nCOPY nonce /nonce\n", "nonce": content} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	resp, err := g.cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{Tags: []string{ref}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := streamError(resp.Body); err != nil {
		t.Fatalf("cannot build %s: %v", ref, err)
	}
}

func push(t *testing.T, g *testRig, ref string) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	// The Engine wants an auth header even for a registry without auth: "{}".
	rc, err := g.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := streamError(rc); err != nil {
		t.Fatalf("cannot push %s: %v", ref, err)
	}
}

func removeImage(t *testing.T, g *testRig, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testenv.RemoveImage(ctx, g.cli, ref); err != nil {
		t.Errorf("cannot remove %s: %v", ref, err)
	}
}

// streamError reads a JSON message stream to its end and returns its error.
func streamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// TestPullPrivateRegistry: a pull from a registry with htpasswd auth uses the
// docker CLI's credentials ($DOCKER_CONFIG/config.json auths, a credential
// helper); without them it fails saying which docker login to run, and leaves
// nothing. The password is never printed. Not parallel: the credential helper
// is found on this process's PATH, as the docker CLI finds it.
func TestPullPrivateRegistry(t *testing.T) {
	g := newRig(t)
	ctx := testContext(t, 3*time.Minute)
	ref, reg, password := privateImage(t, g, "private")
	noSecret := func(what, s string) { t.Helper(); assertNoPassword(t, what, s, password) }
	absent := func() {
		t.Helper()
		if _, err := g.cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
			t.Errorf("image %s after a failed pull: %v, want not found", ref, err)
		}
	}
	pull := func() error {
		t.Helper()
		g.progress.Reset()
		_, err := g.rt.images(nil).Ensure(ctx, ref)
		if err != nil {
			noSecret("the error", err.Error())
		}
		noSecret("the progress", g.progress.String())
		return err
	}
	wantUnauthorized := func(err error, detail string) {
		t.Helper()
		t.Logf("error: %v", err)
		var e *backend.Error
		want := "cannot pull image " + ref + ": unauthorized: run docker login " + reg + " ("
		if !errors.As(err, &e) || e.Code != 125 || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), detail) {
			t.Errorf("pull = %v, want an *Error with code 125 starting %q and saying %q", err, want, detail)
		}
		absent()
	}
	dockerConfig := func(body string) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		g.env["DOCKER_CONFIG"] = dir
		return filepath.Join(dir, "config.json")
	}
	t.Setenv("DOCKER_AUTH_CONFIG", "")

	// No credentials: ~/.docker of the rig's HOME does not exist.
	wantUnauthorized(pull(), "no credentials for "+reg+" in "+filepath.Join(g.env["HOME"], ".docker", "config.json"))
	// Wrong ones.
	basic := func(user, pass string) string { return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)) }
	cfg := dockerConfig(`{"auths": {"` + reg + `": {"auth": "` + basic("airlock", "wrong") + `"}}}`)
	wantUnauthorized(pull(), "the registry refused the credentials from "+cfg)

	// auths of $DOCKER_CONFIG/config.json, as docker login writes them.
	dockerConfig(`{"auths": {"` + reg + `": {"auth": "` + basic("airlock", password) + `"}}}`)
	if err := pull(); err != nil {
		t.Fatalf("pull with auths: %v", err)
	}
	if out := g.progress.String(); !strings.Contains(out, "Status: Downloaded newer image for "+ref) {
		t.Errorf("pull progress:\n%s", out)
	}
	removeImage(t, g, ref)

	// A credential helper named by credHelpers, found on PATH.
	bin := t.TempDir()
	helper := "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nserver=$(cat)\n" +
		"[ \"$server\" = " + reg + " ] || { echo 'credentials not found in native keychain'; exit 1; }\n" +
		"printf '{\"ServerURL\":\"%s\",\"Username\":\"airlock\",\"Secret\":\"" + password + "\"}' \"$server\"\n"
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-airlocktest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dockerConfig(`{"credHelpers": {"` + reg + `": "airlocktest"}}`)
	if err := pull(); err != nil {
		t.Fatalf("pull with a credential helper: %v", err)
	}
	removeImage(t, g, ref)

	// A helper that is not installed: said so.
	dockerConfig(`{"credsStore": "airlock-missing"}`)
	wantUnauthorized(pull(), "credential helper docker-credential-airlock-missing failed")
}

// privateImage starts a registry that wants the user airlock and a random
// password, and pushes a small image of its own there as <registry>/airlock-test/
// <name>-<random>:v1, which is not left on the Engine.
func privateImage(t *testing.T, g *testRig, name string) (ref, reg, password string) {
	t.Helper()
	password = "pw-" + ids.New()
	reg = testenv.AuthRegistry(t, "airlock", password)
	ref = reg + "/airlock-test/" + name + "-" + strings.ToLower(ids.New()[:8]) + ":v1"
	buildScratch(t, g, ref, ids.New())
	t.Cleanup(func() { removeImage(t, g, ref) })
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: "airlock", Password: password, ServerAddress: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	rc, err := g.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := streamError(rc); err != nil {
		t.Fatalf("cannot push %s: %v", ref, err)
	}
	removeImage(t, g, ref)
	return ref, reg, password
}

// assertNoPassword fails the test when s shows password, as it is or in a
// basic auth of the user airlock.
func assertNoPassword(t *testing.T, what, s, password string) {
	t.Helper()
	if strings.Contains(s, password) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte("airlock:"+password))) {
		t.Errorf("%s shows the password: %s", what, s)
	}
}
