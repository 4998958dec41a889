package control_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	id    string
	event string
	data  string
}

// sseStream opens the events of a sandbox as server-sent events (Accept:
// text/event-stream), with lastID as Last-Event-ID when not empty, and returns
// the response's Content-Type and a channel of its events, closed at its end.
func sseStream(t *testing.T, ctx context.Context, sock, path, lastID string) (string, <-chan sseEvent) {
	t.Helper()
	hc := socketClient(sock)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://airlockd"+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return resp.Header.Get("Content-Type"), out
}

// decodeSSE checks that an event's id is its sequence and returns the event.
func decodeSSE(t *testing.T, ev sseEvent) client.Event {
	t.Helper()
	var ce client.Event
	if err := json.Unmarshal([]byte(ev.data), &ce); err != nil {
		t.Fatalf("an SSE event's data is not an event: %q: %v", ev.data, err)
	}
	if ev.id != strconv.FormatUint(ce.Sequence, 10) {
		t.Errorf("SSE id %q for the event of sequence %d", ev.id, ce.Sequence)
	}
	return ce
}

// TestEventsAsServerSentEvents: with Accept: text/event-stream the events come as
// SSE, id = sequence, the same events as the NDJSON stream; Last-Event-ID
// resumes after it, without gap or duplicate between backlog and live events.
func TestEventsAsServerSentEvents(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, uniq("sse")).ID
	want := allEvents(t, c, id)
	if len(want) < 3 {
		t.Fatalf("too few events to resume from: %v", kinds(want))
	}

	ct, stream := sseStream(t, ctx, e.paths.Socket(), "/v1/sandboxes/"+id+"/events", "")
	if ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	var got []client.Event
	for ev := range stream {
		got = append(got, decodeSSE(t, ev))
	}
	if len(got) != len(want) {
		t.Fatalf("SSE gave %v, NDJSON %v", kinds(got), kinds(want))
	}
	for i := range got {
		if got[i].Sequence != want[i].Sequence || got[i].Kind != want[i].Kind {
			t.Errorf("event %d: SSE %d %s, NDJSON %d %s", i, got[i].Sequence, got[i].Kind, want[i].Sequence, want[i].Kind)
		}
	}

	// A browser reconnecting repeats the URL (from=0 here) with Last-Event-ID: the
	// header wins; the backlog after it, then the live events of a stop follow.
	mid := want[1].Sequence
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, live := sseStream(t, fctx, e.paths.Socket(), "/v1/sandboxes/"+id+"/events?from=0&follow=1", strconv.FormatUint(mid, 10))
	var resumed []client.Event
	next := func() client.Event {
		t.Helper()
		select {
		case ev, ok := <-live:
			if !ok {
				t.Fatalf("the followed SSE stream ended after %v", kinds(resumed))
			}
			ce := decodeSSE(t, ev)
			resumed = append(resumed, ce)
			return ce
		case <-ctx.Done():
			t.Fatalf("no event after %v", kinds(resumed))
		}
		return client.Event{}
	}
	for range len(want) - 2 {
		next()
	}
	if _, err := c.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	for next().Kind != "sandbox.stopped" {
	}
	assertContiguous(t, "the resumed SSE stream", resumed, mid)

	// A Last-Event-ID that is no sequence is refused as a bad cursor.
	code, body := rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/events", "Accept", "text/event-stream", "Last-Event-ID", "x")
	if code != http.StatusBadRequest || !strings.Contains(body, `"reason":"bad_cursor"`) {
		t.Errorf("Last-Event-ID x: %d %s", code, body)
	}
}
