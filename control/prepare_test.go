package control_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/daemonfiles"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// privateImages pushes the busybox image under n new tags to a registry that
// wants user airlock with a password, and leaves none of them on the Engine.
func privateImages(t *testing.T, e *env, n int) (refs []string, reg, password string) {
	t.Helper()
	password = "pw-" + randHex(12)
	reg = testenv.AuthRegistry(t, "airlock", password)
	ctx := ctxT(t, 2*time.Minute)
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: "airlock", Password: password, ServerAddress: reg})
	if err != nil {
		t.Fatal(err)
	}
	untag := func(ref string) {
		if _, err := e.docker.ImageRemove(context.Background(), ref, image.RemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cannot untag %s: %v", ref, err)
		}
	}
	for i := 0; i < n; i++ {
		ref := reg + "/airlock-control/prepare-" + randHex(4) + ":v1"
		if err := e.docker.ImageTag(ctx, e.image, ref); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { untag(ref) })
		rc, err := e.docker.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(rc)
		for {
			var m struct {
				Error string `json:"error"`
			}
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if m.Error != "" {
				t.Fatalf("cannot push %s: %s", ref, m.Error)
			}
		}
		rc.Close()
		untag(ref)
		refs = append(refs, ref)
	}
	return refs, reg, password
}

// prepareFor is a prepare request of the project's sandbox.toml, as the CLI
// sends it.
func (e *env) prepareFor() *client.PrepareRequest {
	wm, values := e.wire()
	return &client.PrepareRequest{Manifest: wm, Secrets: values}
}

// TestPrepare: POST /v1/prepare pulls a private image with the credentials of
// the request, its progress streamed as NDJSON frames; without them, or with a
// wrong password, the last frame is exit code 125 saying which docker login to
// run; a missing mount source with missing = "fail" is exit code 2 (a config
// error). Two prepares at once each get their own progress and credentials.
// The password is in no progress, error, event or line of the daemon's log.
func TestPrepare(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcess(t, e, rt)
	ctx := ctxT(t, 3*time.Minute)
	refs, reg, password := privateImages(t, e, 2)
	basic := base64.StdEncoding.EncodeToString([]byte("airlock:" + password))
	var seen []string // every text the daemon gave a client
	noSecret := func(what, s string) {
		t.Helper()
		seen = append(seen, s)
		if strings.Contains(s, password) || strings.Contains(s, basic) {
			t.Errorf("%s shows the password: %s", what, s)
		}
	}
	manifestOf := func(ref string) *client.PrepareRequest {
		e.writeManifest("[sandbox]\nimage = \"" + ref + "\"\nnetwork = \"none\"\n")
		return e.prepareFor()
	}
	good := client.RegistryAuth{Username: "airlock", Password: password, Source: "a test's config.json"}

	// A raw request: NDJSON, each line a frame, the last one the exit code.
	req := manifestOf(refs[0])
	req.RegistryAuth = map[string]client.RegistryAuth{refs[0]: {Username: "airlock", Password: "wrong-" + password}}
	body, _ := json.Marshal(req)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://airlockd/v1/prepare", bytes.NewReader(body))
	resp, err := socketClient(e.paths.Socket()).Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != client.NDJSON {
		t.Errorf("POST /v1/prepare: %s, Content-Type %q; want 200 and %s", resp.Status, ct, client.NDJSON)
	}
	var frames []client.PrepareFrame
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		noSecret("a frame", sc.Text())
		var f client.PrepareFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	resp.Body.Close()
	if len(frames) == 0 {
		t.Fatal("no frame")
	}
	last := frames[len(frames)-1]
	t.Logf("wrong password: %d frames, last %+v %+v", len(frames), last, last.Error)
	if last.ExitCode == nil || *last.ExitCode != 125 || last.Error == nil ||
		!strings.Contains(last.Error.Message, "cannot pull image "+refs[0]+": unauthorized: run docker login "+reg+" (the registry refused the credentials from the request") {
		t.Errorf("a pull with a wrong password: last frame %+v, error %+v; want exit 125 saying the registry refused them", last, last.Error)
	}
	if !strings.Contains(frames[0].Progress, "airlock: pulling image "+refs[0]) {
		t.Errorf("first frame %+v, want the pull's notice", frames[0])
	}

	// Without credentials (the daemon's HOME has none either): 125, what to do.
	var progress testenv.SyncBuffer
	err = c.Prepare(ctx, manifestOf(refs[0]), &progress)
	var pe *client.PrepareError
	if !errors.As(err, &pe) || pe.ExitCode != 125 || !strings.Contains(err.Error(), "unauthorized: run docker login "+reg) {
		t.Errorf("a pull without credentials: %v; want a PrepareError with exit code 125 saying to run docker login", err)
	}

	// Two at once: one with the credentials pulls, with progress; the other,
	// without, fails; neither sees the other's progress.
	reqA, reqB := manifestOf(refs[0]), manifestOf(refs[1])
	reqA.RegistryAuth = map[string]client.RegistryAuth{refs[0]: good}
	reqB.RegistryAuth = map[string]client.RegistryAuth{refs[1]: {Where: "the test's empty config"}}
	var outA, outB testenv.SyncBuffer
	var errA, errB error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); errA = c.Prepare(ctx, reqA, &outA) }()
	go func() { defer wg.Done(); errB = c.Prepare(ctx, reqB, &outB) }()
	wg.Wait()
	t.Logf("with credentials: %v\n%s", errA, outA.String())
	t.Logf("without, at once: %v\n%s", errB, outB.String())
	noSecret("progress", outA.String())
	noSecret("progress", outB.String())
	if errA != nil || !strings.Contains(outA.String(), "airlock: pulling image "+refs[0]) || strings.Contains(outA.String(), refs[1]) {
		t.Errorf("prepare with credentials: %v, progress %q; want success with its own progress only", errA, outA.String())
	}
	if errB == nil || !strings.Contains(errB.Error(), "no credentials for "+reg+" in the test's empty config") || strings.Contains(outB.String(), refs[0]) {
		t.Errorf("prepare without credentials at the same time: %v, progress %q", errB, outB.String())
	}
	if errB != nil {
		noSecret("an error", errB.Error())
	}
	if _, err := e.docker.ImageInspect(ctx, refs[0]); err != nil {
		t.Errorf("%s after its prepare: %v", refs[0], err)
	}

	// Present now: a create of it needs no credentials, and its events show none.
	e.writeManifest("[sandbox]\nimage = \"" + refs[0] + "\"\nnetwork = \"none\"\n")
	sb := e.createReady(ctx, c, "")
	evs, _ := json.Marshal(allEvents(t, c, sb.ID))
	noSecret("the events", string(evs))
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Error(err)
	}
	waitState(t, c, sb.ID, time.Minute, client.StateDeleted)

	// Quiet: no progress frame, only the result.
	progress.Reset()
	req = manifestOf(refs[0])
	req.Quiet = true
	if err := c.Prepare(ctx, req, &progress); err != nil || progress.String() != "" {
		t.Errorf("a quiet prepare of a present image: %v, progress %q", err, progress.String())
	}

	// A config error: a missing mount source with missing = "fail".
	e.writeManifest(strings.ReplaceAll(`[sandbox]
image = "{{image}}"
network = "none"

[mounts.data]
source = "./not-there"
target = "/data"
missing = "fail"
`, "{{image}}", e.image))
	err = c.Prepare(ctx, e.prepareFor(), &progress)
	t.Logf("missing mount source: %v", err)
	if !errors.As(err, &pe) || pe.ExitCode != 2 || pe.Err.Reason != client.ReasonConfig || !strings.Contains(err.Error(), "mounts.data") {
		t.Errorf("a missing mount source: %#v; want exit code 2, reason config_error, naming mounts.data", err)
	}
	if _, err := os.Stat(filepath.Join(e.project, "not-there")); err == nil {
		t.Errorf("the missing source was created")
	}

	// A request the daemon cannot take is an ordinary error answer.
	err = c.Prepare(ctx, &client.PrepareRequest{}, nil)
	if apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("a prepare without a manifest: %v, want invalid_request", err)
	}
	err = c.Prepare(ctx, &client.PrepareRequest{ManifestSource: client.ManifestSource{ManifestTOML: "[sandbox]\nimage = 3\n"}}, nil)
	if apiReason(err) != client.ReasonConfig {
		t.Errorf("a prepare of a bad manifest_toml: %v, want config_error", err)
	}

	// The daemon's log: the prepares are in it, the password is not.
	log, err := os.ReadFile(daemonfiles.LogFile(e.paths))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "prepare failed") {
		t.Errorf("the daemon's log does not mention the failed prepares")
	}
	noSecret("the daemon's log", string(log))
	if !strings.Contains(strings.Join(seen, "\n"), refs[0]) {
		t.Errorf("the texts checked do not name the image: the check proves nothing")
	}
}

// TestPrepareWireManifest: the manifest of a prepare is the one a create takes,
// clitest.WireManifest's included (values substituted from the host go in
// secrets, and the image named by one is prepared).
func TestPrepareWireManifest(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcess(t, e, rt)
	e.writeManifest("[sandbox]\nimage = \"${IMAGE}\"\nnetwork = \"none\"\n")
	wm, values := clitest.WireManifest(t, e.project, func(k string) (string, bool) {
		if k == "IMAGE" {
			return e.image, true
		}
		return "", false
	})
	if len(values) == 0 {
		t.Fatalf("the image's value is not apart: %v", values)
	}
	var progress testenv.SyncBuffer
	if err := c.Prepare(ctxT(t, time.Minute), &client.PrepareRequest{Manifest: wm, Secrets: values}, &progress); err != nil {
		t.Errorf("prepare of a present image named by a host value: %v (%s)", err, progress.String())
	}
}

// TestPrepareBuildContext: a context sent with PUT /v1/build-contexts/{sum}
// is built from by the prepare that names it (tagged by its hash, from no
// directory of the daemon's), then removed; a hash that is not one, or a
// prepare naming a context never sent, is invalid_request.
func TestPrepareBuildContext(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcess(t, e, rt)
	ctx := ctxT(t, 2*time.Minute)
	ctxDir := filepath.Join(e.project, "img")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM "+e.image+"\nCOPY mark /mark\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "mark"), []byte("sent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.writeManifest("[sandbox]\nnetwork = \"none\"\n\n[sandbox.build]\ncontext = \"img\"\n")
	wm, values := e.wire()
	r, err := manifest.FromWire(manifest.Wire(*wm), values)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := projectfs.ReadBuildContext(r)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon must not read the directory: it is gone once the tar is made.
	var tarball bytes.Buffer
	if err := bs.WriteTar(&tarball); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ctxDir); err != nil {
		t.Fatal(err)
	}
	if err := c.PutBuildContext(ctx, bs.Sum, &tarball); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testenv.RemoveImage(context.Background(), e.docker, bs.Tag) })
	req := &client.PrepareRequest{Manifest: wm, Secrets: values, BuildContext: bs.Sum, ClientFiles: true}
	if err := c.Prepare(ctx, req, nil); err != nil {
		t.Fatalf("prepare from the context sent: %v", err)
	}
	if _, err := e.docker.ImageInspect(ctx, bs.Tag); err != nil {
		t.Errorf("the image %s built from the context sent: %v", bs.Tag, err)
	}
	if err := c.Prepare(ctx, req, nil); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("a second prepare of the same context (removed after the first): %v, want invalid_request", err)
	}
	if err := c.PutBuildContext(ctx, "../../etc", strings.NewReader("x")); apiReason(err) != client.ReasonInvalidRequest {
		t.Errorf("a context named by no hash: %v, want invalid_request", err)
	}
}
