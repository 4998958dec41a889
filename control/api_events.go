package control

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
)

// events streams NDJSON: the backlog after `from`, then (with follow=1) live events.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, &client.Error{Reason: client.ReasonBadCursor, Message: "from must be a sequence number"})
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
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	for _, ev := range backlog {
		_ = enc.Encode(toClientEvent(ev))
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
				_ = enc.Encode(client.Event{Kind: "stream.error", Reason: "the subscriber fell behind or the daemon stopped; resume from the last sequence"})
				return
			}
			if err := enc.Encode(toClientEvent(ev)); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
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
