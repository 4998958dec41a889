// Package ids makes and checks the IDs of sandboxes and execs (design.md §8): a
// random UUIDv4 when the caller gives none, else the caller's own, which must
// match Pattern. Both the runtime (sandbox) and the daemon's store use it.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Pattern is what a caller-chosen sandbox or exec ID must match (Valid checks
// it): 4 to 200 letters, digits, '-' or '_', starting and ending with a letter
// or digit. A compiled regexp of it cost every airlock process 3 ms at start.
const Pattern = `^[A-Za-z0-9][A-Za-z0-9_-]{2,198}[A-Za-z0-9]$`

// Valid reports whether id matches Pattern.
func Valid(id string) bool {
	if len(id) < 4 || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '-' || c == '_') && i > 0 && i < len(id)-1:
		default:
			return false
		}
	}
	return true
}

// ErrInvalid is the error Validate wraps.
var ErrInvalid = errors.New("the id is not valid")

// Validate returns an error wrapping ErrInvalid, naming id and the rule, when
// id does not match Pattern.
func Validate(id string) error {
	if !Valid(id) {
		return fmt.Errorf("cannot use the id %q: %w: it must be 4 to 200 letters, digits, '-' or '_', starting and ending with a letter or digit", id, ErrInvalid)
	}
	return nil
}

// New returns a random UUIDv4 (crypto/rand), e.g.
// "1b4e28ba-2fa1-41d2-883f-0016d3cca427".
func New() string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead
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
