package control

import (
	"context"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// live is what the daemon holds in memory for a sandbox: never persisted.
type live struct {
	mu       sync.Mutex // serialises lifecycle operations of one sandbox
	wire     manifest.Wire
	values   map[string]string // the manifest's substituted values, by key path
	resolved *manifest.Resolved
	handle   *backend.Sandbox
	// claim, for a sandbox a run took from a warm pool, is what its start
	// delivers instead of starting a container (guarded by mu).
	claim    *backend.Claim
	stopping string // reason of a requested stop or delete (guarded by Service.mu)
	oom      bool   // the Engine reported an OOM kill (guarded by Service.mu)
	execs    int
	secrets  []string // the substituted values this sandbox holds (redacted from logs)
	deleting bool     // a removal is in progress (guarded by Service.mu)

	cancelOp context.CancelFunc // cancels the create or start in progress (guarded by Service.mu)

	ingestMu sync.Mutex // guards offset and tailGen
	offset   int64      // the status stream read so far
	offsetOK bool       // offset is known (else it comes from the recorded events)
	starting bool       // a create or start is in progress: the stream is read only once it is recorded
	diedMu   sync.Mutex // serialises the handling of the primary's end
	complete bool       // the stream was read to its last line (supervisor.exiting)
	// finalWait, while the stream a sealed end marker carried is checked, is
	// closed once it was ingested or given up (a catch-up waits for it).
	finalWait chan struct{}
	// finalData is the stream a sealed end marker carried while a start was
	// still in progress (a short run's command can end before its start is
	// recorded): ingested right after sandbox.started.
	finalData []byte
	limiter   *rate.Limiter // bounds how fast the stream's lines become events

	netRemoval chan struct{}   // closed when an early removal of the network ended (guarded by Service.mu)
	up         map[string]bool // daemons up since the last start; nil until known (guarded by Service.mu)
	steps      []string        // "step=ms" of the runtime's work since the last report (guarded by Service.mu)

	removeOnExit bool // delete the sandbox when its primary exits (guarded by Service.mu)
	// mainEnded: the main command's output ended with its end marker (a
	// fast-ended run), its daemons shutting down: the CLI that got the code
	// is gone by design, so the reaper leaves the sandbox to its primary's
	// exit (guarded by Service.mu).
	mainEnded time.Time
	// mainExit is the main command's code as an attached client got it (at
	// the end marker, or at the primary's exit), shown until the stop is
	// recorded (guarded by Service.mu).
	mainExit *int

	egress          map[string]*egressCount // denied destinations (guarded by Service.mu)
	egressFollowing bool                    // a follower reads the proxy's denials (guarded by Service.mu)
	bounds          insideBounds            // what its sources inside were allowed to record (bounds.go; guarded by Service.mu)
	tailGen         int                     // the follower that owns the stream; older ones stop
	// early is the status stream opened while a claim was delivered, for its
	// follower to take (prefollow.go; guarded by ingestMu).
	early *prefollowed
}

// lives are the sandboxes the daemon holds in memory, how many clients are
// attached to each and when one was last used; the daemon's lock (Service.mu)
// guards them and the fields of live marked so.
type lives struct {
	mu       *sync.Mutex
	m        map[string]*live
	attached map[string]int
	active   map[string]time.Time   // last time a client or exec used a sandbox
	ctx      func() context.Context // the daemon's, the parent of a create's or start's
}

// of returns the live sandbox id, made when the daemon holds none.
func (ls *lives) of(id string) *live {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.locked(id)
}

// locked is of with ls.mu held.
func (ls *lives) locked(id string) *live {
	l, ok := ls.m[id]
	if !ok {
		l = &live{}
		ls.m[id] = l
	}
	return l
}

// current reports whether gen is still the follower of l's stream.
func (l *live) current(gen int) bool {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	return l.tailGen == gen
}

// startInProgress reports whether a start of l is under way (before
// sandbox.started or its failure is recorded).
func (l *live) startInProgress() bool {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	return l.starting
}

// allowEvent takes one line from l's rate budget (l.ingestMu held).
func (l *live) allowEvent() bool {
	if l.limiter == nil {
		l.limiter = rate.NewLimiter(statusRate, statusBurst)
	}
	return l.limiter.Allow()
}

// beginOp returns the context of a create or start of l, which stop and delete
// can cancel (they would otherwise wait for it, e.g. for a service's ready_timeout).
func (ls *lives) beginOp(l *live) context.Context {
	ctx, cancel := context.WithCancel(ls.ctx())
	ls.mu.Lock()
	l.cancelOp = cancel
	ls.mu.Unlock()
	return ctx
}

// interrupt cancels the create or start of l in progress, if any.
func (ls *lives) interrupt(l *live) {
	ls.mu.Lock()
	if l.cancelOp != nil {
		l.cancelOp()
	}
	ls.mu.Unlock()
}

// setFlags changes l.stopping and l.oom, which the Engine watcher reads; both are
// guarded by ls.mu.
func (ls *lives) setFlags(l *live, f func()) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	f()
}

// claim sets a flag of a live sandbox (guarded by ls.mu) and reports whether it
// was clear: the caller then owns the job the flag marks until it clears it.
func (ls *lives) claim(flag *bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if *flag {
		return false
	}
	*flag = true
	return true
}

// touch marks sandbox id used now (its idle clock).
func (ls *lives) touch(id string) {
	ls.mu.Lock()
	ls.active[id] = time.Now()
	ls.mu.Unlock()
}

// takeSteps returns the steps recorded since the last call, as event extras.
func (ls *lives) takeSteps(l *live) map[string]string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(l.steps) == 0 {
		return nil
	}
	out := map[string]string{"steps_ms": strings.Join(l.steps, ",")}
	l.steps = nil
	return out
}
