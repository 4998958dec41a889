package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlock-dev/airlock/internal/ids"
)

// Sandbox states (design.md §8).
const (
	StatePending  = "pending"
	StateReady    = "ready"
	StateStopped  = "stopped"
	StateFailed   = "failed"
	StateDeleting = "deleting"
	StateDeleted  = "deleted"
	// StatePaused: every process of the sandbox frozen, its memory kept
	// (POST …/pause); unpaused, it is ready again.
	StatePaused = "paused"
)

// States lists every state.
var States = []string{StatePending, StateReady, StateStopped, StateFailed, StateDeleting, StateDeleted, StatePaused}

// transitions is the table of allowed state changes:
//
//	pending  -> ready | failed | deleting
//	ready    -> stopped | failed | deleting | paused
//	paused   -> ready | stopped | failed | deleting
//	stopped  -> ready | failed | deleting
//	failed   -> ready | deleting
//	deleting -> deleted
//	deleted  -> (terminal)
//
// failed -> ready is allowed so that a sandbox the daemon marked failed (its
// container exited, or the daemon restarted while it was pending) can be
// resumed like a stopped one once its container runs again; a failed sandbox
// never goes back to pending. deleting cannot fail: a deletion that errs stays
// deleting and is retried (restart recovery finishes it).
var transitions = map[string][]string{
	StatePending:  {StateReady, StateFailed, StateDeleting},
	StateReady:    {StateStopped, StateFailed, StateDeleting, StatePaused},
	StatePaused:   {StateReady, StateStopped, StateFailed, StateDeleting},
	StateStopped:  {StateReady, StateFailed, StateDeleting},
	StateFailed:   {StateReady, StateDeleting},
	StateDeleting: {StateDeleted},
	StateDeleted:  nil,
}

// ValidState reports whether state is one of States.
func ValidState(state string) bool {
	_, ok := transitions[state]
	return ok
}

// CanTransition reports whether a sandbox in state from may move to state to.
// Staying in the same state is not a transition and is not allowed here;
// Append treats a newState equal to the current one as "unchanged".
func CanTransition(from, to string) bool {
	return slices.Contains(transitions[from], to)
}

// Sandbox is a sandbox record. Plan must not hold secret values (the caller
// guarantees it); it is stored as given.
type Sandbox struct {
	ID      string            `json:"id"`
	State   string            `json:"state"`
	Kind    string            `json:"kind,omitempty"` // "up", "run", "api", … (free-form)
	Project string            `json:"project,omitempty"`
	Owner   string            `json:"owner,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Plan    json.RawMessage   `json:"plan,omitempty"`
	// Sources names the plan's substituted values by key path ("host" or
	// "vault"); the values themselves are never stored.
	Sources     map[string]string `json:"sources,omitempty"`
	ContainerID string            `json:"container_id,omitempty"`
	// Engine is the Docker Engine the sandbox was created on (client.Engine).
	Engine json.RawMessage `json:"engine,omitempty"`
	// Ports are the published ports as the Engine bound them at the last
	// start ([]client.Port).
	Ports     json.RawMessage `json:"ports,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	DeletedAt time.Time       `json:"deleted_at,omitzero"`
	// Reason is the reason of the event that made the last state change.
	Reason string `json:"reason,omitempty"`
	// CLIPid and CLIStart identify the CLI process that owns a `run`
	// sandbox (the start time guards against PID reuse).
	CLIPid   int    `json:"cli_pid,omitempty"`
	CLIStart string `json:"cli_start,omitempty"`
	// EndMarker is the nonce of the marker that ends a run's main output
	// (sandbox.Request.EndMarker); empty when the run waits for its daemons.
	EndMarker string `json:"end_marker,omitempty"`
	// Parked: the sandbox was claimed from a warm pool and its claim (the
	// command) is not delivered yet; a daemon that restarts then cannot
	// deliver it.
	Parked bool `json:"parked,omitempty"`
	// EngineID, when set, is the ID the sandbox's Engine objects are named
	// and labelled by, when it is not ID: a sandbox claimed from a warm pool
	// under the caller's ID keeps the parked sandbox's objects.
	EngineID string `json:"engine_id,omitempty"`
	// LastSeq is the sequence of the sandbox's last event.
	LastSeq uint64 `json:"last_seq"`
	// Lifetime is its deadline and idle timeout, if it has them.
	Lifetime
}

func (sb Sandbox) clone() Sandbox {
	sb.Labels = maps.Clone(sb.Labels)
	sb.Plan = slices.Clone(sb.Plan)
	return sb
}

func getSandbox(tx *bolt.Tx, id string) (Sandbox, error) {
	var sb Sandbox
	found, err := getJSON(tx.Bucket(bucketSandboxes), []byte(id), &sb)
	if err != nil {
		return Sandbox{}, err
	}
	if !found {
		return Sandbox{}, ErrNotFound
	}
	return sb, nil
}

// CreateSandbox reserves rec.ID (a new UUIDv4 when empty), writes the record
// in state pending and appends its first event (kind "sandbox.accepted" when
// first.Kind is empty) with sequence 1, all in one transaction. rec.State must
// be empty or pending; CreatedAt and UpdatedAt default to now and LastSeq is
// set by the store. Errors: ErrInvalidID, ErrIDUsed, ErrInvalidState.
func (s *Store) CreateSandbox(rec Sandbox, first Event) (Sandbox, Event, error) {
	sb, evs, err := s.CreateSandboxEvents(rec, []Event{first})
	if err != nil {
		return Sandbox{}, Event{}, err
	}
	return sb, evs[0], nil
}

// CreateSandboxEvents is CreateSandbox with more events after the first (a
// parked sandbox a create took is created already: its making's events go with
// its record), all in one write. Each takes the record's state, pending; a
// zero time is the write's.
func (s *Store) CreateSandboxEvents(rec Sandbox, evs []Event) (Sandbox, []Event, error) {
	if rec.ID == "" {
		rec.ID = ids.New()
	}
	if rec.State == "" {
		rec.State = StatePending
	}
	if rec.State != StatePending {
		return Sandbox{}, nil, fmt.Errorf("cannot create the sandbox %q in state %q: %w: a new sandbox is pending", rec.ID, rec.State, ErrInvalidState)
	}
	if len(evs) == 0 {
		evs = []Event{{}}
	}
	now := s.now().UTC()
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.DeletedAt = time.Time{}
	rec = rec.clone()
	if evs[0].Kind == "" {
		evs[0].Kind = "sandbox.accepted"
	}
	out := make([]Event, len(evs))
	for i, ev := range evs {
		if ev.Time.IsZero() {
			ev.Time = now
		}
		ev.Time = ev.Time.UTC()
		ev.SandboxID = rec.ID
		ev.Sequence = uint64(i + 1)
		ev.State = rec.State
		out[i] = ev.clone()
	}
	rec.LastSeq = uint64(len(out))
	rec.UpdatedAt = out[len(out)-1].Time

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Sandbox{}, nil, fmt.Errorf("cannot create the sandbox %q: %w", rec.ID, ErrClosed)
	}
	err := s.update(func(tx *bolt.Tx) error {
		if err := reserve(tx, KindSandbox, rec.ID, reservation{ReservedAt: now}); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketSandboxes), []byte(rec.ID), rec); err != nil {
			return err
		}
		b, err := tx.Bucket(bucketEvents).CreateBucket([]byte(rec.ID))
		if err != nil {
			return err
		}
		for _, ev := range out {
			if err := putJSON(b, seqKey(ev.Sequence), ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Sandbox{}, nil, fmt.Errorf("cannot create the sandbox %q: %w", rec.ID, err)
	}
	// Nobody can be subscribed yet: Subscribe needs the record, which was
	// not visible before this commit, and we still hold the publish lock.
	return rec.clone(), out, nil
}

// Get returns the record of sandbox id (ErrNotFound when it has none, also
// after Purge).
func (s *Store) Get(id string) (Sandbox, error) {
	var sb Sandbox
	err := s.view(func(tx *bolt.Tx) (err error) {
		sb, err = getSandbox(tx, id)
		return err
	})
	if err != nil {
		return Sandbox{}, fmt.Errorf("cannot get the sandbox %q: %w", id, err)
	}
	return sb, nil
}

// Filter selects sandboxes in List. A zero Filter lists every sandbox that is
// not deleted.
type Filter struct {
	// Labels: a sandbox matches when it has every one of these labels
	// with the same value.
	Labels map[string]string
	// States: a sandbox matches when its state is one of these (any state
	// when empty).
	States []string
	// IncludeDeleted lists deleted sandboxes too (not yet purged). A
	// States list naming "deleted" includes them as well.
	IncludeDeleted bool
}

func (f Filter) match(sb Sandbox) bool {
	if sb.State == StateDeleted && !f.IncludeDeleted && !slices.Contains(f.States, StateDeleted) {
		return false
	}
	if len(f.States) > 0 && !slices.Contains(f.States, sb.State) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// List returns the sandboxes matching f, oldest first (then by ID).
func (s *Store) List(f Filter) ([]Sandbox, error) {
	var out []Sandbox
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(k, v []byte) error {
			var sb Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return fmt.Errorf("cannot decode the stored record %q: %w", k, err)
			}
			if f.match(sb) {
				out = append(out, sb)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list sandboxes: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// errReadOnlyField is returned by Update when fn changes a field only the
// store may change.
var errReadOnlyField = errors.New("only Append changes a sandbox's id, state, reason, last sequence or creation and deletion times")

// Update changes fields of sandbox id that carry no event (labels, plan,
// container ID, CLI process, …): fn edits a copy of the record, which is
// written back when fn returns nil. fn must not change ID, State, Reason,
// LastSeq, CreatedAt or DeletedAt (state changes go through Append).
func (s *Store) Update(id string, fn func(*Sandbox) error) (Sandbox, error) {
	var out Sandbox
	err := s.update(func(tx *bolt.Tx) error {
		old, err := getSandbox(tx, id)
		if err != nil {
			return err
		}
		sb := old.clone()
		if err := fn(&sb); err != nil {
			return err
		}
		if err := keptFields(old, sb); err != nil {
			return err
		}
		sb.UpdatedAt = s.now().UTC()
		out = sb
		return putJSON(tx.Bucket(bucketSandboxes), []byte(id), sb)
	})
	if err != nil {
		return Sandbox{}, fmt.Errorf("cannot update the sandbox %q: %w", id, err)
	}
	return out, nil
}

// keptFields refuses a change of a record that touches a field the store
// keeps: its ID, state, reason, last sequence, creation and deletion times.
func keptFields(old, sb Sandbox) error {
	if sb.ID != old.ID || sb.State != old.State || sb.Reason != old.Reason || sb.LastSeq != old.LastSeq ||
		!sb.CreatedAt.Equal(old.CreatedAt) || !sb.DeletedAt.Equal(old.DeletedAt) {
		return errReadOnlyField
	}
	return nil
}

// Purge removes the records, events and exec records of sandboxes that became
// deleted before olderThan, and returns how many it removed. The ID
// reservations (sandbox and exec) stay forever. Live subscriptions of a purged
// sandbox end with Err reporting ErrNotFound.
func (s *Store) Purge(olderThan time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("cannot purge deleted sandboxes: %w", ErrClosed)
	}
	var purged []string
	err := s.update(func(tx *bolt.Tx) error {
		sbs := tx.Bucket(bucketSandboxes)
		err := sbs.ForEach(func(k, v []byte) error {
			var sb Sandbox
			if err := json.Unmarshal(v, &sb); err != nil {
				return fmt.Errorf("cannot decode the stored record %q: %w", k, err)
			}
			if sb.State == StateDeleted && sb.DeletedAt.Before(olderThan) {
				purged = append(purged, sb.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range purged {
			if err := sbs.Delete([]byte(id)); err != nil {
				return err
			}
			for _, name := range [][]byte{bucketEvents, bucketExecs} {
				err := tx.Bucket(name).DeleteBucket([]byte(id))
				if err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot purge deleted sandboxes: %w", err)
	}
	for _, id := range purged {
		for sub := range s.subs[id] {
			sub.end(fmt.Errorf("cannot follow the sandbox %q: it was purged: %w", id, ErrNotFound))
		}
		delete(s.subs, id)
	}
	return len(purged), nil
}
