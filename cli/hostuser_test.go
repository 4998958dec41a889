package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// TestHostUserResolved: sandbox.user = "host" reaches the daemon as the
// uid:gid of the user running the CLI (resolved on the client's side, so a
// daemon running as another user uses the client's); the manifest the CLI
// holds (what config prints) keeps "host", and another user is sent as it is.
func TestHostUserResolved(t *testing.T) {
	dir := project(t, "[sandbox]\nimage = \"busybox\"\nuser = \"host\"\n")
	l := &manifest.Loader{Getenv: func(string) (string, bool) { return "", false }}
	r, err := l.Load(dir + "/sandbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := withHostUser(r, 1234, 567).Sandbox.User; got != "1234:567" {
		t.Errorf("withHostUser: %q, want 1234:567", got)
	}
	wm, _, err := wireManifest(r)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest.Manifest
	if err := json.Unmarshal(wm.Resolved, &m); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()); m.Sandbox.User != want {
		t.Errorf("sent sandbox.user %q, want %q", m.Sandbox.User, want)
	}
	if r.Sandbox.User != manifest.HostUser {
		t.Errorf("the CLI's manifest changed: sandbox.user %q", r.Sandbox.User)
	}
	r.Sandbox.User = "nobody"
	if got := withHostUser(r, 1234, 567); got != r {
		t.Errorf("another user was rewritten: %q", got.Sandbox.User)
	}
}
