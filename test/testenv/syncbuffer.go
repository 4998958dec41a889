package testenv

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: a process or a background
// goroutine writes to it while the test reads it, or waits for what it expects.
type SyncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changes Changes
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes.Notify()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset forgets what was written.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

// WaitFor waits until what was written contains want, woken by each write; it
// fails the test with the output when timeout passes first.
func (s *SyncBuffer) WaitFor(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	s.changes.Await(t, &s.mu, timeout, fmt.Sprintf("%q in the output", want),
		func() bool { return strings.Contains(s.b.String(), want) }, s.String)
}
