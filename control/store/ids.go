package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ID kinds: two separate namespaces of reserved IDs.
const (
	KindSandbox = "sandbox"
	KindExec    = "exec"
)

// IDPattern is what a caller-given sandbox or exec ID must match (DESIGN §8).
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{2,198}[A-Za-z0-9]$`)

// ValidateID reports ErrInvalidID when id does not match IDPattern.
func ValidateID(id string) error {
	if !IDPattern.MatchString(id) {
		return fmt.Errorf("cannot use the id %q: %w: it must be 4 to 200 letters, digits, '-' or '_', starting and ending with a letter or digit", id, ErrInvalidID)
	}
	return nil
}

// NewID returns a random UUIDv4 (crypto/rand), e.g.
// "1b4e28ba-2fa1-41d2-883f-0016d3cca427".
func NewID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic("cannot read random bytes: " + err.Error()) // crypto/rand never fails on Linux
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

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
	if err := ValidateID(id); err != nil {
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
// KindExec): ErrInvalidID when it does not match IDPattern, ErrIDUsed when it
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
