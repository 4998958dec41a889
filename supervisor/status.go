package supervisor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event kinds of the status stream.
const (
	KindDaemonStarted    = "daemon.started"
	KindDaemonReady      = "daemon.ready"
	KindDaemonCompleted  = "daemon.completed" // a one-shot daemon exited 0
	KindDaemonExited     = "daemon.exited"
	KindDaemonRestarting = "daemon.restarting"
	KindDaemonGaveUp     = "daemon.gave_up"
	KindDaemonStopped    = "daemon.stopped"
	KindDaemonKilled     = "daemon.killed"
	KindSupervisorReady  = "supervisor.ready"
	KindSupervisorFailed = "supervisor.failed"
	// KindSupervisorParked: a parked supervisor's static daemons are ready;
	// it waits for a claim.
	KindSupervisorParked = "supervisor.parked"
	KindMainExited       = "main.exited"
	// KindSupervisorExiting is the stream's last line: nothing follows it.
	KindSupervisorExiting = "supervisor.exiting"
)

// drainWait is how long the supervisor waits at exit for the host's follower, once
// it reported, to have read the whole stream: the host then needs no read of the
// stopped container's filesystem. A sandbox that ends before a follower attached
// does not wait (waiting for the attach costs a short run more than the read).
const drainWait = 250 * time.Millisecond

// StatusEvent is one line of the status stream.
type StatusEvent struct {
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Daemon   string    `json:"daemon,omitempty"`
	PID      int       `json:"pid,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	DelayMS  *int64    `json:"delay_ms,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// MarshalJSON writes the time as RFC3339Nano in UTC.
func (e StatusEvent) MarshalJSON() ([]byte, error) {
	type plain StatusEvent
	return json.Marshal(struct {
		Time string `json:"time"`
		plain
	}{e.Time.UTC().Format(time.RFC3339Nano), plain(e)})
}

// statusWriter appends events to the status stream, one JSON line each.
type statusWriter struct {
	mu  sync.Mutex
	w   io.Writer
	c   io.Closer
	now func() time.Time
	// written counts the bytes of the stream; readFile is where a follower
	// reports how much of it it read (see Tail's Report).
	written  int64
	readFile string
	// kept is the stream as written while it is at most MaxMarkedStatus
	// (nil past it), for a sealed end marker; finished: its last line is out.
	kept     []byte
	overflow bool
	finished bool
}

// openStatus creates (truncating) the status stream file.
func openStatus(path string) (*statusWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the status stream's folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open the status stream: %w", err)
	}
	return &statusWriter{w: f, c: f, now: time.Now}, nil
}

// emit writes e with the current time; a write error is dropped, since the
// stream is a report and the sandbox must not fail over it.
func (s *statusWriter) emit(e StatusEvent) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Time = s.now()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	n, _ := s.w.Write(append(b, '\n'))
	s.written += int64(n)
	if !s.overflow {
		if len(s.kept)+n > MaxMarkedStatus || n != len(b)+1 {
			s.kept, s.overflow = nil, true
		} else {
			s.kept = append(s.kept, b...)
			s.kept = append(s.kept, '\n')
		}
	}
}

// finish writes the stream's last line now (close will not again), and
// returns the whole stream when it was kept (nil otherwise): nothing is
// written to it after.
func (s *statusWriter) finish() []byte {
	if s == nil || s.c == nil {
		return nil
	}
	s.emit(StatusEvent{Kind: KindSupervisorExiting})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	if s.overflow {
		return nil
	}
	return append([]byte(nil), s.kept...)
}

// close ends the stream with its last line and, when a follower reports its
// progress, waits a little for it to have read everything.
func (s *statusWriter) close() {
	if s == nil || s.c == nil {
		return
	}
	s.mu.Lock()
	finished := s.finished
	s.mu.Unlock()
	if !finished {
		s.emit(StatusEvent{Kind: KindSupervisorExiting})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.c.Close()
	if s.readFile == "" {
		return
	}
	for deadline := time.Now().Add(drainWait); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		b, err := os.ReadFile(s.readFile)
		if err != nil {
			return // nobody follows
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= s.written {
			return
		}
	}
}
