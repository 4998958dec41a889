package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
)

// slowWaitEngine is an Engine whose wait answers only when told to (Engine 20.10
// answers it only after releasing the container's network), with an event stream
// the test feeds. Every other call panics: WaitExit must need no more.
type slowWaitEngine struct {
	client.APIClient
	events  chan events.Message
	evErrs  chan error
	waits   chan container.WaitResponse
	filters chan events.ListOptions
}

func newSlowWaitEngine() *slowWaitEngine {
	return &slowWaitEngine{
		events: make(chan events.Message, 1), evErrs: make(chan error, 1),
		waits: make(chan container.WaitResponse, 1), filters: make(chan events.ListOptions, 1),
	}
}

func (e *slowWaitEngine) Events(_ context.Context, o events.ListOptions) (<-chan events.Message, <-chan error) {
	e.filters <- o
	return e.events, e.evErrs
}

func (e *slowWaitEngine) ContainerWait(context.Context, string, container.WaitCondition) (<-chan container.WaitResponse, <-chan error) {
	return e.waits, make(chan error)
}

func waitCode(t *testing.T, codes <-chan int, errs <-chan error) int {
	t.Helper()
	select {
	case c := <-codes:
		return c
	case err := <-errs:
		t.Fatalf("WaitExit failed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitExit gave no code")
	}
	return 0
}

func subscribed(t *testing.T, eng *slowWaitEngine) events.ListOptions {
	t.Helper()
	select {
	case o := <-eng.filters:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("WaitExit did not subscribe to the Engine's events")
	}
	return events.ListOptions{}
}

func TestWaitExitTakesTheDieEventBeforeTheWait(t *testing.T) {
	eng := newSlowWaitEngine()
	rt := &Runtime{Engine: eng}
	codes, errs := rt.WaitExit(t.Context(), backend.Handle("sb", "c123", false))
	f := subscribed(t, eng).Filters
	if !f.ExactMatch("container", "c123") || !f.ExactMatch("event", "die") || !f.ExactMatch("type", "container") {
		t.Fatalf("events subscribed with filters %v, want this container's die events", f)
	}
	eng.events <- events.Message{Type: events.ContainerEventType, Action: events.ActionDie, Actor: events.Actor{ID: "c123", Attributes: map[string]string{"exitCode": "3"}}}
	if got := waitCode(t, codes, errs); got != 3 {
		t.Fatalf("code %d, want the die event's 3 (the wait has not answered)", got)
	}
}

func TestWaitExitFallsBackToTheWait(t *testing.T) {
	eng := newSlowWaitEngine()
	rt := &Runtime{Engine: eng}
	codes, errs := rt.WaitExit(t.Context(), backend.Handle("sb", "c123", false))
	subscribed(t, eng)
	eng.evErrs <- errors.New("event stream broke")
	close(eng.events) // a closed stream is ignored, not read as a code
	eng.waits <- container.WaitResponse{StatusCode: 7}
	if got := waitCode(t, codes, errs); got != 7 {
		t.Fatalf("code %d, want the wait's 7", got)
	}
}
