package control

import (
	"maps"
	"testing"
)

// TestMarkUpOneshot: the daemons-up count of ps follows a daemon's events; a
// one-shot that completed counts as up (it did what it is for), one that failed
// does not, and a new start forgets both.
func TestMarkUpOneshot(t *testing.T) {
	up := map[string]bool{}
	for _, e := range []struct{ kind, daemon string }{
		{"daemon.started", "db"},
		{"daemon.ready", "db"},
		{"daemon.started", "schema"},
		{"daemon.completed", "schema"},
		{"daemon.started", "seed"},
		{"daemon.exited", "seed"},
	} {
		markUp(up, e.kind, e.daemon)
	}
	if want := map[string]bool{"db": true, "schema": true, "seed": false}; !maps.Equal(up, want) {
		t.Errorf("up = %v, want %v", up, want)
	}
	markUp(up, "sandbox.started", "")
	if len(up) != 0 {
		t.Errorf("after sandbox.started: %v", up)
	}
}
