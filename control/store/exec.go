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
// caller's to Append.
func (s *Store) CreateExec(ex Exec) (Exec, error) {
	if ex.ID == "" {
		ex.ID = ids.New()
	}
	if ex.StartedAt.IsZero() {
		ex.StartedAt = s.now()
	}
	ex.StartedAt = ex.StartedAt.UTC()
	ex.FinishedAt = time.Time{}
	ex.ExitCode = nil
	ex = ex.clone()
	err := s.update(func(tx *bolt.Tx) error {
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
	})
	if err != nil {
		return Exec{}, fmt.Errorf("cannot record the exec %q in the sandbox %q: %w", ex.ID, ex.SandboxID, err)
	}
	return ex.clone(), nil
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
}

// EndExec is FinishExec with all of end recorded in the same write.
func (s *Store) EndExec(sandboxID, execID string, end ExecEnd) (Exec, error) {
	exitCode, finishedAt := end.ExitCode, end.FinishedAt
	if finishedAt.IsZero() {
		finishedAt = s.now()
	}
	var out Exec
	err := s.update(func(tx *bolt.Tx) error {
		b, ex, err := getExec(tx, sandboxID, execID)
		if err != nil {
			return err
		}
		if ex.ExitCode != nil {
			return fmt.Errorf("%w: it finished already", ErrInvalidState)
		}
		ex.ExitCode = &exitCode
		ex.FinishedAt = finishedAt.UTC()
		ex.Truncated = ex.Truncated || end.Truncated
		out = ex
		return putJSON(b, []byte(execID), ex)
	})
	if err != nil {
		return Exec{}, fmt.Errorf("cannot record the end of the exec %q in the sandbox %q: %w", execID, sandboxID, err)
	}
	return out, nil
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
