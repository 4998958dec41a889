package control

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/execs"
	"github.com/airlock-dev/airlock/control/pool"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/secrets"
)

// Config are the daemon's settings from the user's config.toml (design.md §8).
type Config struct {
	IdleTTL           time.Duration
	EventRetentionTTL time.Duration
	ExecOutputRoot    string
	// BuildContextDir keeps the build contexts clients send until their
	// prepare ends ("": a private directory under the system temp dir).
	BuildContextDir    string
	ExecOutputTemplate string // "{sandbox_id}/{exec_id}"
	// ExecOutputMax bounds each output file of an API exec (0: the default,
	// userconfig.DefaultExecOutputMax).
	ExecOutputMax int64
	// OutputMax bounds a file or archive moved by the files API, either way
	// (artifacts.output_max; 0: userconfig.DefaultOutputMax).
	OutputMax int64
	// EmptyProject is the project directory of sandboxes created from a
	// manifest text without one (default <data dir>/empty-project).
	EmptyProject string
	// ReapInterval is how often the reaper looks (default 2 s).
	ReapInterval time.Duration
	// Redactor masks the secret values the daemon holds in its log and in event
	// reasons; nil for a new one.
	Redactor *secrets.Redactor
	// OpenEngine returns a runtime for another Engine than the daemon's own (a
	// sandbox created with DOCKER_HOST or a docker context); nil serves only its own.
	OpenEngine func(engine.Endpoint) (backend.Backend, error)
	// PoolMax bounds the parked sandboxes of every warm pool together
	// (runtime.pool_max; 0: no pool).
	PoolMax int
	// CreatesPerEngine bounds the sandboxes made or started on one Engine at
	// once, the others queued in order (runtime.creates_per_engine; 0:
	// DefaultCreatesPerEngine).
	CreatesPerEngine int
}

// retention is how long the events of a deleted sandbox are kept
// (runtime.event_retention_ttl).
func (c Config) retention() time.Duration {
	if c.EventRetentionTTL > 0 {
		return c.EventRetentionTTL
	}
	return 168 * time.Hour
}

// Service runs the daemon's operations: every Docker lifecycle call goes through
// it, and every transition is an event in the store before it is visible.
//
// It speaks the daemon's domain: store records and events, the request and
// result types of this package, and errors that match the store's sentinels or
// this package's (errors.go). The API layer (server.go, api_*.go) decodes the
// wire requests into those and maps the results and errors onto the wire
// (package client), as pebble's daemon does with its managers.
type Service struct {
	store *store.Store
	rt    backend.Backend
	cfg   Config
	log   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	lives   *lives                     // sandboxes with work or watchers in this daemon (guarded by mu)
	engines map[string]backend.Backend // other backends than rt, by endpoint key

	events        *events       // appended to the store, with the phases of runs (phase.go)
	metrics       *metrics      // what GET /metrics counts (metrics.go)
	files         *sandboxFiles // the files API (files.go)
	pruner        *pruner       // airlock prune (prune.go)
	buildContexts buildContexts // kept until their prepare (buildcontext.go)
	status        *follower     // status streams, egress denials, primaries' ends (follower.go)
	recovery      *recovery     // the store reconciled when the daemon starts (recover.go)
	reaper        *reaper       // idle sandboxes, gone CLIs, orphans, old history (reap.go)
	pools         *pool.Pools   // the warm pools (pools.go, package pool)
	execs         *execs.Execs  // the API execs (exec.go, package execs)
	gates         gates         // turns to make and start sandboxes, per Engine (gate.go)
	expiry        *expiry       // the sandboxes' deadlines and own idle timeouts (lifetime.go)
	watches       watchSlots    // the open file watches of each sandbox (watchcap.go)
	aliases       aliases       // Engine IDs of sandboxes claimed under the caller's ID (alias.go)
}

// NewService returns a service over an open store and a runtime.
func NewService(st *store.Store, rt backend.Backend, cfg Config) *Service {
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 2 * time.Second
	}
	if cfg.Redactor == nil {
		cfg.Redactor = secrets.NewRedactor()
	}
	if cfg.ExecOutputTemplate == "" {
		cfg.ExecOutputTemplate = "{sandbox_id}/{exec_id}"
	}
	if dd, ok := rt.(backend.DataDirer); ok {
		if dir, ok := dd.DataDir(); ok && cfg.ExecOutputRoot == "" {
			// The default of artifacts.exec_output_root (design.md §2); a relative root
			// would put the output in the daemon's working directory.
			cfg.ExecOutputRoot = filepath.Join(dir, "exec-output")
		}
		if dir, ok := dd.DataDir(); ok && cfg.EmptyProject == "" {
			cfg.EmptyProject = filepath.Join(dir, "empty-project")
		}
	}
	s := &Service{store: st, rt: rt, cfg: cfg, log: slog.New(slog.DiscardHandler),
		engines: map[string]backend.Backend{}}
	s.lives = &lives{mu: &s.mu, m: map[string]*live{}, attached: map[string]int{}, active: map[string]time.Time{},
		ctx: func() context.Context { return s.ctx }}
	s.events = &events{store: st, redactor: cfg.Redactor, log: func() *slog.Logger { return s.log }, phases: map[string]bool{}}
	s.status = newFollower(s)
	s.events.startedNotReady = s.status.startedNotReady
	s.metrics = newMetrics(s.backendOf)
	s.events.observe = s.metrics.observe
	s.recovery = newRecovery(s)
	s.files = newFiles(s)
	s.expiry = newExpiry(s)
	s.reaper = newReaper(s)
	s.pools = newPools(s)
	s.execs = newExecs(s)
	s.pruner = newPruner(s)
	s.buildContexts = buildContexts{dir: cfg.BuildContextDir, max: cfg.outputMax()}
	rt.SetHooks(s.serviceResult, s.recordStep)
	return s
}

// serviceResult records a service's first result: ready, or failed with detail.
func (s *Service) serviceResult(id, service string, ready bool, detail string) {
	ev := store.Event{Kind: "service.ready", Service: service}
	if !ready {
		ev = store.Event{Kind: "service.failed", Service: service, Reason: detail}
	}
	rid, ok := s.recordID(id)
	if !ok {
		// A warm pool's sandbox being made: recorded if a run claims it.
		s.pools.Stash(id, ev)
		return
	}
	s.events.emit(rid, ev, "")
}

func (s *Service) start(ctx context.Context) error {
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.aliases.load(s.store)
	s.recovery.recover()
	s.expiry.rearm()
	s.goAsync(s.expiry.run)
	s.goAsync(func() { s.pools.RemoveLeftovers(s.ctx, s.rt) })
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.status.watchEngine(s.rt) }()
	go func() { defer s.wg.Done(); s.reaper.reap() }()
	return nil
}

func (s *Service) stop() {
	// Parked sandboxes serve no one once the daemon is gone: removed (what a
	// killed daemon leaves, the next one removes).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 4*time.Second)
	s.pools.Close(ctx)
	cancel()
	s.cancel()
	s.wg.Wait()
	_ = s.store.Close()
}

// goAsync runs f in the background until it returns; stop waits for it.
func (s *Service) goAsync(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// holdSecrets makes values the secrets the daemon masks for l, replacing the
// ones l held before (nil forgets them).
func (s *Service) holdSecrets(l *live, values map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Redactor.Remove(l.secrets...)
	l.secrets = l.secrets[:0]
	for _, v := range values {
		l.secrets = append(l.secrets, v)
	}
	s.cfg.Redactor.Add(l.secrets...)
}

// recordStep keeps the duration of one step of a sandbox's runtime work; the next
// sandbox.started or sandbox.deleted event carries them (extra "steps_ms"), so a
// run's breakdown is in its history (airlock run --log-level debug, make bench).
func (s *Service) recordStep(id, step string, d time.Duration) {
	id, ok := s.recordID(id)
	if !ok {
		return // a warm pool's sandbox being made: no run's step
	}
	l := s.lives.of(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	l.steps = append(l.steps, fmt.Sprintf("%s=%d", step, d.Milliseconds()))
}

// sleep waits d, or less when ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
