package supervisor

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestHoldWaitsForRelease: a spec with hold starts nothing, not even its status
// stream, until a delivery reaches its socket, although no env entry takes a
// secret; an empty object releases it and the main command runs.
func TestHoldWaitsForRelease(t *testing.T) {
	s := newSandbox(t)
	s.spec.Hold = true
	s.spec.SecretsSocket = s.path("secrets.sock")
	s.spec.Main.Argv = sh("echo ran > " + s.path("ran"))
	s.start()
	s.waitFor("the secrets socket", func() bool {
		_, err := os.Stat(s.spec.SecretsSocket)
		return err == nil
	})
	// The supervisor listens before it opens anything else: the main command
	// has not run, and the status stream is not there.
	if _, err := os.Stat(s.path("ran")); !os.IsNotExist(err) {
		t.Fatalf("the main command ran before the release (%v)", err)
	}
	if evs := s.events(); len(evs) != 0 {
		t.Fatalf("events before the release: %+v", evs)
	}
	if err := Deliver(s.spec.SecretsSocket, strings.NewReader(`{}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	r := s.wait()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := s.read("ran"); got != "ran\n" {
		t.Fatalf("the main command wrote %q, want \"ran\\n\"", got)
	}
}

// TestHoldNeedsSocket: hold without a socket to release it is refused.
func TestHoldNeedsSocket(t *testing.T) {
	_, err := ParseSpec([]byte(`{"version":1,"hold":true,"main":{"argv":["true"]}}`))
	if err == nil || !strings.Contains(err.Error(), "hold needs secrets_socket") {
		t.Fatalf("want a refusal naming secrets_socket, got %v", err)
	}
	s, err := ParseSpec([]byte(`{"version":1,"hold":true,"secrets_socket":"/run/s.sock","main":{"argv":["true"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.NeedsSecrets() {
		t.Error("a held spec with no secret entry: NeedsSecrets() is false, want true")
	}
}
