package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// events streams the backlog after `from`, then (with follow=1) live events: as
// NDJSON, or as server-sent events when the client accepts text/event-stream
// (`id:` = the sequence; a Last-Event-ID header resumes after it, over `from`).
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	sse := accepts(r, "text/event-stream")
	cursor := r.URL.Query().Get("from")
	if v := r.Header.Get("Last-Event-ID"); sse && v != "" {
		cursor = v
	}
	var from uint64
	if cursor != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(cursor), 10, 64)
		if err != nil {
			writeError(w, &client.Error{Reason: client.ReasonBadCursor, Message: "from (or Last-Event-ID) must be a sequence number"})
			return
		}
		from = n
	}
	follow := r.URL.Query().Get("follow") == "1"
	backlog, live, cancel, err := s.svc.Subscribe(r.PathValue("id"), from, follow)
	if err != nil {
		writeError(w, err)
		return
	}
	defer cancel()
	write := writeNDJSON
	if sse {
		write = writeSSE
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, ev := range backlog {
		if err := write(w, toClientEvent(ev)); err != nil {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	if !follow {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-live:
			if !ok {
				_ = write(w, client.Event{Kind: "stream.error", Reason: "the subscriber fell behind or the daemon stopped; resume from the last sequence"})
				return
			}
			if err := write(w, toClientEvent(ev)); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// writeNDJSON writes one event as a line of JSON.
func writeNDJSON(w io.Writer, ev client.Event) error {
	return json.NewEncoder(w).Encode(ev)
}

// writeSSE writes one event as a server-sent event: `id:` its sequence (none for
// a stream.error, which has no place in the history), `data:` its JSON (one line:
// encoding/json escapes every newline). Without an `event:` field, a browser's
// EventSource delivers every kind to onmessage.
func writeSSE(w io.Writer, ev client.Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if ev.Sequence > 0 {
		fmt.Fprintf(&buf, "id: %d\n", ev.Sequence)
	} else {
		buf.WriteString("event: stream.error\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	_, err = w.Write(buf.Bytes())
	return err
}

// attach holds the request open while a client is attached to the sandbox, so the
// idle reaper leaves it alone.
func (s *server) attach(w http.ResponseWriter, r *http.Request) {
	release, err := s.svc.Attach(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	<-r.Context().Done()
}

// toClientEvent is the API's view of an event (its stream offset left out).
func toClientEvent(e store.Event) client.Event {
	return client.Event{SandboxID: e.SandboxID, Sequence: e.Sequence, Kind: e.Kind, Time: e.Time, State: e.State,
		Daemon: e.Daemon, Service: e.Service, ExecID: e.ExecID, Reason: e.Reason, Signal: e.Signal,
		ExitCode: e.ExitCode, Attempt: e.Attempt, DelayMS: e.DelayMS, PID: e.PID, Extra: e.Extra}
}
