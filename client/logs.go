package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// LogOptions choose what DaemonLog reads of a daemon's log: its stderr rather
// than its stdout, only its last Tail lines (Tail >= 0; -1 for all of it), and
// with Follow what is appended until the sandbox stops.
type LogOptions struct {
	Stderr bool
	Tail   int
	Follow bool
}

// DaemonLog returns a daemon's log in a sandbox as the supervisor keeps it
// (every run's output, appended across restarts): GET
// /v1/sandboxes/{id}/logs. Lines longer than 64 KiB may come cut, with a
// marker saying how many bytes were left out. Close ends a follow.
func (c *Client) DaemonLog(ctx context.Context, id, daemon string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{"daemon": {daemon}}
	if o.Stderr {
		q.Set("stderr", "1")
	}
	if o.Tail >= 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
