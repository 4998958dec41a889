package control

import (
	"errors"
	"net/http"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/sandbox"
)

// apiError maps an error of the service (errors.go) or of the API layer onto
// the API's error: a stable reason, the message, and the HTTP status.
func apiError(err error) *client.Error {
	var ce *client.Error
	if errors.As(err, &ce) {
		out := *ce
		if out.Status == 0 {
			out.Status = statusOf(out.Reason)
		}
		return &out
	}
	reason := client.ReasonInternal
	switch {
	case errors.Is(err, store.ErrNotFound):
		reason = client.ReasonSandboxNotFound
	case errors.Is(err, store.ErrExecNotFound):
		reason = client.ReasonExecNotFound
	case errors.Is(err, store.ErrIDUsed):
		reason = client.ReasonIDAlreadyUsed
	case errors.Is(err, store.ErrInvalidID):
		reason = client.ReasonInvalidID
	case errors.Is(err, store.ErrInvalidState):
		reason = client.ReasonInvalidState
	case errors.Is(err, store.ErrBadCursor):
		reason = client.ReasonBadCursor
	case errors.Is(err, ErrInvalidRequest):
		reason = client.ReasonInvalidRequest
	case errors.Is(err, ErrConfig):
		reason = client.ReasonConfig
	default:
		var se *sandbox.Error
		if errors.As(err, &se) && se.Code == 2 {
			reason = client.ReasonConfig
		}
	}
	return &client.Error{Status: statusOf(reason), Reason: reason, Message: err.Error()}
}

// statusOf is the HTTP status of an API error reason.
func statusOf(reason string) int {
	switch reason {
	case client.ReasonSandboxNotFound, client.ReasonExecNotFound:
		return http.StatusNotFound
	case client.ReasonIDAlreadyUsed, client.ReasonInvalidState:
		return http.StatusConflict
	case client.ReasonInvalidID, client.ReasonInvalidRequest, client.ReasonBadCursor, client.ReasonConfig:
		return http.StatusBadRequest
	case client.ReasonUnauthorized:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// writeError writes err as the API's error.
func writeError(w http.ResponseWriter, err error) {
	ce := apiError(err)
	writeJSON(w, ce.Status, ce)
}
