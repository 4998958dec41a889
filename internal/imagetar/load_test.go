package imagetar_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/internal/imagetar"
	"github.com/airlock-dev/airlock/test/testenv"
)

// loadMessage is one JSON message of the Engine's image load output.
type loadMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// TestDockerLoadsArchive loads an archive into the Docker Engine, as docker
// load does, and finds the image under its tag with its config and layer.
func TestDockerLoadsArchive(t *testing.T) {
	cli := testenv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Content unique to this run, so the image is new and removing it removes it.
	nonce := make([]byte, 8)
	rand.Read(nonce)
	tag := "localhost/airlock-imagetar-test:" + hex.EncodeToString(nonce)
	out, w := writeArchive(t, imagetar.Image{
		Ref: tag, OS: "linux", Architecture: "amd64", Entrypoint: []string{"/airlock"},
		Files: []imagetar.File{{Path: "/airlock", Mode: 0o755, Data: []byte("airlock imagetar test " + tag)}},
	})

	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatalf("cannot load the archive: %v", err)
	}
	t.Cleanup(func() { removeImage(t, cli, tag) })
	loaded := readLoadOutput(t, resp.Body)
	resp.Body.Close()
	if !strings.Contains(loaded, tag) {
		t.Errorf("the Engine's load output does not name %s:\n%s", tag, loaded)
	}

	inspect, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("cannot find the loaded image %s: %v", tag, err)
	}
	// The classic image store's ID is the config digest; the containerd
	// image store's, the manifest digest.
	if inspect.ID != w.ID && inspect.ID != w.Manifest {
		t.Errorf("image ID %s, want %s (config) or %s (manifest)", inspect.ID, w.ID, w.Manifest)
	}
	if !slices.Contains(inspect.RepoTags, tag) {
		t.Errorf("image tags %q, want %s among them", inspect.RepoTags, tag)
	}
	if inspect.Os != "linux" || inspect.Architecture != "amd64" {
		t.Errorf("image platform %s/%s, want linux/amd64", inspect.Os, inspect.Architecture)
	}
	if inspect.Config == nil || !slices.Equal(inspect.Config.Entrypoint, []string{"/airlock"}) {
		t.Errorf("image config %+v, want Entrypoint [/airlock]", inspect.Config)
	}
	if !slices.Equal(inspect.RootFS.Layers, []string{w.DiffID}) {
		t.Errorf("image layers %q, want [%s]", inspect.RootFS.Layers, w.DiffID)
	}
}

// readLoadOutput reads the load output to its end, failing the test on the
// error it reports, and returns the messages it printed.
func readLoadOutput(t *testing.T, r io.Reader) string {
	t.Helper()
	dec := json.NewDecoder(r)
	var out strings.Builder
	for {
		var m loadMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out.String()
		} else if err != nil {
			t.Fatalf("cannot read the load output: %v (after %q)", err, out.String())
		}
		out.WriteString(m.Stream)
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			t.Fatalf("the Engine failed to load the archive: %s (after %q)", msg, out.String())
		}
	}
}

func removeImage(t *testing.T, cli client.APIClient, ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Errorf("cannot remove image %s: %v", ref, err)
	}
}
