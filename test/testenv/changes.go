package testenv

import (
	"sync"
	"testing"
	"time"
)

// Changes is a condition variable with a deadline, for tests: whoever changes a
// state guarded by a lock calls Notify with the lock held, and a test waits with
// Await until a condition of that state holds, woken by each change instead of
// polling. The zero Changes is ready to use.
type Changes struct {
	ch chan struct{} // closed at the next Notify; nil while nobody waits
}

// Notify wakes whoever waits on C or in Await; the state's lock is held.
func (c *Changes) Notify() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// C returns a channel closed at the next Notify; the state's lock is held.
func (c *Changes) C() <-chan struct{} {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Await waits until cond, called with mu held, is true. When timeout passes
// first it fails the test, saying what it waited for and what describe (called
// without the lock; nil for nothing) returns.
func (c *Changes) Await(t testing.TB, mu sync.Locker, timeout time.Duration, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		mu.Lock()
		ok, ch := cond(), c.C()
		mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			more := ""
			if describe != nil {
				more = describe()
			}
			t.Fatalf("timed out waiting for %s after %v:\n%s", what, timeout, more)
		}
	}
}
