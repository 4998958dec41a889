package control

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/airlock-dev/airlock/client"
)

// MaxFileWatches bounds the file watches (WatchFiles) open on one sandbox at
// once: each runs a watcher in the sandbox and holds a stream to a client.
const MaxFileWatches = 8

// watchSlots counts the open file watches of each sandbox. The zero value is
// ready to use.
type watchSlots struct {
	mu sync.Mutex
	n  map[string]int
}

// take takes a place for a watch of sandbox id, or says why there is none;
// release gives it back (once).
func (ws *watchSlots) take(id string) (release func(), err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.n[id] >= MaxFileWatches {
		return nil, &client.Error{Status: http.StatusTooManyRequests, Reason: client.ReasonTooManyWatches,
			Message: "cannot watch files in sandbox " + id + ": it has " + strconv.Itoa(MaxFileWatches) + " watches open, as many as a sandbox may; close one first"}
	}
	if ws.n == nil {
		ws.n = map[string]int{}
	}
	ws.n[id]++
	var once sync.Once
	return func() {
		once.Do(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			if ws.n[id]--; ws.n[id] <= 0 {
				delete(ws.n, id)
			}
		})
	}, nil
}
