package control

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
)

// Why a run did not get a pooled sandbox (the miss counters of a pool).
const (
	MissEmpty     = "empty"     // no parked sandbox was ready
	MissStale     = "stale"     // the manifest, image, values or copied files changed: the pool was replaced
	MissUnhealthy = "unhealthy" // the parked ones were dead or unhealthy
	MissDisabled  = "disabled"  // run --no-pool, or runtime.pool_max = 0
	MissOptions   = "options"   // a run a parked sandbox cannot serve: a TTY, --id, --label, a remote client's files
)

// poolRetryMax bounds the backoff of a pool whose fills fail.
const poolRetryMax = time.Minute

// refillDelay is how long after a run took a sandbox, or missed, its pool
// waits before it makes the next one: the run does not share the Engine and
// the CPU with the refill while it starts (rate limit).
const refillDelay = 500 * time.Millisecond

// coldHoldMax bounds how long a pool's refill waits for the cold start of a
// run that missed (coldMiss): the refill begins refillDelay after that run's
// sandbox started, so the two never share the Engine while it starts.
const coldHoldMax = 30 * time.Second

// maxFingerprintEntries bounds the files a pool key fingerprints: a copied
// tree larger than this is not pooled (its key would cost a run too much).
const maxFingerprintEntries = 100_000

// pools are the daemon's warm pools: per manifest (project, file, Engine), the
// sandboxes made, started and parked in advance for its runs.
type pools struct {
	s      *Service
	secret []byte // keys the hash of values in a pool key (never shown)

	mu       sync.Mutex
	byID     map[string]*pool
	early    map[string][]store.Event // events of pooled sandboxes, recorded when a run claims one
	total    int                      // parked and in-flight sandboxes of every pool
	closed   bool
	wg       sync.WaitGroup // fills and health watches
	removals sync.WaitGroup // removals of pooled sandboxes
}

// pool is one manifest's pool.
type pool struct {
	ident    string // engine key, project dir, manifest file
	key      string // the strict key of what its sandboxes are
	project  string
	file     string
	rt       backend.Backend
	endpoint engine.Endpoint
	resolved *manifest.Resolved // with its values: what a refill makes
	size     int
	warmSize int // a pool warm --size, kept until the pool is drained
	idleTTL  time.Duration

	members  []*member
	inflight int
	filling  bool
	wake     chan struct{} // a waiter of pool warm hears each change

	hits      int
	misses    map[string]int
	stale     int // sandboxes removed because the key changed
	failures  int
	lastError string
	retryAt   time.Time
	backoff   time.Duration
	lastUsed  time.Time
	lastClaim time.Time // the last run that took one or missed
	cold      int       // runs that missed and are being made cold: no refill until they started
}

// member is one parked (or parking) sandbox of a pool.
type member struct {
	sb      *backend.Sandbox
	ready   bool
	since   time.Time
	cancel  context.CancelFunc // ends its health watch
	healthy bool
}

func newPools(s *Service) *pools {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	return &pools{s: s, secret: secret, byID: map[string]*pool{}, early: map[string][]store.Event{}}
}

// stash keeps an event of a pooled sandbox until a run claims it.
func (ps *pools) stash(id string, ev store.Event) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.early[id]) < 64 {
		ps.early[id] = append(ps.early[id], ev)
	}
}

// takeEarly returns (and forgets) the events stashed for a pooled sandbox.
func (ps *pools) takeEarly(id string) []store.Event {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	evs := ps.early[id]
	delete(ps.early, id)
	return evs
}

// poolable says why a create cannot be served from a pool ("" when it can).
func poolable(req *CreateRequest, r *manifest.Resolved) (configured bool, reason string) {
	configured = r.Sandbox.Pool != nil && r.Sandbox.Pool.Size > 0
	switch {
	case req.Kind != backend.KindRun:
		return configured, MissOptions
	case req.NoPool:
		return configured, MissDisabled
	case req.TTY || req.ID != "" || len(req.Labels) > 0 || req.ClientFiles:
		return configured, MissOptions
	case len(r.Sandbox.Ports) > 0:
		// Parked sandboxes would hold the host ports a run publishes.
		return configured, MissOptions
	}
	return configured, ""
}

// poolIdent names the pool of a manifest on an Engine.
func poolIdent(ep engine.Endpoint, r *manifest.Resolved, file string) string {
	return ep.Key() + "\x00" + r.ProjectDir + "\x00" + file
}

// key is the strict key of what a sandbox made from r on rt now would be: the
// plan (every layer; [sandbox.pool] itself aside) with the image's ID (tags
// move), the Engine, the values baked into objects at creation (services'
// env, image, mount and copy sources: keyed, never shown) and a fingerprint of
// the files copied in. "" with a reason when r cannot be pooled.
func (ps *pools) key(ctx context.Context, rt backend.Backend, r *manifest.Resolved, values map[string]string) (string, error) {
	files, ok := rt.(interface {
		CopiedPaths(*manifest.Resolved) []string
	})
	if !ok {
		return "", errors.New("this backend has no warm pool")
	}
	plain := *r
	sb := plain.Sandbox
	sb.Pool = nil
	plain.Sandbox = sb
	plan, err := rt.PlanHashFor(ctx, &plain)
	if err != nil {
		return "", err
	}
	delivered := deliveredAtClaim(r)
	baked := map[string]string{}
	for k, v := range values {
		if !delivered[k] {
			baked[k] = v
		}
	}
	fp, err := fingerprint(files.CopiedPaths(r))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(struct {
		Plan, Engine, Files string
		Baked               map[string]string
	}{plan, rt.Location().Key(), fp, baked})
	m := hmac.New(sha256.New, ps.secret)
	m.Write(b)
	return hex.EncodeToString(m.Sum(nil))[:16], nil
}

// deliveredAtClaim are the key paths whose values reach a pooled sandbox with
// its claim ([env] and the daemons' env) rather than at its creation.
func deliveredAtClaim(r *manifest.Resolved) map[string]bool {
	out := map[string]bool{}
	for k := range r.Env {
		out[manifest.KeyPath("env", k)] = true
	}
	for name, d := range r.Daemons {
		for k := range d.Env {
			out[manifest.KeyPath("daemons", name, "env", k)] = true
		}
	}
	return out
}

// fingerprint hashes the name, mode, size and modification time of every file
// under paths (in order; links not followed): a change to what is copied in
// changes it.
func fingerprint(paths []string) (string, error) {
	h := sha256.New()
	n := 0
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00error\x00", p)
				return nil
			}
			if n++; n > maxFingerprintEntries {
				return fmt.Errorf("more than %d files are copied in", maxFingerprintEntries)
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// take hands a create a parked sandbox of its manifest's pool, or says why
// not; a miss of a manifest with a pool also starts filling it. The returned
// reason is "" for a hit; configured says the manifest has a pool (a miss of
// one without is not counted).
func (ps *pools) take(ctx context.Context, req *CreateRequest, r *manifest.Resolved) (m *member, p *pool, reason string) {
	configured, reason := poolable(req, r)
	rt := ps.s.rt
	if req.Engine != nil {
		rt = ps.s.runtimeFor(*req.Engine)
	}
	ident := poolIdent(rt.Location(), r, req.Manifest.File)
	ps.mu.Lock()
	p = ps.byID[ident]
	ps.mu.Unlock()
	if p == nil && !configured {
		return nil, nil, "none" // no pool, none wanted
	}
	if reason == "" && ps.s.cfg.PoolMax <= 0 {
		reason = MissDisabled
	}
	if reason != "" {
		if p != nil {
			ps.miss(p, reason)
		}
		return nil, p, reason
	}
	key, err := ps.key(ctx, rt, r, req.Secrets)
	if err != nil {
		ps.s.log.Info("a run cannot use a warm pool", "project", r.ProjectDir, "error", err.Error())
		return nil, p, MissOptions
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, nil, MissDisabled
	}
	p = ps.poolLocked(ident, r, req.Manifest.File, rt)
	if p.key != key {
		if p.key != "" {
			reason = MissStale
			p.stale += len(p.members)
			ps.removeMembersLocked(p)
		}
		p.key, p.resolved = key, r
		p.failures, p.lastError, p.backoff, p.retryAt = 0, "", 0, time.Time{}
	}
	for reason == "" {
		i := slices.IndexFunc(p.members, func(m *member) bool { return m.ready && m.healthy })
		if i < 0 {
			reason = MissEmpty
			if slices.ContainsFunc(p.members, func(m *member) bool { return m.ready && !m.healthy }) {
				reason = MissUnhealthy
			}
			break
		}
		m = p.members[i]
		p.members = slices.Delete(p.members, i, i+1)
		ps.total--
		if m.cancel != nil {
			m.cancel()
		}
		if !rt.Running(ctx, m.sb.PrimaryID) {
			// Never handed out: removed and replaced.
			ps.removeLocked(p, m)
			m = nil
			continue
		}
		p.hits++
		p.lastClaim = time.Now()
		ps.fillLocked(p)
		return m, p, ""
	}
	p.misses[reason]++
	p.resolved = r
	p.lastClaim = time.Now() // the cold start too goes first
	p.cold++
	ps.fillLocked(p)
	return nil, p, reason
}

// coldMiss says whether a miss of take left its run to a cold start the pool
// waits for (coldStarted): the misses counted after a pool's key was checked.
func coldMiss(reason string) bool {
	return reason == MissEmpty || reason == MissStale || reason == MissUnhealthy
}

// coldStarted tells p that a run which missed it (coldMiss) has started its
// sandbox, or failed to: its refill may begin refillDelay later.
func (ps *pools) coldStarted(p *pool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p.cold > 0 {
		p.cold--
	}
	p.lastClaim = time.Now()
	ps.notifyLocked(p)
}

// discard removes a parked sandbox a run took but could not use.
func (ps *pools) discard(p *pool, m *member) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.removeLocked(p, m)
}

// poolLocked returns the pool ident names (made when missing), sized by r's
// [sandbox.pool] and marked used now (ps.mu held).
func (ps *pools) poolLocked(ident string, r *manifest.Resolved, file string, rt backend.Backend) *pool {
	p := ps.byID[ident]
	if p == nil {
		p = &pool{ident: ident, project: r.ProjectDir, file: file, rt: rt, endpoint: rt.Location(),
			misses: map[string]int{}, wake: make(chan struct{})}
		p.idleTTL, _ = time.ParseDuration(manifest.DefaultPoolIdleTTL)
		ps.byID[ident] = p
	}
	if r.Sandbox.Pool != nil {
		p.size = r.Sandbox.Pool.Size
		p.idleTTL, _ = time.ParseDuration(r.Sandbox.Pool.IdleTTL)
	}
	p.lastUsed = time.Now()
	return p
}

// miss counts a miss of p.
func (ps *pools) miss(p *pool, reason string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.misses[reason]++
}

// target is how many sandboxes p should hold.
func (p *pool) target() int { return max(p.size, p.warmSize) }

// fillLocked starts p's filler when it is short and none runs (ps.mu held).
func (ps *pools) fillLocked(p *pool) {
	if p.filling || ps.closed || p.key == "" || len(p.members)+p.inflight >= p.target() {
		return
	}
	p.filling = true
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		ps.fill(p)
	}()
}

// room says whether p may make one more sandbox under runtime.pool_max: a
// refill never takes the last free place, which is kept for a pool that has
// none (ps.mu held).
func (ps *pools) roomLocked(p *pool) bool {
	free := ps.s.cfg.PoolMax - ps.total
	if len(p.members)+p.inflight == 0 {
		return free >= 1
	}
	return free >= 2
}

// fill makes p's sandboxes one at a time until it holds its target, backing
// off after failures.
func (ps *pools) fill(p *pool) {
	for {
		ps.mu.Lock()
		if ps.closed || len(p.members)+p.inflight >= p.target() || !ps.roomLocked(p) || p.key == "" {
			p.filling = false
			ps.notifyLocked(p)
			ps.mu.Unlock()
			return
		}
		if p.cold > 0 && time.Since(p.lastClaim) < coldHoldMax {
			// A run that missed is starting cold: after it (coldStarted).
			wake, until := p.wake, p.lastClaim.Add(coldHoldMax)
			ps.mu.Unlock()
			if !sleepOr(ps.s.ctx, time.Until(until), wake) {
				ps.mu.Lock()
				p.filling = false
				ps.mu.Unlock()
				return
			}
			continue
		}
		if wait := max(time.Until(p.retryAt), time.Until(p.lastClaim.Add(refillDelay))); wait > 0 {
			ps.mu.Unlock()
			if !sleep(ps.s.ctx, wait) {
				ps.mu.Lock()
				p.filling = false
				ps.mu.Unlock()
				return
			}
			continue
		}
		key, r := p.key, p.resolved
		p.inflight++
		ps.total++
		ps.mu.Unlock()

		m, err := ps.make(p, key, r)

		ps.mu.Lock()
		p.inflight--
		switch {
		case err != nil:
			ps.total--
			p.failures++
			p.lastError = err.Error()
			p.backoff = min(max(2*p.backoff, time.Second), poolRetryMax)
			p.retryAt = time.Now().Add(p.backoff)
			ps.s.log.Warn("cannot fill a warm pool", "project", p.project, "error", err.Error(), "retry_in", p.backoff.String())
		case key != p.key || ps.closed:
			// The pool moved on (or closed) while it was made.
			ps.total--
			p.stale++
			ps.removeLocked(p, m)
		default:
			p.backoff, p.retryAt = 0, time.Time{}
			p.members = append(p.members, m)
		}
		ps.notifyLocked(p)
		ps.mu.Unlock()
	}
}

// make creates, starts and parks one sandbox of p.
func (ps *pools) make(p *pool, key string, r *manifest.Resolved) (*member, error) {
	ready, _ := backend.ReadyTimeout(r) // validated when the pool was made
	ctx, cancel := context.WithTimeout(ps.s.ctx, ready+2*time.Minute)
	defer cancel()
	id := ids.New()
	sb, err := p.rt.Create(ctx, &backend.Request{ID: id, Manifest: r, Kind: backend.KindRun, Park: true, PoolKey: key})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*member, error) {
		_ = p.rt.Remove(context.WithoutCancel(ctx), id)
		return nil, err
	}
	if err := p.rt.Start(ctx, sb); err != nil {
		return fail(err)
	}
	m := &member{sb: sb, since: time.Now(), healthy: true}
	parked := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ps.s.ctx)
	m.cancel = wcancel
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		err := p.rt.WatchParked(wctx, sb, func() { parked <- nil })
		if err == nil {
			err = errors.New("its status stream ended")
		}
		select {
		case parked <- err:
		default:
		}
		if wctx.Err() == nil {
			// It became unhealthy while parked: removed, and replaced.
			ps.unhealthy(p, m, err)
		}
	}()
	select {
	case err := <-parked:
		if err != nil {
			wcancel()
			return fail(err)
		}
	case <-ctx.Done():
		wcancel()
		return fail(fmt.Errorf("the pooled sandbox did not park: %w", ctx.Err()))
	}
	m.ready = true
	return m, nil
}

// unhealthy drops a parked member whose health watch ended.
func (ps *pools) unhealthy(p *pool, m *member, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := slices.Index(p.members, m)
	if i < 0 {
		return
	}
	reason := "it stopped"
	if err != nil {
		reason = err.Error()
	}
	ps.s.log.Info("removing an unhealthy parked sandbox", "sandbox", m.sb.ID, "project", p.project, "reason", reason)
	p.failures++
	p.lastError = reason
	ps.removeLocked(p, m)
	ps.fillLocked(p)
}

// removeLocked takes m out of p and removes its objects in the background
// (ps.mu held).
func (ps *pools) removeLocked(p *pool, m *member) {
	if i := slices.Index(p.members, m); i >= 0 {
		p.members = slices.Delete(p.members, i, i+1)
		ps.total--
	}
	if m.cancel != nil {
		m.cancel()
	}
	delete(ps.early, m.sb.ID)
	ps.removals.Add(1)
	go func() {
		defer ps.removals.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ps.s.ctx), 2*time.Minute)
		defer cancel()
		ps.removeRetrying(ctx, p.rt, m.sb.ID)
	}()
}

// removeRetrying removes a pooled sandbox, trying again while the Engine
// fails (a parked one found stopped because the Engine restarts is removed
// while the Engine is still down) until ctx ends: no daemon would remove it
// later (removeLeftovers runs at start only).
func (ps *pools) removeRetrying(ctx context.Context, rt backend.Backend, id string) {
	wait := 250 * time.Millisecond
	for {
		err := rt.Remove(ctx, id)
		if err == nil {
			return
		}
		if !sleep(ctx, wait) {
			ps.s.log.Warn("cannot remove a pooled sandbox", "sandbox", id, "error", err.Error())
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// removeMembersLocked removes every parked sandbox of p (ps.mu held).
func (ps *pools) removeMembersLocked(p *pool) int {
	n := len(p.members)
	for _, m := range slices.Clone(p.members) {
		ps.removeLocked(p, m)
	}
	return n
}

// notifyLocked wakes the waiters of p (ps.mu held).
func (ps *pools) notifyLocked(p *pool) {
	close(p.wake)
	p.wake = make(chan struct{})
}

// drainIdle drains the pools no run used for their idle_ttl (the reaper's tick).
func (ps *pools) drainIdle() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byID {
		if p.idleTTL > 0 && len(p.members) > 0 && time.Since(p.lastUsed) > p.idleTTL {
			ps.s.log.Info("draining an idle warm pool", "project", p.project, "idle_ttl", p.idleTTL.String())
			ps.removeMembersLocked(p)
			p.warmSize = 0
		}
	}
}

// drain removes the parked sandboxes of the pools that match (every pool when
// project is ""), and those being made, waits for their removal, and returns
// how many it removed. The pools stay empty until a run or a warm of their
// manifest sizes them again.
func (ps *pools) drain(ctx context.Context, project string) int {
	return ps.empty(ctx, func(p *pool) bool { return project == "" || p.project == project })
}

// empty drains the pools that match; see drain.
func (ps *pools) empty(ctx context.Context, match func(*pool) bool) int {
	n := 0
	for {
		ps.mu.Lock()
		var busy []chan struct{}
		for _, p := range ps.byID {
			if !match(p) {
				continue
			}
			p.size, p.warmSize = 0, 0
			n += ps.removeMembersLocked(p)
			if p.inflight > 0 {
				busy = append(busy, p.wake)
			}
		}
		ps.mu.Unlock()
		if len(busy) == 0 {
			break
		}
		// A sandbox being made joins its pool when done: removed next round.
		select {
		case <-busy[0]:
		case <-ctx.Done():
			return n
		}
	}
	done := make(chan struct{})
	go func() { ps.removals.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return n
}

// parkedSandbox is a parked sandbox as prune lists it.
type parkedSandbox struct{ ID, Project, Engine string }

// parked lists the parked sandboxes of every pool.
func (ps *pools) parked() []parkedSandbox {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []parkedSandbox
	for _, p := range ps.byID {
		for _, m := range p.members {
			out = append(out, parkedSandbox{m.sb.ID, p.project, p.endpoint.String()})
		}
	}
	return out
}

// close stops filling, removes every parked sandbox and waits for it.
func (ps *pools) close(ctx context.Context) {
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	ps.empty(ctx, func(*pool) bool { return true })
}

// removeLeftovers removes the pooled sandboxes of this daemon's that no pool
// holds and no run claimed: what a daemon that went away left parked.
func (ps *pools) removeLeftovers(ctx context.Context, rt backend.Backend) {
	list, err := rt.List(ctx, map[string]string{backend.LabelKind: backend.KindRun}, true)
	if err != nil {
		return
	}
	for _, in := range list {
		if in.Pool == "" {
			continue
		}
		if _, err := ps.s.store.Get(in.ID); err == nil {
			continue // claimed: a sandbox of the store, handled as such
		}
		ps.s.log.Info("removing a pooled sandbox left by an earlier daemon", "sandbox", in.ID)
		_ = rt.Remove(ctx, in.ID)
	}
}

// PoolStatus describes one pool (airlock pool ls).
type PoolStatus struct {
	Key       string
	Project   string
	File      string
	Engine    string
	Size      int
	Ready     int
	Starting  int
	Hits      int
	Misses    map[string]int
	Stale     int
	Failures  int
	LastError string
	IdleTTL   time.Duration
	LastUsed  time.Time
	Sandboxes []PooledSandbox
}

// PooledSandbox is one parked sandbox.
type PooledSandbox struct {
	ID        string
	Container string
	Ready     bool
	Since     time.Time
}

func (ps *pools) statusLocked(p *pool) PoolStatus {
	st := PoolStatus{Key: p.key, Project: p.project, File: p.file, Engine: p.endpoint.String(), Size: p.target(),
		Starting: p.inflight, Hits: p.hits, Misses: maps.Clone(p.misses), Stale: p.stale, Failures: p.failures,
		LastError: p.lastError, IdleTTL: p.idleTTL, LastUsed: p.lastUsed}
	for _, m := range p.members {
		if m.ready && m.healthy {
			st.Ready++
		}
		st.Sandboxes = append(st.Sandboxes, PooledSandbox{ID: m.sb.ID, Container: m.sb.PrimaryID, Ready: m.ready && m.healthy, Since: m.since})
	}
	return st
}

// Pools lists the daemon's warm pools, and how many sandboxes they hold
// together against runtime.pool_max.
func (s *Service) Pools() (list []PoolStatus, total, max int) {
	ps := s.pools
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byID {
		list = append(list, ps.statusLocked(p))
	}
	slices.SortFunc(list, func(a, b PoolStatus) int { return strings.Compare(a.Project+a.File, b.Project+b.File) })
	return list, ps.total, s.cfg.PoolMax
}

// WarmRequest fills the pool of a manifest now (airlock pool warm).
type WarmRequest struct {
	Manifest *manifest.Wire
	Secrets  map[string]string
	// Text is the manifest given as text instead (resolved as a create's:
	// resolveText); not with Manifest.
	Text   *ManifestText
	Engine *engine.Endpoint
	Size   int // 0: the manifest's sandbox.pool.size
}

// WarmPool fills the pool of a manifest to its size (or req.Size) and waits
// until that many sandboxes are parked, or the pool cannot fill.
func (s *Service) WarmPool(ctx context.Context, req *WarmRequest) (PoolStatus, error) {
	if req.Text != nil {
		if req.Manifest != nil {
			return PoolStatus{}, errorf(ErrInvalidRequest, "give a resolved manifest or a manifest text, not both")
		}
		w, values, err := s.resolveText(req.Text)
		if err != nil {
			return PoolStatus{}, err
		}
		r := *req
		r.Manifest, r.Secrets, r.Text = w, values, nil
		req = &r
	}
	if req.Manifest == nil {
		return PoolStatus{}, errorf(ErrInvalidRequest, "a manifest is required")
	}
	r, err := fromWire(*req.Manifest, req.Secrets)
	if err != nil {
		return PoolStatus{}, err
	}
	size := req.Size
	if size == 0 && r.Sandbox.Pool != nil {
		size = r.Sandbox.Pool.Size
	}
	if size <= 0 {
		return PoolStatus{}, errorf(ErrConfig, "the manifest has no [sandbox.pool] size: set one, or give a size")
	}
	if size > s.cfg.PoolMax {
		return PoolStatus{}, errorf(ErrConfig, "a pool of %d is more than runtime.pool_max (%d) of config.toml allows", size, s.cfg.PoolMax)
	}
	cr := &CreateRequest{Kind: backend.KindRun, Manifest: req.Manifest, Secrets: req.Secrets, Engine: req.Engine}
	ps := s.pools
	rt := s.rt
	if req.Engine != nil {
		rt = s.runtimeFor(*req.Engine)
	}
	key, err := ps.key(ctx, rt, r, req.Secrets)
	if err != nil {
		return PoolStatus{}, errorf(ErrConfig, "cannot pool this manifest: %v", err)
	}
	ident := poolIdent(rt.Location(), r, cr.Manifest.File)
	ps.mu.Lock()
	p := ps.poolLocked(ident, r, cr.Manifest.File, rt)
	p.warmSize = size
	if p.key != key {
		p.stale += len(p.members)
		ps.removeMembersLocked(p)
		p.key = key
	}
	p.resolved = r
	p.failures, p.lastError, p.backoff, p.retryAt = 0, "", 0, time.Time{}
	ps.fillLocked(p)
	for {
		ready := 0
		for _, m := range p.members {
			if m.ready && m.healthy {
				ready++
			}
		}
		st := ps.statusLocked(p)
		switch {
		case ready >= size:
			ps.mu.Unlock()
			return st, nil
		case p.failures > 0 && !p.filling:
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool: %s", p.lastError)
		case !p.filling && len(p.members)+p.inflight < size:
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool to %d: runtime.pool_max (%d) is taken by other pools", size, s.cfg.PoolMax)
		}
		if p.failures > 0 && p.lastError != "" {
			ps.mu.Unlock()
			return st, fmt.Errorf("cannot fill the pool: %s", p.lastError)
		}
		wake := p.wake
		ps.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return st, ctx.Err()
		}
		ps.mu.Lock()
	}
}

// DrainPools removes the parked sandboxes of one project's pools (every pool
// when project is "") and returns how many.
func (s *Service) DrainPools(ctx context.Context, project string) int {
	return s.pools.drain(ctx, project)
}
