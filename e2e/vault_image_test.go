package e2e

import (
	"context"
	"strings"
	"testing"
)

// TestVaultValueInImageRefused: a vault value in sandbox.image would be in the
// primary's Config.Image (docker inspect), so it is a config error, exit 2,
// before any Engine object exists; the same image tag from the host environment
// runs (issue 21, 9).
func TestVaultValueInImageRefused(t *testing.T) {
	limit(t)
	e := newEnv(t, "")
	repo, tag, ok := strings.Cut(e.Image, ":")
	if !ok {
		t.Fatalf("the test image %s has no tag", e.Image)
	}
	e.WriteManifest("[sandbox]\nimage = \"" + repo + ":${IMG_TAG}\"\nnetwork = \"none\"\n")
	e.Extra = append(e.Extra, "AIRLOCK_VAULT_PASSPHRASE=correct horse battery")
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	set := e.Command(ctx, "secrets", "set", "IMG_TAG", "--stdin")
	set.Stdin = strings.NewReader(tag + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secrets set: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"run", "--", "true"}, {"up", "-d"}} {
		r := e.Run(args...)
		want := "config error: sandbox.toml:2: sandbox.image: ${IMG_TAG} comes from the vault: a vault value cannot be used in an image reference (it would show in docker inspect)"
		if r.Code != 2 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, tag) {
			t.Errorf("airlock %s: want exit 2 with\n\t%s\ngot %s", strings.Join(args, " "), want, r)
		}
		if c := e.Containers(); len(c) != 0 {
			t.Errorf("airlock %s made %d containers", strings.Join(args, " "), len(c))
		}
	}
	e.assertClean()
	// From the host environment the same tag is the user's own: it runs.
	if r := e.RunEnv([]string{"IMG_TAG=" + tag}, "run", "--", "true"); r.Code != 0 {
		t.Errorf("a host value in sandbox.image: %s", r)
	}
	e.assertClean()
}
