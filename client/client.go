package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Client talks to one daemon.
type Client struct {
	base  string
	token string
	http  *http.Client
	// socket is the daemon's Unix socket (New), "" over TCP.
	socket string
	// mux is the one multiplexed connection of NewSSHMux (nil for others).
	mux *muxDialer
}

// New returns a client of the daemon listening on the Unix socket at path.
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 4,
	}
	return &Client{base: "http://airlockd", http: &http.Client{Transport: tr}, socket: socket}
}

// NewTCP returns a client of a daemon's TCP listener (addr "host:port"); token
// is sent as a bearer token when not empty.
func NewTCP(addr, token string) *Client {
	return &Client{base: "http://" + addr, token: token, http: &http.Client{}}
}

// NewTLS returns a client of a daemon's TCP listener serving TLS (`airlock
// daemon run --tls-cert … --tls-key …`); config verifies the daemon's
// certificate (nil: the system's roots). token is sent as with NewTCP.
func NewTLS(addr, token string, config *tls.Config) *Client {
	if config == nil {
		config = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// HTTP/1.1 only: an attached exec is an Upgrade, which HTTP/2 lacks.
	tr := &http.Transport{TLSClientConfig: config, MaxIdleConns: 4, ForceAttemptHTTP2: false}
	return &Client{base: "https://" + addr, token: token, http: &http.Client{Transport: tr}}
}

// TLSConfigCA returns a TLS configuration that trusts the certificates of a
// PEM file (what AIRLOCK_TLS_CA names), and only them.
func TLSConfigCA(file string) (*tls.Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read the CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cannot use %s: no PEM certificate in it", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("cannot decode the daemon's answer to %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	h := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("cannot encode the request: %w", err)
		}
		body = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	return c.sendRaw(ctx, method, path, body, h)
}

// sendRaw sends a request with body and the headers h (and the token), and
// returns the response, or the API error of an error status.
func (c *Client) sendRaw(ctx context.Context, method, path string, body io.Reader, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("cannot make the request: %w", err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the airlock daemon: %w", err)
	}
	if resp.StatusCode >= 400 {
		return nil, responseError(resp)
	}
	return resp, nil
}

// responseError reads the API error of a response with an error status and
// closes its body.
func responseError(resp *http.Response) error {
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, e) != nil || e.Reason == "" {
		e.Reason, e.Message = ReasonInternal, strings.TrimSpace(string(b))
	}
	return e
}

// Health asks the daemon who it is.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.do(ctx, http.MethodGet, "/v1/health", nil, &h)
}

// Create asks for a new sandbox; it returns once the request is accepted (state
// pending). Progress is in the event stream.
func (c *Client) Create(ctx context.Context, req *CreateRequest) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodPost, "/v1/sandboxes", req, &sb)
}

// Get returns a sandbox record.
func (c *Client) Get(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id), nil, &sb)
}

// List returns the sandboxes carrying every label; deleted ones are left out.
func (c *Client) List(ctx context.Context, labels map[string]string) ([]Sandbox, error) {
	q := url.Values{}
	for k, v := range labels {
		q.Add("label", k+"="+v)
	}
	var list []Sandbox
	return list, c.do(ctx, http.MethodGet, "/v1/sandboxes?"+q.Encode(), nil, &list)
}

// Stop stops a sandbox; it returns once accepted.
func (c *Client) Stop(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/stop", nil, &sb)
}

// Resume starts a created or stopped sandbox; it returns once accepted.
func (c *Client) Resume(ctx context.Context, id string, req *ResumeRequest) (*Sandbox, error) {
	var sb Sandbox
	if req == nil {
		req = &ResumeRequest{}
	}
	return &sb, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/resume", req, &sb)
}

// Compare asks whether sandbox id is what req's manifest would make now on
// req's Engine (images pulled or built when missing).
func (c *Client) Compare(ctx context.Context, id string, req *CompareRequest) (*Comparison, error) {
	var cmp Comparison
	return &cmp, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/compare", req, &cmp)
}

// Delete removes a sandbox (stopping it first); it returns once accepted.
func (c *Client) Delete(ctx context.Context, id string) (*Sandbox, error) {
	var sb Sandbox
	return &sb, c.do(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(id), nil, &sb)
}

// Exec starts a command in a ready sandbox; its output goes to the exec output
// files, so it survives a daemon restart. Wait for it with WaitExec.
func (c *Client) Exec(ctx context.Context, id string, req *ExecRequest) (*Exec, error) {
	var ex Exec
	return &ex, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/execs", req, &ex)
}

// FinishExec reports the exit code of an interactive exec.
func (c *Client) FinishExec(ctx context.Context, id, execID string, code int) (*Exec, error) {
	var ex Exec
	return &ex, c.do(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/execs/"+url.PathEscape(execID)+"/finish", &FinishRequest{ExitCode: code}, &ex)
}

// GetExec returns an exec record.
func (c *Client) GetExec(ctx context.Context, id, execID string) (*Exec, error) {
	var ex Exec
	return &ex, c.do(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/execs/"+url.PathEscape(execID), nil, &ex)
}

// EventStream reads a sandbox's events in sequence order.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	err  error
}

// Events returns the events with sequence > from; with follow the stream goes on
// live after the backlog, with no gap or duplicate between the two.
func (c *Client) Events(ctx context.Context, id string, from uint64, follow bool) (*EventStream, error) {
	q := url.Values{"from": {strconv.FormatUint(from, 10)}}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/events?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event; io.EOF at the end of a non-following stream.
func (s *EventStream) Next() (Event, error) {
	for s.sc.Scan() {
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return Event{}, fmt.Errorf("cannot decode an event: %w", err)
		}
		if ev.Kind == "stream.error" {
			return Event{}, fmt.Errorf("the event stream ended: %s", ev.Reason)
		}
		return ev, nil
	}
	if err := s.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// History returns the events of a sandbox with sequence > from that there are
// now (Events without follow, read to its end). On an error it returns the
// events read before it too.
func (c *Client) History(ctx context.Context, id string, from uint64) ([]Event, error) {
	st, err := c.Events(ctx, id, from, false)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []Event
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

// WaitState waits until the sandbox is in one of states and returns the event
// that put it there (or a zero Event when it already was). It reads the record
// once, then follows the event stream from that record's last sequence: no
// polling, no missed transition.
func (c *Client) WaitState(ctx context.Context, id string, states ...string) (*Sandbox, Event, error) {
	sb, err := c.Get(ctx, id)
	if err != nil {
		return nil, Event{}, err
	}
	if slices.Contains(states, sb.State) {
		return sb, Event{}, nil
	}
	st, err := c.Events(ctx, id, sb.LastSeq, true)
	if err != nil {
		return nil, Event{}, err
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, Event{}, ctx.Err()
			}
			return nil, Event{}, err
		}
		if slices.Contains(states, ev.State) {
			sb.State, sb.LastSeq, sb.Reason = ev.State, ev.Sequence, ev.Reason
			return sb, ev, nil
		}
	}
}

// WaitEvent follows the events after from until one of the kinds arrives.
func (c *Client) WaitEvent(ctx context.Context, id string, from uint64, kinds ...string) (Event, error) {
	st, err := c.Events(ctx, id, from, true)
	if err != nil {
		return Event{}, err
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if err != nil {
			return Event{}, err
		}
		if slices.Contains(kinds, ev.Kind) {
			return ev, nil
		}
	}
}

// WaitExec waits for an exec to finish and returns its record.
func (c *Client) WaitExec(ctx context.Context, id, execID string) (*Exec, error) {
	sb, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	ex, err := c.GetExec(ctx, id, execID)
	if err != nil || ex.FinishedAt != nil {
		return ex, err
	}
	st, err := c.Events(ctx, id, sb.LastSeq, true)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// The exec may have finished between GetExec and Events: check again.
	if ex, err := c.GetExec(ctx, id, execID); err != nil || ex.FinishedAt != nil {
		return ex, err
	}
	for {
		ev, err := st.Next()
		if err != nil {
			return nil, err
		}
		if ev.Kind == "exec.finished" && ev.ExecID == execID {
			return c.GetExec(ctx, id, execID)
		}
	}
}

// IsNotRunning reports whether err means no daemon answers.
func IsNotRunning(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) || strings.Contains(fmt.Sprint(err), "cannot reach the airlock daemon")
}

// Attach tells the daemon a client is attached to the sandbox (so it is not idle)
// until release is called.
func (c *Client) Attach(ctx context.Context, id string) (release func(), err error) {
	actx, cancel := context.WithCancel(ctx)
	resp, err := c.send(actx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/attach", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return func() { cancel(); resp.Body.Close() }, nil
}
