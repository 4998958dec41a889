package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Event is one entry of a sandbox's ordered history. Its JSON form is what
// `airlock events --json` prints (design.md §9). The store sets SandboxID,
// Sequence and State; Time defaults to now.
type Event struct {
	SandboxID string    `json:"sandbox_id"`
	Sequence  uint64    `json:"sequence"`
	Kind      string    `json:"kind"`
	Time      time.Time `json:"time"`
	// State is the sandbox's state after the event.
	State   string `json:"state"`
	Daemon  string `json:"daemon,omitempty"`
	Service string `json:"service,omitempty"`
	ExecID  string `json:"exec_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Signal  string `json:"signal,omitempty"`
	// ExitCode is a pointer so that exit code 0 is printed.
	ExitCode *int `json:"exit_code,omitempty"`
	Attempt  int  `json:"attempt,omitempty"`
	// DelayMS is a pointer, as in the supervisor's status stream, so that
	// a zero delay is printed.
	DelayMS *int64 `json:"delay_ms,omitempty"`
	PID     int    `json:"pid,omitempty"`
	// StatusOffset, on an event ingested from the supervisor's status stream, is
	// the stream offset past its line (kept with the event, not shown by the API).
	StatusOffset int64             `json:"status_offset,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
}

func (e Event) clone() Event {
	if e.ExitCode != nil {
		c := *e.ExitCode
		e.ExitCode = &c
	}
	if e.DelayMS != nil {
		d := *e.DelayMS
		e.DelayMS = &d
	}
	e.Extra = maps.Clone(e.Extra)
	return e
}

// Append appends ev to the history of sandbox id and, when newState is not
// empty and differs from the current state, moves the sandbox to newState, in
// one transaction: the event is persisted before (in fact together with) the
// state it announces, and no reader sees the state without the event. It
// returns the stored event with SandboxID, Sequence (last + 1) and State (the
// state after the event) set; Time defaults to now. Live subscribers receive
// the event after the commit, in sequence order.
//
// Errors: ErrNotFound; ErrInvalidState when newState is not reachable from the
// current state (see CanTransition) or the sandbox is deleted (a deleted
// sandbox's history is closed).
func (s *Store) Append(id string, ev Event, newState string) (Event, error) {
	return s.AppendWith(id, ev, newState, nil)
}

// AppendWith is Append that also changes the sandbox's record with change
// (when not nil) in the same transaction: one write where two would be (the
// start of a parked sandbox no longer parked, say). A change that fails
// writes nothing.
func (s *Store) AppendWith(id string, ev Event, newState string, change func(*Sandbox) error) (Event, error) {
	ev, err := s.prepareEvent(id, ev, newState)
	if err != nil {
		return Event{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Event{}, fmt.Errorf("cannot append to the history of the sandbox %q: %w", id, ErrClosed)
	}
	err = s.update(func(tx *bolt.Tx) error {
		if change != nil {
			old, err := getSandbox(tx, id)
			if err != nil {
				return err
			}
			sb := old.clone()
			if err := change(&sb); err != nil {
				return err
			}
			if err := keptFields(old, sb); err != nil {
				return err
			}
			if err := putJSON(tx.Bucket(bucketSandboxes), []byte(id), sb); err != nil {
				return err
			}
		}
		return appendTx(tx, id, &ev, newState)
	})
	if err != nil {
		return Event{}, fmt.Errorf("cannot append %s to the history of the sandbox %q: %w", ev.Kind, id, err)
	}
	s.publishLocked(ev)
	return ev.clone(), nil
}

// prepareEvent checks an event and its new state before a transaction
// appends it, and sets its time (now when zero) and sandbox.
func (s *Store) prepareEvent(id string, ev Event, newState string) (Event, error) {
	if ev.Kind == "" {
		return Event{}, fmt.Errorf("cannot append to the history of the sandbox %q: the event has no kind", id)
	}
	if newState != "" && !ValidState(newState) {
		return Event{}, fmt.Errorf("cannot move the sandbox %q to the unknown state %q: %w", id, newState, ErrInvalidState)
	}
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	ev.Time = ev.Time.UTC()
	ev.SandboxID = id
	return ev.clone(), nil
}

// appendTx appends ev (prepared by prepareEvent) to the history of id within
// tx, moving the sandbox to newState when not empty, and sets its Sequence
// and State. The caller publishes it once tx committed.
func appendTx(tx *bolt.Tx, id string, ev *Event, newState string) error {
	sb, err := getSandbox(tx, id)
	if err != nil {
		return err
	}
	if sb.State == StateDeleted {
		return fmt.Errorf("%w: it is deleted", ErrInvalidState)
	}
	if newState != "" && newState != sb.State {
		if !CanTransition(sb.State, newState) {
			return fmt.Errorf("%w: it cannot go from %s to %s", ErrInvalidState, sb.State, newState)
		}
		sb.State = newState
		sb.Reason = ev.Reason
		if newState == StateDeleted {
			sb.DeletedAt = ev.Time
		}
	}
	ev.Sequence = sb.LastSeq + 1
	ev.State = sb.State
	evs, err := tx.Bucket(bucketEvents).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	if err := putJSON(evs, seqKey(ev.Sequence), *ev); err != nil {
		return err
	}
	sb.LastSeq = ev.Sequence
	sb.UpdatedAt = ev.Time
	return putJSON(tx.Bucket(bucketSandboxes), []byte(id), sb)
}

// readEvents returns the events of id with sequence > from, checking the
// cursor against the record's last sequence.
func readEvents(tx *bolt.Tx, id string, from uint64) ([]Event, uint64, error) {
	sb, err := getSandbox(tx, id)
	if err != nil {
		return nil, 0, err
	}
	if from > sb.LastSeq {
		return nil, 0, fmt.Errorf("%w: %d is after the last sequence %d", ErrBadCursor, from, sb.LastSeq)
	}
	out := make([]Event, 0, sb.LastSeq-from)
	evs := tx.Bucket(bucketEvents).Bucket([]byte(id))
	if evs == nil {
		return out, sb.LastSeq, nil
	}
	c := evs.Cursor()
	for k, v := c.Seek(seqKey(from + 1)); k != nil; k, v = c.Next() {
		var ev Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return nil, 0, fmt.Errorf("cannot decode the stored event %d: %w", binary.BigEndian.Uint64(k), err)
		}
		out = append(out, ev)
	}
	return out, sb.LastSeq, nil
}

// Events returns every event of sandbox id with sequence > from, in order.
// from 0 is the whole history; from equal to the last sequence returns none;
// from beyond it is ErrBadCursor.
func (s *Store) Events(id string, from uint64) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *bolt.Tx) (err error) {
		out, _, err = readEvents(tx, id, from)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the history of the sandbox %q: %w", id, err)
	}
	return out, nil
}

// Subscription follows a sandbox's events live after its backlog.
//
// C receives, in sequence order, every event appended after the last one of
// Backlog (or after the cursor when Backlog is empty), with no gap and no
// duplicate. Append never blocks on a subscriber: C is buffered
// (Options.SubscriberBuffer), and a subscriber whose buffer is full when an
// event is published is dropped: C is closed after the events already
// buffered and Err reports ErrSubscriberTooSlow. Resubscribe from the last
// sequence received to continue without loss. C is also closed by Cancel
// (Err reports nil), by Store.Close (ErrClosed) and by Purge of the sandbox
// (ErrNotFound).
type Subscription struct {
	Backlog []Event
	C       <-chan Event

	ch    chan Event
	store *Store
	id    string

	errMu sync.Mutex
	err   error
}

// Err tells why C was closed: nil while it is open or after Cancel.
func (sub *Subscription) Err() error {
	sub.errMu.Lock()
	defer sub.errMu.Unlock()
	return sub.err
}

// Cancel ends the subscription and closes C. It is safe to call more than
// once and after the subscription ended on its own.
func (sub *Subscription) Cancel() {
	s := sub.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if set, ok := s.subs[sub.id]; ok {
		if _, ok := set[sub]; ok {
			delete(set, sub)
			if len(set) == 0 {
				delete(s.subs, sub.id)
			}
			close(sub.ch)
		}
	}
}

// end records err and closes C; the caller holds the publish lock and
// removes sub from the registry.
func (sub *Subscription) end(err error) {
	sub.errMu.Lock()
	sub.err = err
	sub.errMu.Unlock()
	close(sub.ch)
}

// Watch returns every event of sandbox id with sequence > from as the
// Subscription's Backlog and then follows live on C. Errors: ErrNotFound,
// ErrBadCursor (from beyond the last sequence).
func (s *Store) Watch(id string, from uint64) (*Subscription, error) {
	// The bulk of the backlog is read without the publish lock, so a long
	// history does not stall Append; the tail and the registration then
	// happen under it, so nothing published can fall in between.
	var backlog []Event
	err := s.view(func(tx *bolt.Tx) (err error) {
		backlog, _, err = readEvents(tx, id, from)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot follow the sandbox %q: %w", id, err)
	}
	cursor := from
	if n := len(backlog); n > 0 {
		cursor = backlog[n-1].Sequence
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("cannot follow the sandbox %q: %w", id, ErrClosed)
	}
	err = s.view(func(tx *bolt.Tx) error {
		tail, _, err := readEvents(tx, id, cursor)
		backlog = append(backlog, tail...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot follow the sandbox %q: %w", id, err)
	}
	ch := make(chan Event, s.buf)
	sub := &Subscription{Backlog: backlog, C: ch, ch: ch, store: s, id: id}
	if s.subs[id] == nil {
		s.subs[id] = map[*Subscription]struct{}{}
	}
	s.subs[id][sub] = struct{}{}
	return sub, nil
}

// Subscribe is Watch in plain values: the backlog, the live channel and the
// function that cancels it. A live channel that closes before cancel is
// called means the subscription was dropped (it fell more than the buffer
// behind, the sandbox was purged or the store closed): resubscribe from the
// last sequence received. Use Watch to learn which through Err.
func (s *Store) Subscribe(id string, from uint64) (backlog []Event, live <-chan Event, cancel func(), err error) {
	sub, err := s.Watch(id, from)
	if err != nil {
		return nil, nil, nil, err
	}
	return sub.Backlog, sub.C, sub.Cancel, nil
}

// publishLocked hands ev to the live subscribers of its sandbox without
// blocking; the caller holds the publish lock.
func (s *Store) publishLocked(ev Event) {
	set := s.subs[ev.SandboxID]
	for sub := range set {
		select {
		case sub.ch <- ev.clone():
		default:
			delete(set, sub)
			sub.end(fmt.Errorf("cannot follow the sandbox %q after sequence %d: %w", ev.SandboxID, ev.Sequence-1, ErrSubscriberTooSlow))
		}
	}
	if set != nil && len(set) == 0 {
		delete(s.subs, ev.SandboxID)
	}
}
