package store

import (
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/airlock-dev/airlock/internal/ids"
)

// ID kinds: two separate namespaces of reserved IDs.
const (
	KindSandbox = "sandbox"
	KindExec    = "exec"
)

// reservation is the value kept forever under ids.<kind>/<id>.
type reservation struct {
	ReservedAt time.Time `json:"reserved_at"`
	SandboxID  string    `json:"sandbox_id,omitempty"` // for exec IDs
}

func idsBucket(tx *bolt.Tx, kind string) (*bolt.Bucket, error) {
	switch kind {
	case KindSandbox:
		return tx.Bucket(bucketIDsSandbox), nil
	case KindExec:
		return tx.Bucket(bucketIDsExec), nil
	}
	return nil, fmt.Errorf("cannot reserve an id of kind %q: the kinds are %q and %q", kind, KindSandbox, KindExec)
}

// reserve validates and reserves id inside tx.
func reserve(tx *bolt.Tx, kind, id string, r reservation) error {
	if err := ids.Validate(id); err != nil {
		return err
	}
	b, err := idsBucket(tx, kind)
	if err != nil {
		return err
	}
	if b.Get([]byte(id)) != nil {
		return fmt.Errorf("cannot use the %s id %q: %w", kind, id, ErrIDUsed)
	}
	return putJSON(b, []byte(id), r)
}

// Reserve reserves id forever in the namespace kind (KindSandbox or
// KindExec): ErrInvalidID when it does not match ids.Pattern, ErrIDUsed when it
// was ever reserved before. CreateSandbox and CreateExec reserve their IDs
// themselves, in the same transaction as the record; do not Reserve first.
func (s *Store) Reserve(kind, id string) error {
	err := s.update(func(tx *bolt.Tx) error {
		return reserve(tx, kind, id, reservation{ReservedAt: s.now().UTC()})
	})
	if err != nil && !strings.HasPrefix(err.Error(), "cannot ") {
		return fmt.Errorf("cannot reserve the %s id %q: %w", kind, id, err)
	}
	return err
}

// Reserved reports whether id was ever reserved in the namespace kind.
func (s *Store) Reserved(kind, id string) (bool, error) {
	var used bool
	err := s.view(func(tx *bolt.Tx) error {
		b, err := idsBucket(tx, kind)
		if err != nil {
			return err
		}
		used = b.Get([]byte(id)) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cannot look up the %s id %q: %w", kind, id, err)
	}
	return used, nil
}
