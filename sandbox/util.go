package sandbox

import (
	"crypto/rand"
	"fmt"
	"regexp"
)

// IDPattern is what a caller-chosen sandbox ID must match (DESIGN §8).
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{2,198}[A-Za-z0-9]$`)

// NewID returns a random UUIDv4.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// objectName is the Docker name of a sandbox's primary container and network.
func objectName(id string) string { return "airlock-" + id }
