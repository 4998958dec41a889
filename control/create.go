package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/pool"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
)

// CreateRequest asks for a new sandbox (the API's create request, decoded).
type CreateRequest struct {
	ID   string
	Kind string // backend.KindRun or backend.KindUp
	// Manifest is the resolved manifest with its substituted values masked;
	// Secrets those values by key path, held in memory only. Text is a
	// manifest to resolve instead (ManifestText).
	Manifest *manifest.Wire
	Text     *ManifestText
	Secrets  map[string]string
	Command  []string
	Env      []string
	// EnvSecrets are -e NAME values from the caller's environment: they reach
	// the main command like substituted values, held in memory only.
	EnvSecrets map[string]string
	Workdir    string
	TTY        bool
	Stdin      bool
	Labels     map[string]string
	Quiet      bool
	// RemoveOnExit deletes the sandbox as soon as its primary exited.
	RemoveOnExit bool
	// FastEnd, for a run, ends an attach to its main command once the
	// command exited and the daemons that stop within 20 ms did, while the
	// others shut down in the background (the supervisor marks the end of the
	// output: backend.Request.EndMarker).
	FastEnd bool
	// Engine is the Docker Engine to create the sandbox on; nil for the daemon's own.
	Engine *engine.Endpoint
	// Start starts the sandbox once created; else it waits, pending, for Resume.
	Start bool
	// CLIPid and CLIStart identify the CLI process that owns a run sandbox.
	CLIPid   int
	CLIStart string
	// ClientFiles: the project and [copies] sources are on the client's
	// machine; it writes them through the files API before Resume
	// (backend.Request.ClientFiles).
	ClientFiles bool
	// ToolEnv: the caller's environment for the tools (backend.Request.ToolEnv).
	ToolEnv map[string]string
	// NoPool: a run that must start cold although its manifest has a warm
	// pool (run --no-pool).
	NoPool bool
	// Lifetime is the sandbox's deadline and idle timeout (lifetime.go).
	Lifetime LifetimeRequest
	// FromSnapshot makes the sandbox of a snapshot instead of a manifest
	// (snapshot.go).
	FromSnapshot string
	// fromSnapshot: Manifest is a snapshot's (backend.Request.FromSnapshot).
	fromSnapshot bool
}

// Create accepts a sandbox: its ID is reserved and the pending record and the
// sandbox.accepted event are written before the call returns; the Docker work
// continues in the background.
func (s *Service) Create(ctx context.Context, req *CreateRequest) (Sandbox, error) {
	if req.FromSnapshot != "" {
		r, err := s.fromSnapshot(ctx, req)
		if err != nil {
			return Sandbox{}, err
		}
		req = r
	}
	if req.Text != nil {
		if req.Manifest != nil {
			return Sandbox{}, errorf(ErrInvalidRequest, "give a resolved manifest or a manifest text, not both")
		}
		w, values, err := s.resolveText(req.Text)
		if err != nil {
			return Sandbox{}, err
		}
		r := *req
		r.Manifest, r.Secrets, r.Text = w, values, nil
		req = &r
	}
	resolved, err := checkCreate(req)
	if err != nil {
		return Sandbox{}, err
	}
	if req.Lifetime.OnIdle == expirePause {
		if err := s.canPauseOn(req.Engine, req.ID); err != nil {
			return Sandbox{}, err
		}
	}
	labels := maps.Clone(req.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	var eng []byte
	if req.Engine != nil {
		eng, _ = json.Marshal(req.Engine)
	}
	var endMarker string
	if req.FastEnd && req.Kind == backend.KindRun {
		endMarker = nonce()
	}
	// A create of a manifest with a warm pool takes a parked sandbox: its ID
	// unless the create names one (the record then names the parked
	// sandbox's Engine objects: alias.go).
	var pooled *pool.Member
	var pl *pool.Pool
	var miss string
	if s.idFree(req.ID) {
		pooled, pl, miss = s.takePooled(req, resolved)
	}
	id, engineID := req.ID, ""
	if pooled != nil {
		engineID = pooled.Sandbox().ID
		if id == "" {
			id = engineID
		}
	}
	// A parked sandbox is made already: its record is written with its
	// container and the events of its making (one write, not four).
	// Its live state is held until its claim is set: a resume (by a client
	// that gave the ID) waits for it.
	evs := []store.Event{{Kind: "sandbox.accepted"}}
	var containerID string
	var claimed *live
	if pooled != nil {
		containerID = pooled.Sandbox().PrimaryID
		evs = append(evs, s.claimedEvents(pooled, pl)...)
		claimed = s.lives.of(id)
		claimed.mu.Lock()
	}
	rec, evs, err := s.store.CreateSandboxEvents(store.Sandbox{
		ID: id, Kind: req.Kind, Project: req.Manifest.ProjectDir, Labels: labels, Engine: eng,
		Plan: req.Manifest.Resolved, Sources: req.Manifest.Sources, CLIPid: req.CLIPid, CLIStart: req.CLIStart,
		EndMarker: endMarker, Parked: pooled != nil, Lifetime: req.Lifetime.record(time.Now()),
		EngineID: engineIDOf(id, engineID), ContainerID: containerID,
	}, evs)
	if err != nil {
		if claimed != nil {
			claimed.mu.Unlock()
		}
		if pooled != nil {
			s.pools.Discard(pl, pooled)
		} else if pl != nil && pool.ColdMiss(miss) {
			s.pools.ColdStarted(pl) // no cold start comes
		}
		return Sandbox{}, err
	}
	s.expiry.set(rec.ID, rec.ExpiresAt)
	if rec.EngineID != "" {
		s.aliases.add(rec.EngineID, rec.ID)
	}
	l := s.lives.of(rec.ID)
	l.wire, l.values, l.resolved = *req.Manifest, maps.Clone(req.Secrets), resolved
	s.lives.setFlags(l, func() { l.removeOnExit = req.RemoveOnExit })
	held := maps.Clone(req.Secrets)
	if held == nil {
		held = map[string]string{}
	}
	for k, v := range req.EnvSecrets {
		held["run.env."+k] = v
	}
	s.holdSecrets(l, held)
	s.lives.touch(rec.ID)
	sreq := &backend.Request{ID: rec.ID, Manifest: resolved, Kind: req.Kind, Command: req.Command, Env: req.Env, EnvSecrets: req.EnvSecrets,
		Workdir: req.Workdir, TTY: req.TTY, Stdin: req.Stdin, Labels: labels, Quiet: req.Quiet, CLIPid: req.CLIPid, CLIStart: req.CLIStart,
		KeepFiles: req.Kind == backend.KindRun && !req.RemoveOnExit, ClientFiles: req.ClientFiles, EndMarker: endMarker, ToolEnv: req.ToolEnv,
		FromSnapshot: req.fromSnapshot}
	if pooled != nil {
		l.handle = pooled.Sandbox()
		l.claim = &backend.Claim{Manifest: resolved, Command: req.Command, Idle: req.Kind == backend.KindUp, Env: req.Env, EnvSecrets: req.EnvSecrets,
			Workdir: req.Workdir, Stdin: req.Stdin, Quiet: req.Quiet, EndMarker: endMarker}
		claimed.mu.Unlock()
		for _, ev := range evs[1:] {
			s.events.recorded(ev)
		}
		if req.Start {
			primary := pooled.Sandbox().PrimaryID
			s.goAsync(func() { s.startClaimed(rec.ID, primary) })
		}
		return s.view(rec), nil
	}
	if pl != nil && miss != "" {
		s.events.emit(rec.ID, store.Event{Kind: "pool.missed", Reason: miss}, "")
	}
	s.goAsync(func() {
		if pl != nil && pool.ColdMiss(miss) {
			// Its pool refills once this cold start is done, not during it.
			defer s.pools.ColdStarted(pl)
		}
		s.prepare(rec.ID, sreq, req.Start)
	})
	return s.view(rec), nil
}

// idFree says whether a create may use id: none given, or a valid one no
// sandbox has (else the store refuses it, and a parked sandbox is not taken
// for it).
func (s *Service) idFree(id string) bool {
	if id == "" {
		return true
	}
	if ids.Validate(id) != nil {
		return false
	}
	_, err := s.store.Get(id)
	return errors.Is(err, store.ErrNotFound)
}

// engineIDOf is the record's EngineID of sandbox id made of the Engine
// objects of engineID: "" when they are named by id.
func engineIDOf(id, engineID string) string {
	if engineID == id {
		return ""
	}
	return engineID
}

// claimedEvents are the events of the making of a parked sandbox m a create
// took from pool p, written with its record: preparing, created, its
// services' results, pool.claimed (reasons redacted).
func (s *Service) claimedEvents(m *pool.Member, p *pool.Pool) []store.Event {
	sb := m.Sandbox()
	evs := []store.Event{{Kind: "sandbox.preparing"}, {Kind: "sandbox.created", Extra: map[string]string{"container": sb.PrimaryID}}}
	evs = append(evs, s.pools.TakeEarly(sb.ID)...)
	evs = append(evs, store.Event{Kind: "pool.claimed", Extra: map[string]string{"pool": p.Key(), "parked_ms": fmt.Sprint(time.Since(m.Since()).Milliseconds())}})
	for i := range evs {
		evs[i].Reason = string(s.events.redactor.Redact([]byte(evs[i].Reason)))
	}
	return evs
}

// startClaimed starts a sandbox of a parked one a create took (created
// already, its record and handle written by the create): the start delivers
// the claim; an idle one's status stream is opened meanwhile.
func (s *Service) startClaimed(id, primaryID string) {
	l := s.lives.of(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.claim != nil && l.claim.Idle {
		// Its readiness comes on the status stream: open it while the
		// claim is delivered (prefollow.go).
		early := openEarly(s.ctx, s.rtOf(id), primaryID)
		l.ingestMu.Lock()
		l.early = early
		l.ingestMu.Unlock()
	}
	s.startLocked(s.lives.beginOp(l), id, l)
}

// checkCreate checks a create request before anything is reserved or created:
// its kind, and its manifest decoded strictly and validated with the rules of
// `airlock validate`.
func checkCreate(req *CreateRequest) (*manifest.Resolved, error) {
	if req.Manifest == nil {
		return nil, errorf(ErrInvalidRequest, "a manifest is required")
	}
	if req.Kind != backend.KindRun && req.Kind != backend.KindUp {
		return nil, errorf(ErrInvalidRequest, "kind must be %q or %q", backend.KindRun, backend.KindUp)
	}
	if req.ClientFiles && req.Start {
		return nil, errorf(ErrInvalidRequest, "client_files needs start: false (the client writes the files, then resumes)")
	}
	if err := checkLifetime(req.Lifetime); err != nil {
		return nil, err
	}
	return fromWire(*req.Manifest, req.Secrets)
}

// fromWire is a wire manifest decoded strictly, its values put back, and
// validated with the rules of `airlock validate`.
func fromWire(w manifest.Wire, values map[string]string) (*manifest.Resolved, error) {
	resolved, err := manifest.FromWire(w, values)
	if err != nil {
		return nil, errorf(ErrInvalidRequest, "%v", err)
	}
	if err := resolved.Validate(); err != nil {
		return nil, errorf(ErrConfig, "%v", err)
	}
	if resolved.Sandbox.User == manifest.HostUser {
		// The daemon may run as another user than its client, or elsewhere:
		// only the client knows who "host" is.
		return nil, errorf(ErrConfig, "sandbox.user: \"host\" must be resolved by the client to the uid:gid of the user running it before the manifest is sent (airlock's CLI does); send that \"UID:GID\" instead")
	}
	return resolved, nil
}

func (s *Service) prepare(id string, req *backend.Request, start bool) {
	l := s.lives.of(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	s.events.emit(id, store.Event{Kind: "sandbox.preparing"}, "")
	ctx := s.lives.beginOp(l)
	leave, err := s.enter(ctx, id)
	if err != nil {
		s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: "cannot make the sandbox: " + err.Error(), Extra: exitExtra(err)}, store.StateFailed)
		return
	}
	// While the create runs, its own outcome decides: the end of a container
	// or Pod it removes on a failure (the kubernetes backend deletes a Pod it
	// cannot schedule or start) is not the sandbox's exit.
	l.ingestMu.Lock()
	l.starting = true
	l.ingestMu.Unlock()
	sb, err := s.rtOf(id).Create(ctx, req)
	leave()
	l.ingestMu.Lock()
	l.starting = false
	l.ingestMu.Unlock()
	if err != nil {
		s.events.emit(id, store.Event{Kind: "sandbox.failed", Reason: err.Error(), Extra: exitExtra(err)}, store.StateFailed)
		return
	}
	l.handle = sb
	_, _ = s.store.Update(id, func(r *store.Sandbox) error { r.ContainerID = sb.PrimaryID; return nil })
	s.events.emit(id, store.Event{Kind: "sandbox.created", Extra: map[string]string{"container": sb.PrimaryID}}, "")
	if start {
		s.startLocked(ctx, id, l)
	}
}

// exitExtra carries the exit code a runtime error maps to (2 or 125), and
// port_in_use (host:port) for a start that failed on a taken host port.
func exitExtra(err error) map[string]string {
	extra := map[string]string{"exit_code": "125"}
	var se *backend.Error
	if errors.As(err, &se) {
		extra["exit_code"] = fmt.Sprint(se.Code)
	}
	// A start that failed on a taken host port: the CLI removes the sandbox
	// it made for it (nothing of it ran).
	var pe *backend.PortInUseError
	if errors.As(err, &pe) {
		extra["port_in_use"] = pe.Addr
		if pe.Addr == "" {
			extra["port_in_use"] = "unknown"
		}
	}
	return extra
}

// nonce is a random marker nonce: 32 hexadecimal digits.
func nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
