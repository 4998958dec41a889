package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlock-dev/airlock/internal/ids"
)

// Exec is the record of one command run in a sandbox (`airlock exec`, the
// API's exec). Exec IDs are reserved forever, across all sandboxes.
type Exec struct {
	ID         string    `json:"exec_id"`
	SandboxID  string    `json:"sandbox_id"`
	Cmd        []string  `json:"cmd"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// ExitCode is nil while the command runs.
	ExitCode   *int   `json:"exit_code,omitempty"`
	StdoutPath string `json:"stdout_path,omitempty"`
	StderrPath string `json:"stderr_path,omitempty"`
	// Truncated: an output file reached its limit (artifacts.exec_output_max)
	// or could not be written, and ends with a marker line.
	Truncated bool `json:"truncated,omitempty"`
	// TimedOut: its timeout ended it (its exit code is 124).
	TimedOut bool `json:"timed_out,omitempty"`
}

func (e Exec) clone() Exec {
	e.Cmd = slices.Clone(e.Cmd)
	if e.ExitCode != nil {
		c := *e.ExitCode
		e.ExitCode = &c
	}
	return e
}

// ReserveExec reserves an exec ID for sandbox sandboxID without writing a
// record, and returns it (a new UUIDv4 when execID is empty). Errors:
// ErrNotFound, ErrInvalidID, ErrIDUsed.
func (s *Store) ReserveExec(sandboxID, execID string) (string, error) {
	if execID == "" {
		execID = ids.New()
	}
	err := s.update(func(tx *bolt.Tx) error {
		if _, err := getSandbox(tx, sandboxID); err != nil {
			return err
		}
		return reserve(tx, KindExec, execID, reservation{ReservedAt: s.now().UTC(), SandboxID: sandboxID})
	})
	if err != nil {
		return "", fmt.Errorf("cannot reserve an exec id in the sandbox %q: %w", sandboxID, err)
	}
	return execID, nil
}

// CreateExec reserves ex.ID (a new UUIDv4 when empty) and writes the exec
// record in one transaction. The sandbox must be ready (ErrInvalidState
// otherwise). StartedAt defaults to now. The exec.started event is the
// caller's to Append, or StartExec writes both.
func (s *Store) CreateExec(ex Exec) (Exec, error) {
	ex = s.prepareExec(ex)
	if err := s.update(func(tx *bolt.Tx) error { return createExecTx(tx, ex) }); err != nil {
		return Exec{}, fmt.Errorf("cannot record the exec %q in the sandbox %q: %w", ex.ID, ex.SandboxID, err)
	}
	return ex.clone(), nil
}

// StartExec is CreateExec and the Append of its started event (whose ExecID
// it sets) in one transaction: one write to the disk, not two.
func (s *Store) StartExec(ex Exec, started Event) (Exec, Event, error) {
	ex = s.prepareExec(ex)
	started.ExecID = ex.ID
	ev, err := s.prepareEvent(ex.SandboxID, started, "")
	if err != nil {
		return Exec{}, Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Exec{}, Event{}, fmt.Errorf("cannot record the exec %q in the sandbox %q: %w", ex.ID, ex.SandboxID, ErrClosed)
	}
	err = s.update(func(tx *bolt.Tx) error {
		if err := createExecTx(tx, ex); err != nil {
			return err
		}
		return appendTx(tx, ex.SandboxID, &ev, "")
	})
	if err != nil {
		return Exec{}, Event{}, fmt.Errorf("cannot record the exec %q in the sandbox %q: %w", ex.ID, ex.SandboxID, err)
	}
	s.publishLocked(ev)
	return ex.clone(), ev.clone(), nil
}

// prepareExec gives a new exec record its ID and start time when missing.
func (s *Store) prepareExec(ex Exec) Exec {
	if ex.ID == "" {
		ex.ID = ids.New()
	}
	if ex.StartedAt.IsZero() {
		ex.StartedAt = s.now()
	}
	ex.StartedAt = ex.StartedAt.UTC()
	ex.FinishedAt = time.Time{}
	ex.ExitCode = nil
	return ex.clone()
}

// createExecTx reserves ex.ID and writes its record within tx.
func createExecTx(tx *bolt.Tx, ex Exec) error {
	sb, err := getSandbox(tx, ex.SandboxID)
	if err != nil {
		return err
	}
	if sb.State != StateReady {
		return fmt.Errorf("%w: it is %s, not ready", ErrInvalidState, sb.State)
	}
	if err := reserve(tx, KindExec, ex.ID, reservation{ReservedAt: ex.StartedAt, SandboxID: ex.SandboxID}); err != nil {
		return err
	}
	b, err := tx.Bucket(bucketExecs).CreateBucketIfNotExists([]byte(ex.SandboxID))
	if err != nil {
		return err
	}
	return putJSON(b, []byte(ex.ID), ex)
}

// FinishExec records the exit code and end time (now when zero) of an exec.
// Finishing an exec twice is ErrInvalidState.
func (s *Store) FinishExec(sandboxID, execID string, exitCode int, finishedAt time.Time) (Exec, error) {
	return s.EndExec(sandboxID, execID, ExecEnd{ExitCode: exitCode, FinishedAt: finishedAt})
}

// ExecEnd is how an exec ended.
type ExecEnd struct {
	ExitCode   int
	FinishedAt time.Time // zero: now
	Truncated  bool      // an output file was cut (Exec.Truncated)
	TimedOut   bool      // its timeout ended it (Exec.TimedOut)
}

// EndExec is FinishExec with all of end recorded in the same write.
func (s *Store) EndExec(sandboxID, execID string, end ExecEnd) (Exec, error) {
	var out Exec
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		out, err = s.endExecTx(tx, sandboxID, execID, end)
		return err
	})
	if err != nil {
		return Exec{}, fmt.Errorf("cannot record the end of the exec %q in the sandbox %q: %w", execID, sandboxID, err)
	}
	return out, nil
}

// FinishExecEvent is EndExec and the Append of its finished event (whose
// ExecID it sets) in one transaction. The event is appended even when the
// exec's record cannot be ended (it ended already, or is gone): the history
// says what happened; the error says the record was not changed.
func (s *Store) FinishExecEvent(sandboxID, execID string, end ExecEnd, finished Event) (Exec, Event, error) {
	finished.ExecID = execID
	ev, err := s.prepareEvent(sandboxID, finished, "")
	if err != nil {
		return Exec{}, Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Exec{}, Event{}, fmt.Errorf("cannot record the end of the exec %q in the sandbox %q: %w", execID, sandboxID, ErrClosed)
	}
	var out Exec
	var endErr error
	err = s.update(func(tx *bolt.Tx) error {
		out, endErr = s.endExecTx(tx, sandboxID, execID, end)
		return appendTx(tx, sandboxID, &ev, "")
	})
	if err != nil {
		return Exec{}, Event{}, fmt.Errorf("cannot append %s to the history of the sandbox %q: %w", ev.Kind, sandboxID, err)
	}
	s.publishLocked(ev)
	if endErr != nil {
		return Exec{}, ev.clone(), fmt.Errorf("cannot record the end of the exec %q in the sandbox %q: %w", execID, sandboxID, endErr)
	}
	return out, ev.clone(), nil
}

// endExecTx records end on the exec's record within tx.
func (s *Store) endExecTx(tx *bolt.Tx, sandboxID, execID string, end ExecEnd) (Exec, error) {
	finishedAt := end.FinishedAt
	if finishedAt.IsZero() {
		finishedAt = s.now()
	}
	b, ex, err := getExec(tx, sandboxID, execID)
	if err != nil {
		return Exec{}, err
	}
	if ex.ExitCode != nil {
		return Exec{}, fmt.Errorf("%w: it finished already", ErrInvalidState)
	}
	code := end.ExitCode
	ex.ExitCode = &code
	ex.FinishedAt = finishedAt.UTC()
	ex.Truncated = ex.Truncated || end.Truncated
	ex.TimedOut = end.TimedOut
	return ex, putJSON(b, []byte(execID), ex)
}

// getExec returns the exec bucket of a sandbox and one of its records:
// ErrNotFound without the sandbox, ErrExecNotFound without the record.
func getExec(tx *bolt.Tx, sandboxID, execID string) (*bolt.Bucket, Exec, error) {
	if _, err := getSandbox(tx, sandboxID); err != nil {
		return nil, Exec{}, err
	}
	var ex Exec
	b := tx.Bucket(bucketExecs).Bucket([]byte(sandboxID))
	if b == nil {
		return nil, Exec{}, ErrExecNotFound
	}
	found, err := getJSON(b, []byte(execID), &ex)
	if err != nil {
		return nil, Exec{}, err
	}
	if !found {
		return nil, Exec{}, ErrExecNotFound
	}
	return b, ex, nil
}

// GetExec returns an exec record (ErrNotFound without the sandbox,
// ErrExecNotFound without the exec).
func (s *Store) GetExec(sandboxID, execID string) (Exec, error) {
	var ex Exec
	err := s.view(func(tx *bolt.Tx) error {
		_, e, err := getExec(tx, sandboxID, execID)
		ex = e
		return err
	})
	if err != nil {
		return Exec{}, fmt.Errorf("cannot get the exec %q of the sandbox %q: %w", execID, sandboxID, err)
	}
	return ex, nil
}

// ListExecs returns the exec records of a sandbox, oldest first. With
// runningOnly, only those without an exit code.
func (s *Store) ListExecs(sandboxID string, runningOnly bool) ([]Exec, error) {
	var out []Exec
	err := s.view(func(tx *bolt.Tx) error {
		if _, err := getSandbox(tx, sandboxID); err != nil {
			return err
		}
		b := tx.Bucket(bucketExecs).Bucket([]byte(sandboxID))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var ex Exec
			if err := json.Unmarshal(v, &ex); err != nil {
				return fmt.Errorf("cannot decode the stored exec %q: %w", k, err)
			}
			if !runningOnly || ex.ExitCode == nil {
				out = append(out, ex)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the execs of the sandbox %q: %w", sandboxID, err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
