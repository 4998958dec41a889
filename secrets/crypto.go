package secrets

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/chacha20poly1305"
)

// KDFParams are the Argon2id parameters of an encrypted vault. They are stored
// in the file, so a vault written with other parameters still opens.
type KDFParams struct {
	Time    uint32 `json:"time"`    // passes over the memory
	Memory  uint32 `json:"memory"`  // KiB
	Threads uint8  `json:"threads"` // lanes
}

// DefaultKDF is what new writes use: 64 MiB of memory, 2 passes, 4 lanes —
// RFC 9106's memory-constrained option with one pass fewer, well above
// OWASP's minimum (19 MiB, 2 passes) — so that opening the vault takes about
// 0.1–0.2 s on a 2-core machine.
var DefaultKDF = KDFParams{Time: 2, Memory: 64 * 1024, Threads: 4}

// Limits on the parameters a file may ask for, so a damaged or hostile file
// cannot make an open take minutes or gigabytes.
const (
	maxKDFTime   = 64
	maxKDFMemory = 4 * 1024 * 1024 // 4 GiB in KiB
	saltSize     = 16
	keySize      = chacha20poly1305.KeySize
	formatV1     = 1
	kdfArgon2id  = "argon2id"
	aeadName     = "xchacha20-poly1305"
)

// envelope is the on-disk form of an encrypted vault (vault.enc).
type envelope struct {
	Version    int       `json:"version"`
	KDF        string    `json:"kdf"`
	Params     KDFParams `json:"params"`
	Cipher     string    `json:"cipher"`
	Salt       []byte    `json:"salt"`  // base64 in JSON
	Nonce      []byte    `json:"nonce"` // base64 in JSON
	Ciphertext []byte    `json:"ciphertext"`
}

// ErrWrongPassphrase is returned when an encrypted vault does not decrypt:
// the passphrase is wrong or the file was changed (AEAD cannot tell which).
var ErrWrongPassphrase = errors.New("wrong passphrase or damaged file")

// FormatError is a vault file that is not one this airlock can read.
type FormatError struct{ Msg string }

func (e *FormatError) Error() string { return "unreadable vault file: " + e.Msg }

// aad binds the header to the ciphertext: a changed parameter or salt fails
// authentication even where it would derive the same key.
func (e *envelope) aad() []byte {
	return fmt.Appendf(nil, "airlock-vault v%d %s t=%d m=%d p=%d %s salt=%x",
		e.Version, e.KDF, e.Params.Time, e.Params.Memory, e.Params.Threads, e.Cipher, e.Salt)
}

func deriveKey(pass []byte, salt []byte, p KDFParams) []byte {
	return argon2.IDKey(pass, salt, p.Time, p.Memory, p.Threads, keySize)
}

// seal encrypts plaintext under pass with a fresh salt and nonce.
func seal(pass, plaintext []byte, p KDFParams) ([]byte, error) {
	e := envelope{Version: formatV1, KDF: kdfArgon2id, Params: p, Cipher: aeadName,
		Salt: make([]byte, saltSize), Nonce: make([]byte, chacha20poly1305.NonceSizeX)}
	if _, err := rand.Read(e.Salt); err != nil {
		return nil, err
	}
	if _, err := rand.Read(e.Nonce); err != nil {
		return nil, err
	}
	key := deriveKey(pass, e.Salt, p)
	defer clear(key)
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	e.Ciphertext = aead.Seal(nil, e.Nonce, plaintext, e.aad())
	out, err := json.MarshalIndent(&e, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// parseEnvelope checks the header of an encrypted vault without the passphrase.
func parseEnvelope(data []byte) (*envelope, error) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, &FormatError{"not a vault envelope (" + jsonProblem(err) + ")"}
	}
	switch {
	case e.Version == 0:
		return nil, &FormatError{"no version field"}
	case e.Version != formatV1:
		return nil, &FormatError{fmt.Sprintf("version %d is not supported (this airlock reads version %d; a newer airlock may have written it)", e.Version, formatV1)}
	case e.KDF != kdfArgon2id:
		return nil, &FormatError{fmt.Sprintf("unknown kdf %q (want %q)", e.KDF, kdfArgon2id)}
	case e.Cipher != aeadName:
		return nil, &FormatError{fmt.Sprintf("unknown cipher %q (want %q)", e.Cipher, aeadName)}
	case e.Params.Time < 1 || e.Params.Time > maxKDFTime || e.Params.Memory < 8*uint32(max(e.Params.Threads, 1)) ||
		e.Params.Memory > maxKDFMemory || e.Params.Threads < 1:
		return nil, &FormatError{fmt.Sprintf("kdf parameters out of range (time=%d memory=%d threads=%d)", e.Params.Time, e.Params.Memory, e.Params.Threads)}
	case len(e.Salt) != saltSize:
		return nil, &FormatError{fmt.Sprintf("salt is %d bytes, want %d", len(e.Salt), saltSize)}
	case len(e.Nonce) != chacha20poly1305.NonceSizeX:
		return nil, &FormatError{fmt.Sprintf("nonce is %d bytes, want %d", len(e.Nonce), chacha20poly1305.NonceSizeX)}
	case len(e.Ciphertext) < chacha20poly1305.Overhead:
		return nil, &FormatError{"ciphertext too short"}
	}
	return &e, nil
}

// open decrypts an envelope with pass.
func (e *envelope) open(pass []byte) ([]byte, error) {
	key := deriveKey(pass, e.Salt, e.Params)
	defer clear(key)
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, e.Nonce, e.Ciphertext, e.aad())
	if err != nil {
		return nil, ErrWrongPassphrase
	}
	return pt, nil
}

// jsonProblem describes a JSON error without quoting the input, which could
// hold a secret (the plain file backend).
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	return "invalid JSON"
}
