package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/client"
)

// freezeFailEngine answers a pause with errs in turn, then nil. Every other
// call panics.
type freezeFailEngine struct {
	client.APIClient
	errs   []error
	pauses int
}

func (e *freezeFailEngine) ContainerPause(context.Context, string) error {
	e.pauses++
	if len(e.errs) > 0 {
		err := e.errs[0]
		e.errs = e.errs[1:]
		return err
	}
	return nil
}

// TestPauseRetriesAFreezeRace: a snapshot's pause that runc could not freeze
// for a passing race is tried again (a snapshot failed "OCI runtime pause
// failed: unable to freeze" on Engine 29); another failure is not.
func TestPauseRetriesAFreezeRace(t *testing.T) {
	race := errors.New("Error response from daemon: cannot pause container c: OCI runtime pause failed: unable to freeze")
	e := &freezeFailEngine{errs: []error{race, race}}
	if err := pauseRetrying(context.Background(), e, "c"); err != nil || e.pauses != 3 {
		t.Errorf("two freeze races, then a freeze: %v after %d pauses; want it paused after 3", err, e.pauses)
	}
	other := &freezeFailEngine{errs: []error{errors.New("No such container: c")}}
	if err := pauseRetrying(context.Background(), other, "c"); err == nil || other.pauses != 1 {
		t.Errorf("a missing container: %v after %d pauses; want the error after 1", err, other.pauses)
	}
}
