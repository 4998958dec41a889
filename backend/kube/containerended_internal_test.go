package kube

import (
	"errors"
	"testing"
)

// TestContainerEnded: the errors of an exec into a Pod's container that ended
// (containerd's two, as this project's cluster gave them; CRI-O's) say so;
// others do not, so that a sealed end is then not believed.
func TestContainerEnded(t *testing.T) {
	for msg, want := range map[string]bool{
		`Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "460c819f": task cf845c08 not found: not found`:      true,
		`Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "1abb30fc": cannot exec in a stopped state: unknown`: true,
		`Internal error occurred: error executing command in container: failed to exec in container: failed to create exec "b2048ce4": container not created: not found`:        true,
		`Internal error occurred: error executing command in container: failed to exec in container: failed to load task: no running task found: not found`:                     true,
		`unable to upgrade connection: container not found ("sandbox")`:                                       true,
		`unable to upgrade connection: container not found ("other")`:                                         false,
		`rpc error: code = Unknown desc = command error: container is not created or running`:                 true,
		`pods "airlock-x" not found`:                                                                          false,
		`error dialing backend: dial tcp 10.0.0.2:10250: connect: connection refused`:                         false,
		`Internal error occurred: error executing command in container: failed to exec in container: timeout`: false,
	} {
		if got := containerEnded(errors.New(msg)); got != want {
			t.Errorf("containerEnded(%q) = %v, want %v", msg, got, want)
		}
	}
}
