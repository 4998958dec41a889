// Package secrets stores named secrets in the user's vault (design.md §5): an
// Argon2id + XChaCha20-Poly1305 encrypted file (the default), a plain JSON
// file with mode 0600 (opt-in), or nothing at all (disabled).
//
// Nothing in this package prints, logs or puts a secret value in an error.
package secrets

import (
	"maps"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/manifest"
	"os"
	"slices"
	"sort"
	"sync"
	"time"
)

// Storage is the user config's [vault] storage.
type Storage string

// The storages of design.md §5.
const (
	EncryptedFile Storage = "encrypted-file"
	PlainFile     Storage = "file"
	Disabled      Storage = "disabled"
)

// ParseStorage checks a [vault] storage value; "" means the default, encrypted-file.
func ParseStorage(s string) (Storage, error) {
	switch Storage(s) {
	case "", EncryptedFile:
		return EncryptedFile, nil
	case PlainFile, Disabled:
		return Storage(s), nil
	}
	return "", fmt.Errorf("unknown vault storage %q (want encrypted-file, file or disabled)", s)
}

// ErrDisabled is returned by Open, and by Lookup, when the storage is disabled.
var ErrDisabled = fmt.Errorf(`%w ([vault] storage = "disabled" in the user config)`, manifest.ErrVaultDisabled)

// Options say where the vault is and how to unlock it.
type Options struct {
	// Storage is the backend; "" means EncryptedFile.
	Storage Storage
	// Prefix is the vault's path without extension (paths.Paths.Vault()); the
	// encrypted file is Prefix+".enc", the plain one Prefix+".json".
	Prefix string
	// Passphrase returns the encrypted vault's passphrase. confirm is true when
	// the vault is being created, so a prompt should ask twice. It is called at
	// most once per Vault, and only when an encrypted file must be read or
	// written. Nil means no passphrase is available.
	Passphrase func(confirm bool) (string, error)
	// Now stamps saved secrets; nil means time.Now.
	Now func() time.Time

	kdf KDFParams // tests use cheaper parameters; zero means DefaultKDF
}

// Entry is one secret as `secrets ls` shows it: never its value.
type Entry struct {
	Name    string
	SavedAt time.Time
	Preview string
}

type record struct {
	Value   string    `json:"value"`
	SavedAt time.Time `json:"saved_at"`
}

// document is the plain file's content and the encrypted file's plaintext.
type document struct {
	Version int               `json:"version"`
	Secrets map[string]record `json:"secrets"`
}

// Vault is an opened vault. Its methods are safe for concurrent use; changes
// are written at once, atomically, under a lock file.
type Vault struct {
	opts    Options
	path    string
	mu      sync.Mutex
	secrets map[string]record
	raw     []byte // the file as last read or written; nil when it does not exist
	pass    []byte // the passphrase, once asked for
}

// Path returns the file an opened vault reads and writes.
func (v *Vault) Path() string { return v.path }

// Storage returns the vault's backend.
func (v *Vault) Storage() Storage { return v.opts.Storage }

// FileFor returns the file of a storage given the vault prefix ("" for disabled).
func FileFor(s Storage, prefix string) string {
	switch s {
	case "", EncryptedFile:
		return prefix + ".enc"
	case PlainFile:
		return prefix + ".json"
	}
	return ""
}

// Open reads the vault. A vault whose file does not exist yet is empty and
// needs no passphrase until the first Set.
func Open(opts Options) (*Vault, error) {
	s, err := ParseStorage(string(opts.Storage))
	if err != nil {
		return nil, err
	}
	opts.Storage = s
	if s == Disabled {
		return nil, ErrDisabled
	}
	if opts.Prefix == "" {
		return nil, errors.New("no vault path")
	}
	if opts.kdf == (KDFParams{}) {
		opts.kdf = DefaultKDF
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	v := &Vault{opts: opts, path: FileFor(s, opts.Prefix), secrets: map[string]record{}}
	if err := v.load(); err != nil {
		return nil, err
	}
	return v, nil
}

// load reads the file into v.secrets.
func (v *Vault) load() error {
	data, err := readFile(v.path)
	if err != nil {
		return err
	}
	if data == nil {
		v.raw, v.secrets = nil, map[string]record{}
		return nil
	}
	if v.opts.Storage == PlainFile {
		if st, err := os.Stat(v.path); err == nil && st.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("cannot open the vault %s: it is readable by others (mode %04o); run chmod 600 on it", v.path, st.Mode().Perm())
		}
	}
	plain := data
	if v.opts.Storage == EncryptedFile {
		env, err := parseEnvelope(data)
		if err != nil {
			return fmt.Errorf("cannot open the vault %s: %w", v.path, err)
		}
		if err := v.askPassphrase(false); err != nil {
			return err
		}
		if plain, err = env.open(v.pass); err != nil {
			return fmt.Errorf("cannot open the vault %s: %w", v.path, err)
		}
		defer clear(plain)
	}
	var doc document
	if err := json.Unmarshal(plain, &doc); err != nil {
		return fmt.Errorf("cannot open the vault %s: %w", v.path, &FormatError{jsonProblem(err)})
	}
	if doc.Version != formatV1 {
		return fmt.Errorf("cannot open the vault %s: %w", v.path, &FormatError{fmt.Sprintf("version %d is not supported (this airlock reads version %d)", doc.Version, formatV1)})
	}
	for name := range doc.Secrets {
		if !ValidName(name) {
			return fmt.Errorf("cannot open the vault %s: %w", v.path, &FormatError{fmt.Sprintf("invalid secret name %q", name)})
		}
	}
	if doc.Secrets == nil {
		doc.Secrets = map[string]record{}
	}
	v.secrets, v.raw = doc.Secrets, data
	return nil
}

// ErrNoPassphrase is returned when an encrypted vault must be unlocked and
// Options.Passphrase is nil.
var ErrNoPassphrase = errors.New("the vault is encrypted and no passphrase is available: set AIRLOCK_VAULT_PASSPHRASE, or run airlock in a terminal to be asked for it")

func (v *Vault) askPassphrase(confirm bool) error {
	if v.pass != nil {
		return nil
	}
	if v.opts.Passphrase == nil {
		return ErrNoPassphrase
	}
	p, err := v.opts.Passphrase(confirm)
	if err != nil {
		return err
	}
	if p == "" {
		return errors.New("the vault passphrase is empty")
	}
	v.pass = []byte(p)
	return nil
}

// Get returns the value of name.
func (v *Vault) Get(name string) (string, bool, error) {
	if err := checkName(name); err != nil {
		return "", false, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.secrets[name]
	return r.Value, ok, nil
}

// Lookup implements manifest.Lookup: names that cannot be vault names are
// simply not found.
func (v *Vault) Lookup(name string) (string, bool, error) {
	if !ValidName(name) {
		return "", false, nil
	}
	return v.Get(name)
}

// Set stores value under name, replacing an older value.
func (v *Vault) Set(name, value string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if value == "" {
		return ErrEmptyValue
	}
	_, err := v.change(func(m map[string]record) bool {
		m[name] = record{Value: value, SavedAt: v.opts.Now().UTC().Truncate(time.Second)}
		return true
	})
	return err
}

// Delete removes name; it reports whether name was there.
func (v *Vault) Delete(name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	return v.change(func(m map[string]record) bool {
		if _, ok := m[name]; !ok {
			return false
		}
		delete(m, name)
		return true
	})
}

// List returns the secrets sorted by name, values previewed.
func (v *Vault) List() ([]Entry, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Entry, 0, len(v.secrets))
	for name, r := range v.secrets {
		out = append(out, Entry{Name: name, SavedAt: r.SavedAt, Preview: Preview(r.Value)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Names returns the secret names, sorted.
func (v *Vault) Names() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.secrets))
}

// change applies f to the newest content of the file under the lock and
// writes the result when f reports a change.
func (v *Vault) change(f func(map[string]record) bool) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	unlock, err := lockFile(v.path)
	if err != nil {
		return false, err
	}
	defer unlock()
	// Another process may have written since Open: start from its version.
	cur, err := readFile(v.path)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(cur, v.raw) || (cur == nil) != (v.raw == nil) {
		if err := v.load(); err != nil {
			return false, err
		}
	}
	next := make(map[string]record, len(v.secrets)+1)
	for k, r := range v.secrets {
		next[k] = r
	}
	if !f(next) {
		return false, nil
	}
	plain, err := json.MarshalIndent(document{Version: formatV1, Secrets: next}, "", "  ")
	if err != nil {
		return false, err
	}
	data := append(plain, '\n')
	if v.opts.Storage == EncryptedFile {
		defer clear(plain)
		if err := v.askPassphrase(v.raw == nil); err != nil {
			return false, err
		}
		if data, err = seal(v.pass, plain, v.opts.kdf); err != nil {
			return false, fmt.Errorf("cannot encrypt the vault: %w", err)
		}
	}
	if err := writeAtomic(v.path, data); err != nil {
		return false, err
	}
	removeStaleTemps(v.path)
	v.secrets, v.raw = next, data
	return true, nil
}

// LazyLookup implements manifest.Lookup and opens the vault on its first
// Lookup of a name that could be in it, so a manifest that takes everything
// from the host environment never opens the vault or asks for a passphrase.
type LazyLookup struct {
	open   func() (*Vault, error)
	mu     sync.Mutex
	opened bool
	v      *Vault
	err    error
}

// Lazy returns a LazyLookup that calls open at most once.
func Lazy(open func() (*Vault, error)) *LazyLookup { return &LazyLookup{open: open} }

// Lookup opens the vault when needed and looks name up in it.
func (l *LazyLookup) Lookup(name string) (string, bool, error) {
	if !ValidName(name) {
		return "", false, nil
	}
	l.mu.Lock()
	if !l.opened {
		l.opened = true
		l.v, l.err = l.open()
	}
	v, err := l.v, l.err
	l.mu.Unlock()
	if err != nil {
		return "", false, err
	}
	return v.Lookup(name)
}

// Opened reports whether an open was attempted.
func (l *LazyLookup) Opened() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened
}
