package client

import (
	"strconv"
	"strings"
	"time"
)

// Phase is one measured part of a sandbox's lifecycle.
type Phase struct {
	Name     string
	Duration time.Duration
}

// Breakdown tells where a sandbox's time went, from its events: the daemon's
// runtime steps (extra "steps_ms" of sandbox.started and sandbox.deleted: host
// plan, image, supervisor volume, network, create, copy-in, start, secrets
// delivery, remove) and the spans between transitions measured on the daemon's
// clock (accepted → created, created → started, started → ready for the
// supervisor and its daemons, ready → main exited, main exited → stopped, stop →
// deleted). A span whose events are missing is left out.
func Breakdown(evs []Event) []Phase {
	var out []Phase
	at := map[string]time.Time{}
	for _, e := range evs {
		if _, seen := at[e.Kind]; !seen {
			at[e.Kind] = e.Time
		}
		if (e.Kind == "sandbox.started" || e.Kind == "sandbox.deleted") && e.Extra["steps_ms"] != "" {
			for _, kv := range strings.Split(e.Extra["steps_ms"], ",") {
				name, ms, ok := strings.Cut(kv, "=")
				n, err := strconv.Atoi(ms)
				if ok && err == nil {
					out = append(out, Phase{Name: name, Duration: time.Duration(n) * time.Millisecond})
				}
			}
		}
	}
	span := func(name, from, to string) {
		a, okA := at[from]
		b, okB := at[to]
		if okA && okB && !b.Before(a) {
			out = append(out, Phase{Name: name, Duration: b.Sub(a)})
		}
	}
	span("accepted → created", "sandbox.accepted", "sandbox.created")
	span("created → started", "sandbox.created", "sandbox.started")
	span("started → ready (supervisor, daemons)", "sandbox.started", "sandbox.ready")
	span("ready → main exited", "sandbox.ready", "main.exited")
	span("main exited → stopped", "main.exited", "sandbox.stopped")
	span("stopped → deleted", "sandbox.stopped", "sandbox.deleted")
	return out
}
