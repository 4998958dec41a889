package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/sandbox"
	"github.com/airlock-dev/airlock/secrets"
)

// Config are the daemon's settings from the user's config.toml (DESIGN §8).
type Config struct {
	IdleTTL            time.Duration
	EventRetentionTTL  time.Duration
	ExecOutputRoot     string
	ExecOutputTemplate string // "{sandbox_id}/{exec_id}"
	// ReapInterval is how often the reaper looks (default 2 s).
	ReapInterval time.Duration
	// Redactor masks the secret values the daemon holds in its log and in event
	// reasons; nil for a new one.
	Redactor *secrets.Redactor
	// OpenEngine returns a runtime for another Engine than the daemon's own (a
	// sandbox created with DOCKER_HOST or a docker context); nil serves only its own.
	OpenEngine func(engine.Endpoint) (*sandbox.Runtime, error)
}

// Service runs the daemon's operations: every Docker lifecycle call goes through
// it, and every transition is an event in the store before it is visible.
type Service struct {
	store *store.Store
	rt    *sandbox.Runtime
	cfg   Config
	log   *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	live     map[string]*live // sandboxes with work or watchers in this daemon
	attached map[string]int
	active   map[string]time.Time        // last time a client or exec used a sandbox
	engines  map[string]*sandbox.Runtime // other Engines than rt's, by endpoint key
}

// live is what the daemon holds in memory for a sandbox: never persisted.
type live struct {
	mu       sync.Mutex // serialises lifecycle operations of one sandbox
	resolved *manifest.Resolved
	handle   *sandbox.Sandbox
	stopping string // reason of a requested stop or delete (guarded by Service.mu)
	oom      bool   // the Engine reported an OOM kill (guarded by Service.mu)
	execs    int
	secrets  []string // the substituted values this sandbox holds (redacted from logs)
	deleting bool     // a removal is in progress (guarded by Service.mu)

	cancelOp context.CancelFunc // cancels the create or start in progress (guarded by Service.mu)

	ingestMu sync.Mutex    // guards offset and tailGen
	offset   int64         // the status stream read so far
	offsetOK bool          // offset is known (else it comes from the recorded events)
	starting bool          // a start is in progress: the stream is read only once it is recorded
	diedMu   sync.Mutex    // serialises the handling of the primary's end
	complete bool          // the stream was read to its last line (supervisor.exiting)
	limiter  *rate.Limiter // bounds how fast the stream's lines become events

	netRemoval chan struct{}   // closed when an early removal of the network ended (guarded by Service.mu)
	up         map[string]bool // daemons up since the last start; nil until known (guarded by Service.mu)
	steps      []string        // "step=ms" of the runtime's work since the last report (guarded by Service.mu)

	removeOnExit bool // delete the sandbox when its primary exits (guarded by Service.mu)

	egress          map[string]*egressCount // denied destinations (guarded by Service.mu)
	egressFollowing bool                    // a follower reads the proxy's denials (guarded by Service.mu)
	tailGen         int                     // the follower that owns the stream; older ones stop
}

// NewService returns a service over an open store and a runtime.
func NewService(st *store.Store, rt *sandbox.Runtime, cfg Config) *Service {
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 2 * time.Second
	}
	if cfg.Redactor == nil {
		cfg.Redactor = secrets.NewRedactor()
	}
	if cfg.ExecOutputTemplate == "" {
		cfg.ExecOutputTemplate = "{sandbox_id}/{exec_id}"
	}
	if cfg.ExecOutputRoot == "" && rt != nil && rt.Paths != nil {
		// The default of artifacts.exec_output_root (DESIGN §2); a relative root
		// would put the output in the daemon's working directory.
		cfg.ExecOutputRoot = filepath.Join(rt.Paths.DataDir, "exec-output")
	}
	s := &Service{store: st, rt: rt, cfg: cfg, log: slog.New(slog.DiscardHandler),
		live: map[string]*live{}, attached: map[string]int{}, active: map[string]time.Time{}, engines: map[string]*sandbox.Runtime{}}
	rt.OnService = func(id, service string, ready bool, detail string) {
		if ready {
			s.emit(id, store.Event{Kind: "service.ready", Service: service}, "")
		} else {
			s.emit(id, store.Event{Kind: "service.failed", Service: service, Reason: detail}, "")
		}
	}
	rt.OnStep = s.recordStep
	return s
}

func (s *Service) start(ctx context.Context) error {
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.recover()
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.watchEngine(s.rt) }()
	go func() { defer s.wg.Done(); s.reap() }()
	return nil
}

func (s *Service) stop() {
	s.cancel()
	s.wg.Wait()
	_ = s.store.Close()
}

func (s *Service) liveOf(id string) *live {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.live[id]
	if !ok {
		l = &live{}
		s.live[id] = l
	}
	return l
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

// beginOp returns the context of a create or start of l, which stop and delete
// can cancel (they would otherwise wait for it, e.g. for a service's ready_timeout).
func (s *Service) beginOp(l *live) context.Context {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	l.cancelOp = cancel
	s.mu.Unlock()
	return ctx
}

// interrupt cancels the create or start of l in progress, if any.
func (s *Service) interrupt(l *live) {
	s.mu.Lock()
	if l.cancelOp != nil {
		l.cancelOp()
	}
	s.mu.Unlock()
}

// setFlags changes l.stopping and l.oom, which the Engine watcher reads; both are
// guarded by s.mu.
func (s *Service) setFlags(l *live, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *Service) touch(id string) {
	s.mu.Lock()
	s.active[id] = time.Now()
	s.mu.Unlock()
}

// apiError maps store and runtime errors to API errors with stable reasons.
func apiError(err error) error {
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, store.ErrNotFound):
		return &client.Error{Reason: client.ReasonSandboxNotFound, Message: err.Error()}
	case errors.Is(err, store.ErrExecNotFound):
		return &client.Error{Reason: client.ReasonExecNotFound, Message: err.Error()}
	case errors.Is(err, store.ErrIDUsed):
		return &client.Error{Reason: client.ReasonIDAlreadyUsed, Message: err.Error()}
	case errors.Is(err, store.ErrInvalidID):
		return &client.Error{Reason: client.ReasonInvalidID, Message: err.Error()}
	case errors.Is(err, store.ErrInvalidState):
		return &client.Error{Reason: client.ReasonInvalidState, Message: err.Error()}
	case errors.Is(err, store.ErrBadCursor):
		return &client.Error{Reason: client.ReasonBadCursor, Message: err.Error()}
	}
	var se *sandbox.Error
	if errors.As(err, &se) && se.Code == 2 {
		return &client.Error{Reason: client.ReasonConfig, Message: err.Error()}
	}
	return &client.Error{Status: http.StatusInternalServerError, Reason: client.ReasonInternal, Message: err.Error()}
}

// record turns a store record into the API's view.
func (s *Service) record(sb store.Sandbox) *client.Sandbox {
	out := &client.Sandbox{ID: sb.ID, State: sb.State, Kind: sb.Kind, Project: sb.Project, Labels: sb.Labels,
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, Reason: sb.Reason, LastSeq: sb.LastSeq, Container: sb.ContainerID}
	ep := s.endpointOf(sb)
	ce := client.Engine(ep)
	out.Engine = &ce
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	var plan manifest.Manifest
	if json.Unmarshal(sb.Plan, &plan) == nil {
		out.Daemons.Total = len(plan.Daemons)
		out.DaemonNames = slices.Sorted(maps.Keys(plan.Daemons))
	}
	if sb.State == store.StateReady {
		out.Daemons.Up = s.daemonsUp(sb.ID, out.Daemons.Total)
	}
	if (sb.State == store.StateReady || sb.State == store.StatePending) && len(sb.Ports) > 0 {
		_ = json.Unmarshal(sb.Ports, &out.Ports)
	}
	return out
}

// recordPorts keeps the ports the Engine bound at a start with the sandbox's
// record, for ps (a random host port is known only then).
func (s *Service) recordPorts(id string, ports []sandbox.Port) {
	out := make([]client.Port, 0, len(ports))
	for _, p := range ports {
		out = append(out, client.Port(p))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return
	}
	if _, err := s.store.Update(id, func(r *store.Sandbox) error { r.Ports = b; return nil }); err != nil {
		s.log.Warn("cannot record the published ports", "sandbox", id, "error", err.Error())
	}
}

func toClientEvent(e store.Event) client.Event {
	return client.Event{SandboxID: e.SandboxID, Sequence: e.Sequence, Kind: e.Kind, Time: e.Time, State: e.State,
		Daemon: e.Daemon, Service: e.Service, ExecID: e.ExecID, Reason: e.Reason, Signal: e.Signal,
		ExitCode: e.ExitCode, Attempt: e.Attempt, DelayMS: e.DelayMS, PID: e.PID, Extra: e.Extra}
}

// emit appends an event, logging a failure (the sandbox may have been purged).
func (s *Service) emit(id string, ev store.Event, state string) (store.Event, error) {
	ev.Reason = string(s.cfg.Redactor.Redact([]byte(ev.Reason)))
	ev, err := s.store.Append(id, ev, state)
	if err != nil {
		s.log.Warn("cannot record event", "sandbox", id, "kind", ev.Kind, "error", err.Error())
		return ev, err
	}
	s.log.Info("event", "sandbox", id, "sequence", ev.Sequence, "kind", ev.Kind, "state", ev.State, "reason", ev.Reason)
	return ev, nil
}

// Create accepts a sandbox: its ID is reserved and the pending record and the
// sandbox.accepted event are written before the call returns; the Docker work
// continues in the background.
func (s *Service) Create(_ context.Context, req *client.CreateRequest) (*client.Sandbox, error) {
	resolved, err := checkCreate(req)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range req.Labels {
		labels[k] = v
	}
	var eng json.RawMessage
	if req.Engine != nil {
		eng, _ = json.Marshal(req.Engine)
	}
	rec, _, err := s.store.CreateSandbox(store.Sandbox{
		ID: req.ID, Kind: req.Kind, Project: req.Manifest.ProjectDir, Labels: labels, Engine: eng,
		Plan: req.Manifest.Resolved, Sources: req.Manifest.Sources, CLIPid: req.CLIPid, CLIStart: req.CLIStart,
	}, store.Event{Kind: "sandbox.accepted"})
	if err != nil {
		return nil, apiError(err)
	}
	l := s.liveOf(rec.ID)
	l.resolved = resolved
	s.setFlags(l, func() { l.removeOnExit = req.RemoveOnExit })
	held := maps.Clone(req.Secrets)
	if held == nil {
		held = map[string]string{}
	}
	for k, v := range req.EnvSecrets {
		held["run.env."+k] = v
	}
	s.holdSecrets(l, held)
	s.touch(rec.ID)
	sreq := &sandbox.Request{ID: rec.ID, Manifest: resolved, Kind: req.Kind, Command: req.Command, Env: req.Env, EnvSecrets: req.EnvSecrets,
		Workdir: req.Workdir, TTY: req.TTY, Stdin: req.Stdin, Labels: labels, Quiet: req.Quiet, CLIPid: req.CLIPid, CLIStart: req.CLIStart}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.prepare(rec.ID, sreq, req.Start)
	}()
	return s.record(rec), nil
}

func (s *Service) prepare(id string, req *sandbox.Request, start bool) {
	l := s.liveOf(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	s.emit(id, store.Event{Kind: "sandbox.preparing"}, "")
	ctx := s.beginOp(l)
	sb, err := s.rtOf(id).Create(ctx, req)
	if err != nil {
		s.emit(id, store.Event{Kind: "sandbox.failed", Reason: err.Error(), Extra: exitExtra(err)}, store.StateFailed)
		return
	}
	l.handle = sb
	_, _ = s.store.Update(id, func(r *store.Sandbox) error { r.ContainerID = sb.PrimaryID; return nil })
	s.emit(id, store.Event{Kind: "sandbox.created", Extra: map[string]string{"container": sb.PrimaryID}}, "")
	if start {
		s.startLocked(ctx, id, l)
	}
}

// exitExtra carries the exit code a runtime error maps to (2 or 125), and
// port_in_use (host:port) for a start that failed on a taken host port.
func exitExtra(err error) map[string]string {
	extra := map[string]string{"exit_code": "125"}
	var se *sandbox.Error
	if errors.As(err, &se) {
		extra["exit_code"] = fmt.Sprint(se.Code)
	}
	// A start that failed on a taken host port: the CLI removes the sandbox
	// it made for it (nothing of it ran).
	var pe *sandbox.PortInUseError
	if errors.As(err, &pe) {
		extra["port_in_use"] = pe.Addr
		if pe.Addr == "" {
			extra["port_in_use"] = "unknown"
		}
	}
	return extra
}

// startLocked starts the sandbox; l.mu is held.
func (s *Service) startLocked(ctx context.Context, id string, l *live) {
	if l.handle == nil {
		h, err := s.rtOf(id).Open(ctx, id, l.resolved)
		if err != nil {
			s.emit(id, store.Event{Kind: "sandbox.failed", Reason: err.Error()}, store.StateFailed)
			return
		}
		l.handle = h
	}
	s.setFlags(l, func() { l.stopping, l.oom = "", false })
	// The status stream is ingested only once sandbox.started is recorded, so the
	// supervisor's daemon.* events never come before it; the runtime empties the
	// stream before every start, so the previous run's lines are never read again.
	l.ingestMu.Lock()
	l.tailGen++ // a follower of the previous run stops
	l.offset, l.offsetOK, l.starting, l.complete = 0, true, true, false
	l.ingestMu.Unlock()
	s.setFlags(l, func() { l.up = map[string]bool{} })
	err := s.rtOf(id).Start(ctx, l.handle)
	l.ingestMu.Lock()
	l.starting = false
	if err != nil {
		l.ingestMu.Unlock()
		s.emit(id, store.Event{Kind: "sandbox.failed", Reason: err.Error(), Extra: exitExtra(err)}, store.StateFailed)
		return
	}
	if len(l.handle.Ports) > 0 || (l.resolved != nil && len(l.resolved.Sandbox.Ports) > 0) {
		s.recordPorts(id, l.handle.Ports)
	}
	s.emit(id, store.Event{Kind: "sandbox.started", Extra: s.takeSteps(l)}, "")
	gen := l.tailGen
	l.ingestMu.Unlock()
	s.spawnFollower(id, l, gen)
	if sandbox.HasEgress(l.resolved) {
		s.followEgress(id, l)
	}
}

// Get returns a sandbox record.
func (s *Service) Get(id string) (*client.Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	return s.record(rec), nil
}

// List returns the sandboxes with every label, deleted ones left out.
func (s *Service) List(labels map[string]string) ([]client.Sandbox, error) {
	recs, err := s.store.List(store.Filter{Labels: labels})
	if err != nil {
		return nil, apiError(err)
	}
	out := make([]client.Sandbox, 0, len(recs))
	for _, r := range recs {
		out = append(out, *s.record(r))
	}
	return out, nil
}

// Stop stops a sandbox; reason is "" for a user's request.
func (s *Service) Stop(id, reason string) (*client.Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	if rec.State == store.StateStopped {
		return s.record(rec), nil
	}
	if rec.State != store.StateReady && rec.State != store.StatePending {
		return nil, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s", id, rec.State)}
	}
	if reason == "" {
		reason = "stopped"
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		l := s.liveOf(id)
		s.interrupt(l)
		l.mu.Lock()
		defer l.mu.Unlock()
		s.setFlags(l, func() { l.stopping = reason })
		if err := s.rtOf(id).Stop(s.ctx, id); err != nil {
			s.log.Warn("cannot stop", "sandbox", id, "error", err.Error())
		}
		s.markStopped(id, reason, nil)
	}()
	return s.record(rec), nil
}

// markStopped records sandbox.stopped once, whichever of the stop request and
// the Engine's die event comes first.
func (s *Service) markStopped(id, reason string, exitCode *int) {
	rec, err := s.store.Get(id)
	if err != nil || (rec.State != store.StateReady && rec.State != store.StatePending) {
		return
	}
	s.flushEgress(id, s.liveOf(id))
	s.emit(id, store.Event{Kind: "sandbox.stopped", Reason: reason, ExitCode: exitCode}, store.StateStopped)
}

// Resume starts a created, stopped or failed sandbox.
func (s *Service) Resume(id string, req *client.ResumeRequest) (*client.Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	switch rec.State {
	case store.StatePending, store.StateStopped, store.StateFailed:
	default:
		return nil, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s", id, rec.State)}
	}
	if rec.State == store.StatePending && rec.ContainerID != "" && s.rtOf(id).Running(s.ctx, rec.ContainerID) {
		// Started already (by a daemon that went away before recording it):
		// its stream is followed; starting it again would break it.
		return s.record(rec), nil
	}
	l := s.liveOf(id)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.resolved == nil {
			var m manifest.Manifest
			_ = json.Unmarshal(rec.Plan, &m)
			// A daemon that restarted knows the plan and which of its values were
			// substituted, not the values: the caller resends them (airlock up does).
			l.resolved = manifest.Restore(m, filepath.Join(rec.Project, manifest.FileName), rec.Project, toSources(rec.Sources), nil)
		}
		if req != nil && len(req.Secrets) > 0 {
			s.holdSecrets(l, req.Secrets)
			l.resolved = manifest.Restore(l.resolved.Manifest, l.resolved.File, l.resolved.ProjectDir, l.resolved.Sources, req.Secrets)
			l.handle = nil // reopen with the values just given
		}
		if rec.State != store.StatePending {
			l.handle = nil // reopen: the Engine knows best what ran before
		}
		s.startLocked(s.beginOp(l), id, l)
	}()
	return s.record(rec), nil
}

// Delete stops and removes a sandbox: deleting, then deleted.
func (s *Service) Delete(id string) (*client.Sandbox, error) {
	return s.delete(id, "")
}

func (s *Service) delete(id, reason string) (*client.Sandbox, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	if rec.State == store.StateDeleted || rec.State == store.StateDeleting {
		return s.record(rec), nil
	}
	l := s.liveOf(id)
	if rec.ContainerID != "" {
		// A stopped sandbox without services has nothing on its network: the
		// network goes while the stream is read and the containers removed.
		rt := s.rtOf(id)
		var plan manifest.Manifest
		if json.Unmarshal(rec.Plan, &plan) == nil && len(plan.Services) == 0 && !rt.Running(s.ctx, rec.ContainerID) {
			done := make(chan struct{})
			s.setFlags(l, func() { l.netRemoval = done })
			go func() { defer close(done); _ = rt.RemoveNetworks(s.ctx, id) }()
		}
		// What the supervisor reported so far comes before the deletion.
		s.catchUp(id, l)
	}
	ev, err := s.emit(id, store.Event{Kind: "sandbox.deleting", Reason: reason}, store.StateDeleting)
	if err != nil {
		return nil, apiError(err)
	}
	rec.State, rec.LastSeq = ev.State, ev.Sequence
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.finishDelete(id, reason)
	}()
	return s.record(rec), nil
}

func (s *Service) finishDelete(id, reason string) {
	l := s.liveOf(id)
	s.mu.Lock()
	if l.deleting {
		s.mu.Unlock()
		return
	}
	l.deleting = true
	s.mu.Unlock()
	defer s.setFlags(l, func() { l.deleting = false })
	s.interrupt(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	s.setFlags(l, func() { l.stopping = "deleted" })
	// A removal can race the Engine's own work (a create being undone, a
	// container still stopping): try again a few times before leaving it to the
	// reaper, which retries sandboxes stuck in deleting.
	var err error
	removeStart := time.Now()
	s.mu.Lock()
	early := l.netRemoval
	l.netRemoval = nil
	s.mu.Unlock()
	if early != nil {
		// The network is being removed already: the containers first, then
		// whatever is left.
		_ = s.rtOf(id).RemoveContainers(s.ctx, id)
		<-early
	}
	for attempt := 1; attempt <= 5; attempt++ {
		if err = s.rtOf(id).Remove(s.ctx, id); err == nil {
			break
		}
		s.log.Warn("cannot remove", "sandbox", id, "attempt", attempt, "error", err.Error())
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	if err != nil {
		return
	}
	s.flushEgress(id, l)
	s.recordStep(id, "remove", time.Since(removeStart))
	s.emit(id, store.Event{Kind: "sandbox.deleted", Reason: reason, Extra: s.takeSteps(l)}, store.StateDeleted)
	s.holdSecrets(l, nil)
	s.mu.Lock()
	delete(s.live, id)
	delete(s.active, id)
	s.mu.Unlock()
}

// Subscribe returns the events after from and, with follow, the live ones.
func (s *Service) Subscribe(id string, from uint64, follow bool) ([]client.Event, <-chan client.Event, func(), error) {
	if !follow {
		evs, err := s.store.Events(id, from)
		if err != nil {
			return nil, nil, nil, apiError(err)
		}
		out := make([]client.Event, len(evs))
		for i, e := range evs {
			out[i] = toClientEvent(e)
		}
		return out, nil, func() {}, nil
	}
	backlog, live, cancel, err := s.store.Subscribe(id, from)
	if err != nil {
		return nil, nil, nil, apiError(err)
	}
	out := make([]client.Event, len(backlog))
	for i, e := range backlog {
		out[i] = toClientEvent(e)
	}
	ch := make(chan client.Event, 16)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case e, ok := <-live:
				if !ok {
					return
				}
				select {
				case ch <- toClientEvent(e):
				case <-done:
					return
				}
			case <-done:
				return
			case <-s.ctx.Done():
				return
			}
		}
	}()
	var once sync.Once
	return out, ch, func() { once.Do(func() { close(done); cancel() }) }, nil
}

// Attach counts a client attached to a sandbox until release is called.
func (s *Service) Attach(id string) (func(), error) {
	if _, err := s.store.Get(id); err != nil {
		return nil, apiError(err)
	}
	s.mu.Lock()
	s.attached[id]++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.attached[id]--
		s.active[id] = time.Now()
		s.mu.Unlock()
	}, nil
}

// execPaths returns the output files of an exec (DESIGN §2).
func (s *Service) execPaths(id, execID string) (string, string) {
	rel := strings.NewReplacer("{sandbox_id}", id, "{exec_id}", execID).Replace(s.cfg.ExecOutputTemplate)
	base := filepath.Join(s.cfg.ExecOutputRoot, rel)
	return base + ".stdout.log", base + ".stderr.log"
}

// Exec runs a command in a ready sandbox with its output in files; with
// req.ID set by the CLI for an interactive exec, see RecordExec instead.
func (s *Service) Exec(id string, req *client.ExecRequest) (*client.Exec, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	if rec.State != store.StateReady {
		return nil, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s, not ready", id, rec.State)}
	}
	if len(req.Cmd) == 0 {
		return nil, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cmd is required"}
	}
	execID := req.ID
	if execID == "" {
		execID = store.NewID()
	}
	stdoutPath, stderrPath := s.execPaths(id, execID)
	ex, err := s.store.CreateExec(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now(), StdoutPath: stdoutPath, StderrPath: stderrPath})
	if err != nil {
		return nil, apiError(err)
	}
	s.emit(id, store.Event{Kind: "exec.started", ExecID: execID}, "")
	l := s.liveOf(id)
	s.mu.Lock()
	l.execs++
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		code := s.runExec(id, l, req, stdoutPath, stderrPath)
		if code == execAbandoned {
			// The daemon stops: the command may go on in the sandbox, but
			// nobody collects its output or code any more. Say so.
			_, _ = s.store.FinishExec(id, execID, code, time.Now())
			s.emit(id, store.Event{Kind: "exec.finished", ExecID: execID, Reason: "daemon_stopped: the daemon stopped while the command ran; its output after that and its exit code were not collected"}, "")
		} else {
			_, _ = s.store.FinishExec(id, execID, code, time.Now())
			s.emit(id, store.Event{Kind: "exec.finished", ExecID: execID, ExitCode: &code}, "")
		}
		s.mu.Lock()
		l.execs--
		s.active[id] = time.Now()
		s.mu.Unlock()
	}()
	return toClientExec(ex), nil
}

func (s *Service) runExec(id string, l *live, req *client.ExecRequest, stdoutPath, stderrPath string) int {
	if err := os.MkdirAll(filepath.Dir(stdoutPath), 0o700); err != nil {
		return 125
	}
	outf, err := os.OpenFile(stdoutPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 125
	}
	defer outf.Close()
	errf, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 125
	}
	defer errf.Close()
	h := l.handle
	if h == nil {
		if h, err = s.rtOf(id).Open(s.ctx, id, l.resolved); err != nil {
			fmt.Fprintln(errf, "airlock:", err)
			return 125
		}
	}
	ex, err := s.rtOf(id).Exec(s.ctx, h, sandbox.ExecRequest{Cmd: req.Cmd, Env: req.Env, Workdir: req.Workdir}, sandbox.Streams{Stdout: outf, Stderr: errf})
	if err != nil {
		fmt.Fprintln(errf, "airlock:", err)
		return 125
	}
	select {
	case <-ex.Done:
	case <-s.ctx.Done():
		// Shutdown must not wait for a command that may run for hours (an
		// upgrade would SIGKILL the daemon after 5 s and record nothing).
		return execAbandoned
	}
	for i := 0; i < 500; i++ {
		code, err := ex.ExitCode(s.ctx)
		if err == nil {
			return code
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 125
}

// execAbandoned is runExec's answer when the daemon stopped before the exec ended.
const execAbandoned = -1

// RecordExec records an exec the CLI runs itself (airlock exec streams straight to
// the Engine): exec.started now, exec.finished when FinishExec is called.
func (s *Service) RecordExec(id string, req *client.ExecRequest) (*client.Exec, error) {
	rec, err := s.store.Get(id)
	if err != nil {
		return nil, apiError(err)
	}
	if rec.State != store.StateReady {
		return nil, &client.Error{Reason: client.ReasonInvalidState, Message: fmt.Sprintf("sandbox %s is %s, not ready", id, rec.State)}
	}
	execID := req.ID
	if execID == "" {
		execID = store.NewID()
	}
	ex, err := s.store.CreateExec(store.Exec{ID: execID, SandboxID: id, Cmd: req.Cmd, StartedAt: time.Now()})
	if err != nil {
		return nil, apiError(err)
	}
	s.emit(id, store.Event{Kind: "exec.started", ExecID: execID}, "")
	s.mu.Lock()
	s.liveOf0(id).execs++
	s.mu.Unlock()
	return toClientExec(ex), nil
}

// liveOf0 is liveOf with s.mu held.
func (s *Service) liveOf0(id string) *live {
	l, ok := s.live[id]
	if !ok {
		l = &live{}
		s.live[id] = l
	}
	return l
}

// FinishExec records the end of an exec the CLI ran.
func (s *Service) FinishExec(id, execID string, code int) (*client.Exec, error) {
	ex, err := s.store.FinishExec(id, execID, code, time.Now())
	if err != nil {
		return nil, apiError(err)
	}
	s.emit(id, store.Event{Kind: "exec.finished", ExecID: execID, ExitCode: &code}, "")
	s.mu.Lock()
	if l := s.liveOf0(id); l.execs > 0 {
		l.execs--
	}
	s.active[id] = time.Now()
	s.mu.Unlock()
	return toClientExec(ex), nil
}

// GetExec returns an exec record.
func (s *Service) GetExec(id, execID string) (*client.Exec, error) {
	ex, err := s.store.GetExec(id, execID)
	if err != nil {
		return nil, apiError(err)
	}
	return toClientExec(ex), nil
}

func toClientExec(e store.Exec) *client.Exec {
	out := &client.Exec{ID: e.ID, SandboxID: e.SandboxID, Cmd: e.Cmd, StartedAt: e.StartedAt, ExitCode: e.ExitCode, Stdout: e.StdoutPath, Stderr: e.StderrPath}
	if !e.FinishedAt.IsZero() {
		t := e.FinishedAt
		out.FinishedAt = &t
	}
	return out
}

// toSources reads the wire form of a manifest's Sources.
func toSources(in map[string]string) map[string]manifest.Source {
	out := map[string]manifest.Source{}
	for k, v := range in {
		switch v {
		case "host":
			out[k] = manifest.Host
		case "vault":
			out[k] = manifest.Vault
		}
	}
	return out
}

// recordStep keeps the duration of one step of a sandbox's runtime work; the next
// sandbox.started or sandbox.deleted event carries them (extra "steps_ms"), so a
// run's breakdown is in its history (airlock run --log-level debug, make bench).
func (s *Service) recordStep(id, step string, d time.Duration) {
	l := s.liveOf(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	l.steps = append(l.steps, fmt.Sprintf("%s=%d", step, d.Milliseconds()))
}

// takeSteps returns the steps recorded since the last call, as event extras.
func (s *Service) takeSteps(l *live) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(l.steps) == 0 {
		return nil
	}
	out := map[string]string{"steps_ms": strings.Join(l.steps, ",")}
	l.steps = nil
	return out
}

// checkCreate checks a create request at the API boundary: its kind, and its
// manifest decoded strictly and validated with the rules of `airlock validate`,
// before anything is reserved or created. Errors are API errors (400).
func checkCreate(req *client.CreateRequest) (*manifest.Resolved, error) {
	if req.Manifest == nil {
		return nil, &client.Error{Reason: client.ReasonInvalidRequest, Message: "a manifest is required"}
	}
	if req.Kind != sandbox.KindRun && req.Kind != sandbox.KindUp {
		return nil, &client.Error{Reason: client.ReasonInvalidRequest, Message: fmt.Sprintf("kind must be %q or %q", sandbox.KindRun, sandbox.KindUp)}
	}
	m, err := manifest.DecodeJSON(req.Manifest.Resolved)
	if err != nil {
		return nil, &client.Error{Reason: client.ReasonInvalidRequest, Message: "cannot decode the manifest: " + err.Error()}
	}
	resolved := manifest.Restore(m, req.Manifest.File, req.Manifest.ProjectDir, toSources(req.Manifest.Sources), req.Secrets)
	if err := resolved.Validate(); err != nil {
		return nil, &client.Error{Reason: client.ReasonConfig, Message: err.Error()}
	}
	return resolved, nil
}
