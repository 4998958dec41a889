package control

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// pieceQuoter is an Engine whose pull error quotes the image reference in
// pieces, its repository path in the registry's URL, as Engine 29 does:
// `https://bad/v2/<path>/manifests/latest`.
type pieceQuoter struct{ stopRecorder }

func (*pieceQuoter) Prepare(_ context.Context, r *manifest.Resolved, o backend.PrepareOptions) error {
	host, path, _ := strings.Cut(r.Sandbox.Image, "/")
	fmt.Fprintf(o.Progress, "pulling from https://%s/v2/%s/manifests/latest\n", host, path)
	return fmt.Errorf("cannot pull %s: Get \"https://%s/v2/%s/manifests/latest\": no such host", r.Sandbox.Image, host, path)
}

// TestMaskedInPieces (e2e.TestMCP on Engine 29): a field that mixes literal
// text with a substituted value (image = "bad/${API_KEY}") was masked as a
// whole only, so an error quoting the field in pieces showed the value. Each
// value is masked on its own too, in the error and in the progress.
func TestMaskedInPieces(t *testing.T) {
	const value = "sk-live-4f9a2c7e"
	s, _ := startedService(t, &pieceQuoter{})
	work, err := s.Prepare(&PrepareRequest{Text: &ManifestText{
		TOML: "[sandbox]\nimage = \"bad/${API_KEY}\"\n",
		Vars: map[string]string{"API_KEY": value},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	err = work(context.Background(), &progress)
	if err == nil {
		t.Fatal("the pull's error was lost")
	}
	for what, text := range map[string]string{"error": err.Error(), "progress": progress.String()} {
		if strings.Contains(text, value) {
			t.Errorf("the %s shows the value: %s", what, text)
		}
		if !strings.Contains(text, "https://bad/v2/") {
			t.Errorf("the %s lost what is not secret: %s", what, text)
		}
	}
}
