package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// serveUnix serves h on a Unix socket and returns its path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "alc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestErrors(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "plain":
			http.Error(w, "boom", http.StatusBadGateway)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"reason":"sandbox_not_found","message":"no such sandbox"}`)
		}
	})
	c := client.New(serveUnix(t, mux))
	_, err := c.Get(ctx(t), "nope")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound || ce.Reason != client.ReasonSandboxNotFound || ce.Message != "no such sandbox" {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, client.ErrSandboxNotFound) || errors.Is(err, client.ErrInvalidState) {
		t.Errorf("errors.Is by reason does not hold for %v", err)
	}
	if err.Error() != "no such sandbox (sandbox_not_found)" {
		t.Errorf("Error() = %q", err.Error())
	}
	_, err = c.Get(ctx(t), "plain")
	if !errors.As(err, &ce) || ce.Reason != client.ReasonInternal || ce.Status != http.StatusBadGateway || ce.Message != "boom" {
		t.Errorf("a non-JSON error = %#v", err)
	}
	if client.IsNotRunning(err) {
		t.Errorf("an API error counts as no daemon")
	}
}

func TestNotRunning(t *testing.T) {
	dir, err := os.MkdirTemp("", "alc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_, err = client.New(filepath.Join(dir, "none.sock")).Health(ctx(t))
	if err == nil || !client.IsNotRunning(err) {
		t.Errorf("health of no daemon: %v, want IsNotRunning", err)
	}
}

func TestTCPToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		json.NewEncoder(w).Encode(client.Health{PID: 7, BuildID: "b"})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if h, err := client.NewTCP(addr, "tok").Health(ctx(t)); err != nil || h.PID != 7 || got != "Bearer tok" {
		t.Errorf("health = %+v %v, Authorization %q", h, err, got)
	}
	if _, err := client.NewTCP(addr, "").Health(ctx(t)); err != nil || got != "" {
		t.Errorf("without a token: %v, Authorization %q", err, got)
	}
}

// events serves a fixed event stream for sandbox "s" whose record is at seq 2.
func eventsServer(t *testing.T, lines string, state string) *client.Client {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(client.Sandbox{ID: "s", State: state, LastSeq: 2})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("from") != "2" || r.URL.Query().Get("follow") != "1" {
			http.Error(w, `{"reason":"bad_cursor","message":"unexpected cursor"}`, http.StatusBadRequest)
			return
		}
		io.WriteString(w, lines)
	})
	return client.New(serveUnix(t, mux))
}

func TestWaitState(t *testing.T) {
	c := eventsServer(t, `{"sandbox_id":"s","sequence":3,"kind":"daemon.started","state":"pending"}

{"sandbox_id":"s","sequence":4,"kind":"sandbox.ready","state":"ready"}
`, "pending")
	sb, ev, err := c.WaitState(ctx(t), "s", client.StateReady)
	if err != nil || sb.State != client.StateReady || sb.LastSeq != 4 || ev.Kind != "sandbox.ready" {
		t.Errorf("WaitState = %+v %+v %v", sb, ev, err)
	}
	// Already there: no stream needed, a zero event.
	c = eventsServer(t, "", "ready")
	sb, ev, err = c.WaitState(ctx(t), "s", client.StateReady)
	if err != nil || sb.State != client.StateReady || ev.Kind != "" {
		t.Errorf("WaitState in the state already = %+v %+v %v", sb, ev, err)
	}
	// The stream ends before the state: an error, not a hang.
	c = eventsServer(t, `{"sequence":3,"kind":"daemon.started","state":"pending"}`+"\n", "pending")
	if _, _, err := c.WaitState(ctx(t), "s", client.StateReady); !errors.Is(err, io.EOF) {
		t.Errorf("WaitState on an ended stream: %v, want EOF", err)
	}
	// A stream.error line is an error.
	c = eventsServer(t, `{"kind":"stream.error","reason":"fell behind"}`+"\n", "pending")
	if _, _, err := c.WaitState(ctx(t), "s", client.StateReady); err == nil || !strings.Contains(err.Error(), "fell behind") {
		t.Errorf("WaitState on a stream error: %v", err)
	}
	// A line that is not JSON is an error.
	c = eventsServer(t, "garbage\n", "pending")
	if _, _, err := c.WaitState(ctx(t), "s", client.StateReady); err == nil {
		t.Errorf("WaitState on garbage: no error")
	}
}

func TestWaitEventFromCursor(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("from") != "5" {
			t.Errorf("from = %q, want 5", r.URL.Query().Get("from"))
		}
		io.WriteString(w, `{"sequence":6,"kind":"exec.started","exec_id":"e"}
{"sequence":7,"kind":"exec.finished","exec_id":"e","exit_code":3}
`)
	})
	c := client.New(serveUnix(t, mux))
	ev, err := c.WaitEvent(ctx(t), "s", 5, "exec.finished")
	if err != nil || ev.Sequence != 7 || ev.ExitCode == nil || *ev.ExitCode != 3 {
		t.Errorf("WaitEvent = %+v %v", ev, err)
	}
}

func TestAttachHoldsUntilRelease(t *testing.T) {
	held := make(chan struct{})
	gone := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/attach", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(held)
		<-r.Context().Done()
		close(gone)
	})
	c := client.New(serveUnix(t, mux))
	release, err := c.Attach(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	<-held
	select {
	case <-gone:
		t.Fatal("the attachment ended before release")
	default:
	}
	release()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("release did not end the attachment")
	}
}

// TestHistory: the events there are, read to the end of the stream; an error
// mid-stream returns the events before it.
func TestHistory(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("from") != "1" || r.URL.Query().Has("follow") {
			http.Error(w, `{"reason":"bad_cursor","message":"unexpected query"}`, http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"sequence":2,"kind":"sandbox.created"}`+"\n"+`{"sequence":3,"kind":"sandbox.ready"}`+"\n")
		if r.PathValue("id") == "broken" {
			io.WriteString(w, `{"kind":"stream.error","reason":"fell behind"}`+"\n")
		}
	})
	c := client.New(serveUnix(t, mux))
	evs, err := c.History(context.Background(), "s", 1)
	if err != nil || len(evs) != 2 || evs[0].Sequence != 2 || evs[1].Kind != "sandbox.ready" {
		t.Fatalf("History = %+v, %v", evs, err)
	}
	evs, err = c.History(context.Background(), "broken", 1)
	if err == nil || len(evs) != 2 {
		t.Fatalf("a broken stream: %+v, %v", evs, err)
	}
}
