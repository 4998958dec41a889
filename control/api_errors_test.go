package control

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// TestAPIErrorMapping: the service's errors reach the wire with their stable
// reason, HTTP status and own message; anything else is an internal error.
func TestAPIErrorMapping(t *testing.T) {
	for _, tt := range []struct {
		err    error
		reason string
		status int
	}{
		{fmt.Errorf("cannot get sandbox x: %w", store.ErrNotFound), client.ReasonSandboxNotFound, http.StatusNotFound},
		{store.ErrExecNotFound, client.ReasonExecNotFound, http.StatusNotFound},
		{store.ErrIDUsed, client.ReasonIDAlreadyUsed, http.StatusConflict},
		{store.ErrInvalidID, client.ReasonInvalidID, http.StatusBadRequest},
		{notIn("x", "stopped", "ready"), client.ReasonInvalidState, http.StatusConflict},
		{store.ErrBadCursor, client.ReasonBadCursor, http.StatusBadRequest},
		{errorf(ErrInvalidRequest, "cmd is required"), client.ReasonInvalidRequest, http.StatusBadRequest},
		{errorf(ErrConfig, "bad manifest"), client.ReasonConfig, http.StatusBadRequest},
		{&backend.Error{Code: 2, Err: errors.New("bad image")}, client.ReasonConfig, http.StatusBadRequest},
		{&backend.Error{Code: 125, Err: errors.New("engine down")}, client.ReasonInternal, http.StatusInternalServerError},
		{errors.New("boom"), client.ReasonInternal, http.StatusInternalServerError},
		{&client.Error{Reason: client.ReasonUnauthorized, Message: "no"}, client.ReasonUnauthorized, http.StatusUnauthorized},
		{&client.Error{Reason: client.ReasonForbidden, Message: "no"}, client.ReasonForbidden, http.StatusForbidden},
	} {
		ce := apiError(tt.err)
		if ce.Reason != tt.reason || ce.Status != tt.status || ce.Message != tt.err.Error() && ce.Message != "no" {
			t.Errorf("apiError(%v) = %+v, want reason %s, status %d and the error's message", tt.err, ce, tt.reason, tt.status)
		}
	}
	if got := notIn("x", "stopped", "ready").Error(); got != "sandbox x is stopped, not ready" {
		t.Errorf("message %q", got)
	}
}
