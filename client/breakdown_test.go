package client

import (
	"testing"
	"time"
)

func TestBreakdown(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	evs := []Event{
		{Kind: "sandbox.accepted", Time: ms(0)},
		{Kind: "sandbox.created", Time: ms(70)},
		{Kind: "sandbox.started", Time: ms(300), Extra: map[string]string{"steps_ms": "image=2,create=40,start=110"}},
		{Kind: "sandbox.ready", Time: ms(330)},
		{Kind: "main.exited", Time: ms(335)},
		{Kind: "sandbox.stopped", Time: ms(336)},
		{Kind: "sandbox.deleted", Time: ms(500), Extra: map[string]string{"steps_ms": "remove=150"}},
	}
	got := map[string]time.Duration{}
	for _, p := range Breakdown(evs) {
		got[p.Name] = p.Duration
	}
	want := map[string]int{"image": 2, "create": 40, "start": 110, "remove": 150, "accepted → created": 70, "created → started": 230,
		"started → ready (supervisor, daemons)": 30, "ready → main exited": 5, "main exited → stopped": 1, "stopped → deleted": 164}
	for k, v := range want {
		if got[k] != time.Duration(v)*time.Millisecond {
			t.Errorf("%s = %v, want %d ms", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("phases %v, want %v", got, want)
	}
}
