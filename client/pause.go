package client

import (
	"context"
	"net/http"
	"net/url"
)

// StatePaused is a sandbox frozen in place (Pause): its processes stopped
// being scheduled, their memory kept; Unpause makes it ready again.
const StatePaused = "paused"

// OnExpiryPause is an OnIdle policy: a sandbox idle for its idle timeout is
// paused (it stays so until unpaused), not deleted or stopped.
const OnExpiryPause = "pause"

// ReasonNotSupported (501): the sandbox's backend does not have the operation
// (a pause on Kubernetes). Retrying does not help.
const ReasonNotSupported = "not_supported"

// Pause freezes a ready sandbox: its primary (supervisor, daemons, execs)
// and its services' containers stop being scheduled, with their memory kept.
// It returns the record once the sandbox is paused (a paused one as it is).
func (c *Client) Pause(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/pause", nil, &sb)
}

// Unpause thaws a paused sandbox: every process goes on where it was. It
// returns the record once the sandbox is ready again (a ready one as it is).
func (c *Client) Unpause(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/unpause", nil, &sb)
}
