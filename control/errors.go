package control

import (
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/control/store"
)

// The service's errors match, with errors.Is, either one of the store's
// sentinels (store.ErrNotFound, ErrExecNotFound, ErrIDUsed, ErrInvalidID,
// ErrInvalidState, ErrBadCursor) or one of these; a *sandbox.Error with code 2
// is a configuration error too. Anything else is the daemon's own failure. The
// API layer maps them onto the wire (api_errors.go).
var (
	// ErrInvalidRequest: a request the service cannot take as it is (no
	// manifest, an unknown kind, no command).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrConfig: a manifest that does not validate.
	ErrConfig = errors.New("invalid manifest")
)

// kindError is an error of one kind (one of the sentinels) with a message of its own.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf returns an error of kind whose message is the formatted text alone.
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// notIn is the error of an operation that sandbox id's state does not allow.
func notIn(id, state, want string) error {
	if want != "" {
		return errorf(store.ErrInvalidState, "sandbox %s is %s, not %s", id, state, want)
	}
	return errorf(store.ErrInvalidState, "sandbox %s is %s", id, state)
}
