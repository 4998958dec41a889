package cli

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitUntil: the poll behind the daemon's start and stop tries at once,
// then every interval, until the condition holds, the limit passes, the
// condition fails for good or the context ends.
func TestWaitUntil(t *testing.T) {
	tries := 0
	if !waitUntil(context.Background(), every(time.Millisecond, time.Minute), func() (bool, error) { tries++; return tries == 3, nil }) || tries != 3 {
		t.Errorf("held on try 3: got %d tries", tries)
	}
	start := time.Now()
	if waitUntil(context.Background(), every(5*time.Millisecond, 100*time.Millisecond), func() (bool, error) { return false, nil }) {
		t.Error("a condition that never holds held")
	}
	if d := time.Since(start); d < 90*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %v, want about 100ms", d)
	}
	tries = 0
	if waitUntil(context.Background(), every(time.Millisecond, time.Minute), func() (bool, error) { tries++; return false, errors.New("gone") }) || tries != 1 {
		t.Errorf("a failed condition: %d tries, want 1", tries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if waitUntil(ctx, every(time.Millisecond, time.Minute), func() (bool, error) { return false, nil }) || time.Since(start) > 5*time.Second {
		t.Error("an ended context did not end the wait")
	}
}
