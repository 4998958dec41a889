package control

import (
	"context"
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
}

func (s *Service) liveOf(id string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked(id)
}

// liveLocked is liveOf with s.mu held.
func (s *Service) liveLocked(id string) *live {
	l, ok := s.live[id]
	if !ok {
		l = &live{}
		s.live[id] = l
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
