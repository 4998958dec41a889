// Package store persists the control daemon's sandbox IDs, sandbox and exec
// records and the ordered per-sandbox event history in a bbolt file
// (design.md §2 `ids.db`, §8).
//
// Layout of the bbolt file (all keys and values are bytes):
//
//	meta                      "schema" -> "1"
//	ids.sandbox               <sandbox id> -> JSON reservation   (never deleted)
//	ids.exec                  <exec id>    -> JSON reservation   (never deleted)
//	sandboxes                 <sandbox id> -> JSON Sandbox
//	events/<sandbox id>       8-byte big-endian sequence -> JSON Event
//	execs/<sandbox id>        <exec id> -> JSON Exec
//
// Guarantees:
//
//   - An ID, once reserved, is refused forever (ErrIDUsed), also after its
//     sandbox is deleted and purged and after the file is reopened. Sandbox and
//     exec IDs are two separate namespaces; exec IDs are unique across all
//     sandboxes, not only within one.
//   - A sandbox's state changes only through Append (or CreateSandbox), which
//     writes the event announcing the state and the new state in one bbolt
//     transaction: a reader that sees the state also sees its event.
//   - Event sequences of a sandbox are contiguous from 1 and continue after
//     reopening (the record keeps LastSeq).
//   - Subscribe returns the backlog after a cursor and then follows live
//     without gap or duplicate: Append holds the store's publish lock from
//     before its write transaction until the event is handed to subscribers,
//     and Subscribe reads the tail of its backlog and registers under the same
//     lock.
//
// bbolt already serialises write transactions, so the publish lock costs no
// write parallelism; read-only calls (Get, List, Events, …) never take it.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlock-dev/airlock/internal/ids"
)

// Sentinel errors. The API layer maps them to its reasons with errors.Is.
var (
	// ErrIDUsed: the ID was reserved before (reason id_already_used).
	ErrIDUsed = errors.New("the id is already used")
	// ErrInvalidID: the ID does not match ids.Pattern (reason invalid_id).
	ErrInvalidID = ids.ErrInvalid
	// ErrNotFound: no such sandbox or exec record (reason sandbox_not_found).
	ErrNotFound = errors.New("no such sandbox")
	// ErrExecNotFound: the sandbox has no such exec record.
	ErrExecNotFound = errors.New("no such exec")
	// ErrInvalidState: the state change is not allowed, or the sandbox's
	// state does not allow the operation (reason invalid_state).
	ErrInvalidState = errors.New("the sandbox's state does not allow this")
	// ErrBadCursor: a subscription cursor beyond the last sequence (reason
	// bad_cursor).
	ErrBadCursor = errors.New("the cursor is beyond the last event")
	// ErrLocked: another process (or another Store in this process) holds
	// the file.
	ErrLocked = errors.New("the store is in use by another process (is another airlock daemon running?)")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("the store is closed")
	// ErrSubscriberTooSlow: a live subscriber fell more than its buffer
	// behind and was dropped; resubscribe from the last sequence received.
	ErrSubscriberTooSlow = errors.New("the subscriber fell too far behind")
)

const schemaVersion = "1"

var (
	bucketMeta       = []byte("meta")
	bucketIDsSandbox = []byte("ids.sandbox")
	bucketIDsExec    = []byte("ids.exec")
	bucketSandboxes  = []byte("sandboxes")
	bucketEvents     = []byte("events")
	bucketExecs      = []byte("execs")
	keySchema        = []byte("schema")
)

// DefaultOpenTimeout is how long Open waits for the file lock.
const DefaultOpenTimeout = time.Second

// DefaultSubscriberBuffer is the live channel capacity of a subscription.
const DefaultSubscriberBuffer = 1024

// Options tune OpenOptions. Zero values mean the defaults.
type Options struct {
	// Timeout to obtain the file lock (DefaultOpenTimeout).
	Timeout time.Duration
	// SubscriberBuffer is the capacity of each live channel
	// (DefaultSubscriberBuffer).
	SubscriberBuffer int
	// Now is the clock for record and event times (time.Now).
	Now func() time.Time
}

// Store is an open ids.db. It is safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
	now  func() time.Time
	buf  int

	// mu is the publish lock: Append, CreateSandbox and Purge hold it
	// across their write transaction and the hand-off to subscribers;
	// Subscribe holds it to read the tail of its backlog and register.
	mu     sync.Mutex
	subs   map[string]map[*Subscription]struct{}
	closed bool
}

// Open opens (creating it when missing) the store at path with the default
// options: the parent folder is made with mode 0700, the file has mode 0600,
// and a file held by another opener fails after about a second with ErrLocked.
func Open(path string) (*Store, error) {
	return OpenOptions(path, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(path string, o Options) (*Store, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultOpenTimeout
	}
	if o.SubscriberBuffer <= 0 {
		o.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the id store's folder: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.Timeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("cannot open the id store %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("cannot open the id store %s: %w", path, err)
	}
	// A file made by someone else may be looser; it holds sandbox plans.
	if err := os.Chmod(path, 0o600); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot restrict the id store's mode: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketIDsSandbox, bucketIDsExec, bucketSandboxes, bucketEvents, bucketExecs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(keySchema); {
		case v == nil:
			return meta.Put(keySchema, []byte(schemaVersion))
		case string(v) != schemaVersion:
			return fmt.Errorf("it has schema %q and this airlock reads schema %q", v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot open the id store %s: %w", path, err)
	}
	return &Store{
		db:   db,
		path: path,
		now:  o.Now,
		buf:  o.SubscriberBuffer,
		subs: map[string]map[*Subscription]struct{}{},
	}, nil
}

// Path is the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close ends every live subscription (Err reports ErrClosed) and closes the
// file. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for id, set := range s.subs {
		for sub := range set {
			sub.end(ErrClosed)
		}
		delete(s.subs, id)
	}
	s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("cannot close the id store: %w", err)
	}
	return nil
}

// view and update run a bbolt transaction, mapping a closed database to
// ErrClosed.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

func (s *Store) update(fn func(*bolt.Tx) error) error {
	err := s.db.Update(fn)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("cannot decode the stored record %q: %w", key, err)
	}
	return true, nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}
