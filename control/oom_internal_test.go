package control

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// stoppedReporter is a backend that says a stopped primary was not flagged
// OOM-killed, with or without a memory limit.
type stoppedReporter struct {
	limited bool
	asks    atomic.Int32
}

func (r *stoppedReporter) OOMKilled(context.Context, string) (bool, bool) {
	r.asks.Add(1)
	return false, r.limited
}

// TestAwaitOOMLateEvent: a primary with a memory limit that ended 137 before
// the Engine's oom event came is found OOM-killed once the event comes (Engine
// 20.10 sends it after the die event and never sets the inspect flag then: an
// OOM-killed sandbox was recorded stopped); one without a limit is answered
// at once; one whose event never comes is not OOM-killed, after a bound.
func TestAwaitOOMLateEvent(t *testing.T) {
	var flag atomic.Bool
	time.AfterFunc(200*time.Millisecond, func() { flag.Store(true) })
	if !awaitOOM(context.Background(), &stoppedReporter{limited: true}, "c", flag.Load) {
		t.Error("a limited primary whose oom event came 200 ms after its end: not OOM-killed")
	}
	unlimited := &stoppedReporter{}
	if awaitOOM(context.Background(), unlimited, "c", func() bool { return false }) || unlimited.asks.Load() != 1 {
		t.Errorf("a primary without a memory limit: OOM-killed, or asked %d times (want once)", unlimited.asks.Load())
	}
	if awaitOOM(context.Background(), &stoppedReporter{limited: true}, "c", func() bool { return false }) {
		t.Error("a limited primary whose oom event never came: OOM-killed")
	}
}
