package control

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/paths"
)

// The owner key identifies one user's control daemon on an Engine that several
// share (CI jobs on one Docker socket, other users): every Docker object a daemon
// makes carries it (sandbox.LabelOwner), and reaping, recovery and removal touch
// only objects that carry it. It is random, made once and kept in the daemon dir;
// the uid alone would not tell two daemons of the same user (two state roots, two
// containers sharing a socket) apart.

// ownerKeyFile is where the key is kept.
func ownerKeyFile(p *paths.Paths) string { return filepath.Join(p.DaemonDir(), "owner-key") }

// OwnerKey returns this user's daemon instance key, making it on first use
// (mode 0600, in a 0700 daemon dir).
func OwnerKey(p *paths.Paths) (string, error) {
	f := ownerKeyFile(p)
	if b, err := os.ReadFile(f); err == nil {
		if k := strings.TrimSpace(string(b)); len(k) == 32 {
			return k, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("cannot read the daemon's owner key %s: %w", f, err)
	}
	if err := os.MkdirAll(p.DaemonDir(), 0o700); err != nil {
		return "", fmt.Errorf("cannot create %s: %w", p.DaemonDir(), err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	key := hex.EncodeToString(b[:])
	// Not paths.WriteFileAtomic: its rename would replace a key another
	// process made meanwhile; a link never replaces one (see below).
	tmp, err := os.CreateTemp(p.DaemonDir(), ".owner-key-*")
	if err != nil {
		return "", fmt.Errorf("cannot write the daemon's owner key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(key + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("cannot write the daemon's owner key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("cannot write the daemon's owner key: %w", err)
	}
	// Two processes making the key at once: the first link wins, both read it.
	if err := os.Link(tmp.Name(), f); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("cannot write the daemon's owner key: %w", err)
	}
	b2, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("cannot read the daemon's owner key %s: %w", f, err)
	}
	return strings.TrimSpace(string(b2)), nil
}
