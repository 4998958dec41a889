// Package pool is the daemon's warm pools: per manifest (project, file,
// Engine), the sandboxes made, started and parked in advance for its runs,
// handed to a run that claims one, refilled after it, drained when idle.
//
// The daemon (package control) holds one Pools and tells it, through Host,
// what it needs of the daemon: its context, its log, the pool_max bound and
// which sandboxes a run claimed (in its store).
package pool

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
)

// Why a run did not get a pooled sandbox (the miss counters of a pool).
const (
	MissEmpty     = "empty"     // no parked sandbox was ready
	MissStale     = "stale"     // the manifest, image, values or copied files changed: the pool was replaced
	MissUnhealthy = "unhealthy" // the parked ones were dead or unhealthy
	MissDisabled  = "disabled"  // run --no-pool, or runtime.pool_max = 0
	MissOptions   = "options"   // a create a parked sandbox cannot serve: a TTY, a remote client's files, ports
)

// poolRetryMax bounds the backoff of a pool whose fills fail.
const poolRetryMax = time.Minute

// refillDelay is how long after a create took a sandbox, or missed, its pool
// waits before it makes the next ones: the claim (tens of milliseconds) does
// not share the Engine and the CPU with the refill. Claims that follow do not
// push it back (refillAt), so that creates back to back are refilled.
const refillDelay = 50 * time.Millisecond

// coldHoldMax bounds how long a pool's refill waits for the cold start of a
// run that missed (ColdMiss): the refill begins refillDelay after that run's
// sandbox started, so the two never share the Engine while it starts.
const coldHoldMax = 30 * time.Second

// maxFingerprintEntries bounds the files a pool key fingerprints: a copied
// tree larger than this is not pooled (its key would cost a run too much).
const maxFingerprintEntries = 100_000

// Backend is what a pool needs of the backend its sandboxes run on (the
// daemon's control.Backend has these and more).
type Backend interface {
	Location() engine.Endpoint
	PlanHashFor(ctx context.Context, r *manifest.Resolved) (string, error)
	Create(ctx context.Context, req *backend.Request) (*backend.Sandbox, error)
	Start(ctx context.Context, sb *backend.Sandbox) error
	WatchParked(ctx context.Context, sb *backend.Sandbox, parked func()) error
	Running(ctx context.Context, containerID string) bool
	Remove(ctx context.Context, id string) error
	List(ctx context.Context, labels map[string]string, all bool) ([]backend.Info, error)
}

// Host is what the pools need of the daemon that holds them.
type Host struct {
	// Context is the daemon's: fills, health watches and removals end with it.
	Context func() context.Context
	// Log is the daemon's log.
	Log func() *slog.Logger
	// Max bounds the parked sandboxes of every pool together
	// (runtime.pool_max; 0: no pool).
	Max int
	// Claimed says whether a run claimed sandbox id (it is in the store).
	Claimed func(id string) bool
}

// Pools are the daemon's warm pools.
type Pools struct {
	host   Host
	secret []byte // keys the hash of values in a pool key (never shown)

	mu       sync.Mutex
	byID     map[string]*Pool
	early    map[string][]store.Event // events of pooled sandboxes, recorded when a run claims one
	total    int                      // parked and in-flight sandboxes of every pool
	closed   bool
	wg       sync.WaitGroup // fills and health watches
	removals sync.WaitGroup // removals of pooled sandboxes
}

// Pool is one manifest's pool.
type Pool struct {
	ident    string // engine key, project dir, manifest file
	key      string // the strict key of what its sandboxes are
	project  string
	file     string
	rt       Backend
	endpoint engine.Endpoint
	resolved *manifest.Resolved // with its values: what a refill makes
	size     int
	warmSize int // a pool warm --size, kept until the pool is drained
	idleTTL  time.Duration

	members  []*Member
	inflight int
	// makeTook is how long the last sandbox made took to park, and
	// makeStarts when the ones being made began (oldest first): a create that
	// finds the pool empty waits for one of those rather than start cold when
	// it is due sooner than a cold start would be (Take).
	makeTook   time.Duration
	makeStarts []time.Time
	filling    bool
	wake       chan struct{} // a waiter of pool warm hears each change

	hits      int
	misses    map[string]int
	stale     int // sandboxes removed because the key changed
	failures  int
	lastError string
	retryAt   time.Time
	backoff   time.Duration
	lastUsed  time.Time
	lastClaim time.Time // the last run that took one or missed
	refillAt  time.Time // no refill starts before (refillDelay after the claim that made it short)
	cold      int       // runs that missed and are being made cold: no refill until they started
}

// Member is one parked (or parking) sandbox of a pool.
type Member struct {
	sb      *backend.Sandbox
	ready   bool
	since   time.Time
	cancel  context.CancelFunc // ends its health watch
	healthy bool
}

// New returns the daemon's pools, empty.
func New(h Host) *Pools {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	return &Pools{host: h, secret: secret, byID: map[string]*Pool{}, early: map[string][]store.Event{}}
}

// Key is the strict key of what p's sandboxes are (pool.claimed names it).
func (p *Pool) Key() string { return p.key }

// Sandbox is m's sandbox.
func (m *Member) Sandbox() *backend.Sandbox { return m.sb }

// Since is when m was made.
func (m *Member) Since() time.Time { return m.since }

// Stash keeps an event of a pooled sandbox until a run claims it.
func (ps *Pools) Stash(id string, ev store.Event) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.early[id]) < 64 {
		ps.early[id] = append(ps.early[id], ev)
	}
}

// TakeEarly returns (and forgets) the events stashed for a pooled sandbox.
func (ps *Pools) TakeEarly(id string) []store.Event {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	evs := ps.early[id]
	delete(ps.early, id)
	return evs
}

// ctx is the daemon's context.
func (ps *Pools) ctx() context.Context { return ps.host.Context() }

// log is the daemon's log.
func (ps *Pools) log() *slog.Logger { return ps.host.Log() }

// poolIdent names the pool of a manifest on an Engine.
func poolIdent(ep engine.Endpoint, r *manifest.Resolved, file string) string {
	return ep.Key() + "\x00" + r.ProjectDir + "\x00" + file
}

// target is how many sandboxes p should hold.
func (p *Pool) target() int { return max(p.size, p.warmSize) }

// notifyLocked wakes the waiters of p (ps.mu held).
func (ps *Pools) notifyLocked(p *Pool) {
	close(p.wake)
	p.wake = make(chan struct{})
}

// sleep waits d, or less when ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool { return sleepOr(ctx, d, nil) }

// sleepOr is sleep that also ends when wake is closed.
func sleepOr(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-wake:
		return true
	}
}
