package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// ExecControl bounds an exec and says whether it outlives its caller (part of
// ExecRequest). Durations are seconds (a JSON number; fractions are rounded
// to the millisecond).
type ExecControl struct {
	// Timeout, when not 0, ends the command this many seconds after it
	// started: SIGTERM to its process group, SIGKILL after KillGrace; its exit
	// code is then 124 and exec.timed_out is in the events.
	Timeout float64 `json:"timeout,omitempty"`
	// KillGrace is the time between SIGTERM and SIGKILL when the daemon ends
	// the command (its timeout, its client gone); 0 for 5 s.
	KillGrace float64 `json:"kill_grace,omitempty"`
	// Background answers at once with the record, whatever the Accept
	// header: the output goes to the exec output files (ExecOutput reads
	// them) and the command runs to its end with no client. Without it, a
	// streamed or attached exec whose client goes away is killed.
	Background bool `json:"background,omitempty"`
}

// SignalRequest is the body of POST /v1/sandboxes/{id}/execs/{exec}/signal:
// a signal's name ("SIGTERM", "TERM", "int") or number ("15").
type SignalRequest struct {
	Signal string `json:"signal"`
}

// The streams of an exec's output (ExecOutput).
const (
	OutputStdout = "stdout"
	OutputStderr = "stderr"
)

// ListExecs returns the exec records of a sandbox, oldest first: with
// running, only those that have not ended; with limit > 0, the last limit.
func (c *Client) ListExecs(ctx context.Context, id string, running bool, limit int) ([]Exec, error) {
	q := url.Values{}
	if running {
		q.Set("running", "1")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/sandboxes/" + url.PathEscape(id) + "/execs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Exec
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// SignalExec sends a signal (a name or number) to the process group of a
// running exec, and returns its record.
func (c *Client) SignalExec(ctx context.Context, id, execID, signal string) (*Exec, error) {
	var ex Exec
	return &ex, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/execs/"+url.PathEscape(execID)+"/signal", &SignalRequest{Signal: signal}, &ex)
}

// ExecOutput reads an output file of an exec run in the background
// (stream OutputStdout or OutputStderr) from byte from; with follow the
// stream goes on with what the command writes until it ends. The caller
// closes it.
func (c *Client) ExecOutput(ctx context.Context, id, execID, stream string, from int64, follow bool) (io.ReadCloser, error) {
	q := url.Values{"stream": {stream}}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/execs/"+url.PathEscape(execID)+"/output?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
