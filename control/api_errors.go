package control

import (
	"errors"
	"net/http"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
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
	reason := reasonOf(err)
	return &client.Error{Status: statusOf(reason), Reason: reason, Message: err.Error()}
}

// reasons are the API's reasons for the service's errors, tried in order.
var reasons = []struct {
	err    error
	reason string
}{
	{store.ErrNotFound, client.ReasonSandboxNotFound},
	{store.ErrExecNotFound, client.ReasonExecNotFound},
	{store.ErrIDUsed, client.ReasonIDAlreadyUsed},
	{store.ErrInvalidID, client.ReasonInvalidID},
	{store.ErrInvalidState, client.ReasonInvalidState},
	{store.ErrBadCursor, client.ReasonBadCursor},
	{ErrInvalidRequest, client.ReasonInvalidRequest},
	{ErrConfig, client.ReasonConfig},
	{backend.ErrNoSuchPath, client.ReasonPathNotFound},
	{backend.ErrNotDirectory, client.ReasonNotDirectory},
	{backend.ErrIsDirectory, client.ReasonIsDirectory},
	{ErrNotRegular, client.ReasonNotRegular},
	{ErrTooLarge, client.ReasonTooLarge},
	{backend.ErrNotSupported, client.ReasonNotSupported},
}

// reasonOf is the API's reason for an error of the service: a config error of
// the runtime (exit code 2) is the user's, anything else unknown is internal.
func reasonOf(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	var se *backend.Error
	if errors.As(err, &se) && se.Code == 2 {
		return client.ReasonConfig
	}
	return client.ReasonInternal
}

// statusOf is the HTTP status of an API error reason.
func statusOf(reason string) int {
	switch reason {
	case client.ReasonSandboxNotFound, client.ReasonExecNotFound, client.ReasonPathNotFound, client.ReasonRouteNotFound:
		return http.StatusNotFound
	case client.ReasonNotRegular:
		return http.StatusNotAcceptable
	case client.ReasonTooLarge:
		return http.StatusRequestEntityTooLarge
	case client.ReasonIDAlreadyUsed, client.ReasonInvalidState, client.ReasonNotDirectory, client.ReasonIsDirectory:
		return http.StatusConflict
	case client.ReasonMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case client.ReasonInvalidID, client.ReasonInvalidRequest, client.ReasonBadCursor, client.ReasonConfig:
		return http.StatusBadRequest
	case client.ReasonUnauthorized:
		return http.StatusUnauthorized
	case client.ReasonForbidden:
		return http.StatusForbidden
	case client.ReasonSnapshotNotFound:
		return http.StatusNotFound
	case client.ReasonSnapshotExists, client.ReasonSnapshotInUse:
		return http.StatusConflict
	case client.ReasonNotSupported:
		return http.StatusNotImplemented
	case client.ReasonAlreadyExists, client.ReasonNotEmpty:
		return http.StatusConflict
	case client.ReasonPermissionDenied:
		return http.StatusForbidden
	case client.ReasonTooManyWatches:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// writeError writes err as the API's error.
func writeError(w http.ResponseWriter, err error) {
	ce := apiError(err)
	writeJSON(w, ce.Status, ce)
}
