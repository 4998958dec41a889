package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/proc"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/trust"
)

// The manifest's layers are policy a sandbox must not rewrite for its next run
// (docs/trust.md): up and run load them through a trust.Snapshot, refuse those
// changed while a sandbox could write them (or ask on a terminal), and record
// each sandbox they start as a session.

// loadManifestLayers is loadManifest recording every layer file it read, and
// the project's .airlockignore.
func (a *app) loadManifestLayers() (*manifest.Resolved, *trust.Snapshot, error) {
	snap := trust.NewSnapshot()
	if file, err := a.manifestFile(); err == nil {
		if abs, err := filepath.Abs(file); err == nil {
			snap.Root = filepath.Dir(abs)
		}
	}
	r, err := a.loadManifestWith(snap.ReadFile)
	if err != nil {
		return nil, nil, err
	}
	if err := snap.Add(filepath.Join(r.ProjectDir, projectfs.IgnoreFile)); err != nil {
		return nil, nil, withCode(ExitAirlock, err)
	}
	return r, snap, nil
}

// beginWithManifest is how up and pool warm begin: the set-up that catches
// signals (the caller closes it, after an error too), then the manifest and
// its layers read and checked against the trust record. A signal while
// checkLayers asks is the set-up's interruption.
func (a *app) beginWithManifest() (*setup, *manifest.Resolved, *trust.Snapshot, error) {
	su := newSetup(context.Background())
	r, layers, err := a.loadManifestLayers()
	if err != nil {
		return su, nil, nil, err
	}
	if err := a.checkLayers(su.ctx, r, layers); err != nil {
		return su, nil, nil, su.err(err)
	}
	return su, r, layers, nil
}

func (a *app) trustStore() (*trust.Store, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	return trust.New(p.Trust()), nil
}

// checkLayers lets a sandbox start from r only when no layer changed while a
// sandbox could write it, or the user accepts the change: on a terminal it
// shows the diff and asks; otherwise it is a config error naming the files and
// what they widen.
// A signal while it asks (ctx ends) is an interruption, not an answer.
func (a *app) checkLayers(ctx context.Context, r *manifest.Resolved, snap *trust.Snapshot) error {
	store, err := a.trustStore()
	if err != nil {
		return err
	}
	changes, err := store.Check(r.File, r.ProjectDir, snap, a.sessionResolver())
	if err != nil {
		return withCode(ExitAirlock, fmt.Errorf("cannot check the manifest's layers against the trust record: %w", err))
	}
	if len(changes) == 0 {
		return nil
	}
	widens := a.layerWidening(r, snap, changes)
	if widens == "" {
		// Nothing the sandbox gets is wider: taken, with a word.
		if err := store.Accept(r.File, r.ProjectDir, snap); err != nil {
			return withCode(ExitAirlock, fmt.Errorf("cannot record the trusted layers: %w", err))
		}
		if !a.opts.quiet {
			fmt.Fprintf(a.stderr, "airlock: notice: %s; it widens nothing airlock knows of, so it is taken as it is\n", changedWhile(changes))
		}
		return nil
	}
	if isTerminal(a.stdin) && isTerminal(a.stdout) {
		printLayerChanges(a.stderr, changes, widens)
		fmt.Fprint(a.stderr, "Trust these layers and go on? [y/N] ")
		answer := make(chan bool, 1)
		go func() { answer <- readYes(a.stdin) }()
		var yes bool
		select {
		case yes = <-answer:
		case <-ctx.Done():
			fmt.Fprintln(a.stderr)
			return ctx.Err()
		}
		if yes {
			if err := store.Accept(r.File, r.ProjectDir, snap); err != nil {
				return withCode(ExitAirlock, fmt.Errorf("cannot record the trusted layers: %w", err))
			}
			return nil
		}
	}
	return configError(errors.New(refusal(changes, widens)))
}

// refusal is `sandbox.local.toml changed while sandbox X ran: it widens mounts
// (…); review with "airlock trust"`.
func refusal(changes []trust.Change, widens string) string {
	verb := "it widens "
	if insideCount(changes) > 1 {
		verb = "together they widen "
	}
	return fmt.Sprintf("%s: %s; review with \"airlock trust\"", changedWhile(changes), verb+widens)
}

func insideCount(changes []trust.Change) int {
	n := 0
	for _, c := range changes {
		if c.Inside {
			n++
		}
	}
	return n
}

// changedWhile is "sandbox.local.toml changed while sandbox X ran".
func changedWhile(changes []trust.Change) string {
	var names []string
	sb := ""
	for _, c := range changes {
		if c.Inside {
			names = append(names, displayPath(c.Path))
			if sb == "" {
				sb = c.Sandbox
			}
		}
	}
	who := "a sandbox"
	if sb != "" {
		who = "sandbox " + sb
	}
	return fmt.Sprintf("%s changed while %s ran", strings.Join(names, ", "), who)
}

// layerWidening says what the layers as they are now widen over the accepted
// ones (trust.Summary), or "" when they widen nothing.
func (a *app) layerWidening(r *manifest.Resolved, snap *trust.Snapshot, changes []trust.Change) string {
	l, err := a.loader()
	if err != nil {
		return "(cannot tell: " + err.Error() + ")"
	}
	old := maps.Clone(snap.Files)
	var ws []trust.Widening
	for _, c := range changes {
		if c.Old == nil {
			old[c.Path] = trust.File{Absent: true}
		} else {
			old[c.Path] = *c.Old
		}
		var oc []byte
		if c.Old != nil {
			oc = c.Old.Content
		}
		if !c.New.Stored() || c.Old != nil && !c.Old.Stored() {
			ws = append(ws, trust.Widening{Area: "files", Detail: displayPath(c.Path) + " is too large to compare"})
			continue
		}
		switch {
		case filepath.Base(c.Path) == projectfs.IgnoreFile:
			ws = append(ws, trust.IgnoreWidens(oc, c.New.Content)...)
		case !strings.HasSuffix(c.Path, ".toml"):
			// A compose file, one it includes or extends, an env file: a
			// variable it newly reads from the host is a host value entering
			// the sandbox's services (compose interpolates it).
			ws = append(ws, trust.ComposeVarsWiden(displayPath(c.Path), oc, c.New.Content)...)
		}
	}
	nr, err := trust.Load(*l, r.File, snap.Files)
	if err != nil {
		nr = r
	}
	oldR, oerr := trust.Load(*l, r.File, old)
	if oerr != nil {
		oldR = nil
	}
	ws = append(trust.Widens(oldR, nr), ws...)
	s := trust.Summary(ws)
	if s != "" && oerr != nil {
		s += " (compared with an empty manifest: the accepted layers do not load now)"
	}
	return s
}

// printLayerChanges shows every changed layer with its diff, then what the
// change widens.
func printLayerChanges(w io.Writer, changes []trust.Change, widens string) {
	for _, c := range changes {
		name := displayPath(c.Path)
		switch {
		case c.Inside && c.Sandbox != "":
			fmt.Fprintf(w, "%s: changed while sandbox %s ran\n", name, c.Sandbox)
		case c.Inside:
			fmt.Fprintf(w, "%s: changed while a sandbox ran\n", name)
		default:
			fmt.Fprintf(w, "%s: changed while no sandbox ran\n", name)
		}
		fmt.Fprint(w, trust.Diff(name, c.Old, c.New))
	}
	if widens == "" {
		widens = "nothing airlock knows of"
	}
	fmt.Fprintf(w, "it widens: %s\n", widens)
}

// readYes reads one line from r, a byte at a time (the rest of stdin is the
// sandbox's), and reports whether it is y or yes.
func readYes(r io.Reader) bool {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 64 {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' || b[0] == '\r' {
				break
			}
			line = append(line, b[0])
		}
		if err != nil {
			break
		}
	}
	ans := strings.ToLower(strings.TrimSpace(string(line)))
	return ans == "y" || ans == "yes"
}

// sessionResolver tells the trust record whether an open session's sandbox still
// runs: by its CLI's pid until it has an ID, then by the daemon's record (a stopped,
// failed or deleted sandbox ended at its last update). When the daemon cannot be
// asked, the sandbox counts as running (changes are then attributed to it).
func (a *app) sessionResolver() trust.Resolver {
	var (
		once sync.Once
		c    *client.Client
		cerr error
	)
	return func(s *trust.Session) trust.Status {
		if s.Pool {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			once.Do(func() { c, cerr = a.daemonClient(ctx) })
			if cerr != nil {
				return trust.Status{Running: true}
			}
			pools, err := c.Pools(ctx)
			if err != nil {
				return trust.Status{Running: true}
			}
			for _, p := range pools.Pools {
				if p.File == s.Manifest && len(p.Sandboxes)+p.Starting > 0 {
					return trust.Status{Running: true}
				}
			}
			return trust.Status{} // drained: when is not known, now is taken
		}
		if s.Sandbox == "" {
			if st, start, ok := proc.State(s.PID); ok && st != "Z" && start == s.PIDStart {
				return trust.Status{Running: true}
			}
			return trust.Status{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		once.Do(func() { c, cerr = a.daemonClient(ctx) })
		if cerr != nil {
			return trust.Status{Running: true}
		}
		sb, err := c.Get(ctx, s.Sandbox)
		var ce *client.Error
		switch {
		case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
			return trust.Status{}
		case err != nil:
			return trust.Status{Running: true}
		}
		switch sb.State {
		case client.StateStopped, client.StateFailed, client.StateDeleted:
			return trust.Status{Ended: stoppedAt(ctx, c, sb)}
		}
		return trust.Status{Running: true}
	}
}

// stoppedAt is when a sandbox that no longer runs stopped: the time of its last
// sandbox.stopped or sandbox.failed event, else of its record's last update
// (a removal comes after the stop).
func stoppedAt(ctx context.Context, c *client.Client, sb *client.Sandbox) time.Time {
	evs, err := c.History(ctx, sb.ID, 0)
	if err != nil {
		return sb.UpdatedAt
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Kind {
		case "sandbox.started", "sandbox.ready":
			return sb.UpdatedAt // started again after: no stop of this run
		case "sandbox.stopped", "sandbox.failed":
			if evs[i].Time.Before(sb.UpdatedAt) {
				return evs[i].Time
			}
			return sb.UpdatedAt
		}
	}
	return sb.UpdatedAt
}

// layerSession is the trust record's session of one sandbox up or run starts.
type layerSession struct {
	a      *app
	store  *trust.Store
	serial uint64
	snap   *trust.Snapshot
	id     string
}

// beginLayers records that a sandbox of r is about to start (id, when it is
// known already: a created sandbox that has not started yet), with the host
// paths it can write: the project dir unless it is copied in (or when --output
// copies paths back into it), and every writable mount's source.
// protected are the layer files its sandbox sees read-only (protectLayers).
func (a *app) beginLayers(r *manifest.Resolved, snap *trust.Snapshot, projectCopied, outputs bool, id string, protected []string) (*layerSession, error) {
	store, err := a.trustStore()
	if err != nil {
		return nil, err
	}
	roots := a.sessionRoots(r, projectCopied, outputs)
	ss, err := store.Begin(r.File, roots, protected, os.Getpid(), processStart(os.Getpid()), id)
	if err != nil {
		return nil, withCode(ExitAirlock, fmt.Errorf("cannot record the sandbox in the trust record: %w", err))
	}
	return &layerSession{a: a, store: store, serial: ss.Serial, snap: snap, id: id}, nil
}

// sessionRoots are the host paths a sandbox of r can write: the project dir
// unless it is copied in (or when --output copies paths back into it), and
// every writable mount's source.
func (a *app) sessionRoots(r *manifest.Resolved, projectCopied, outputs bool) []string {
	var roots []string
	if !projectCopied || outputs {
		roots = append(roots, r.ProjectDir)
	}
	home, _ := a.getenv("HOME")
	for _, m := range r.Mounts {
		if m.Enabled && !m.ReadOnly {
			roots = append(roots, projectfs.ExpandHostPath(m.Source, r.ProjectDir, home))
		}
	}
	return roots
}

// layerMountPrefix names the read-only mounts protectLayers adds.
const layerMountPrefix = "airlock-layer-"

// protectLayers makes every layer file of snap that exists and that the
// sandbox could write (in its bind-mounted project, or in a writable mount)
// read-only inside it, by a read-only bind mount of the file over itself, and
// returns those files. Code in the sandbox then cannot change, replace or
// remove them (the Engine refuses a write, a rename or an unlink of a mount
// point), so what changes them while the run's daemons still stop after its
// main command ended, or later, is the user's (docs/trust.md). Only a run's
// sandboxes get them: an up shell is where people edit and use git.
func (a *app) protectLayers(r *manifest.Resolved, snap *trust.Snapshot, projectCopied bool) []string {
	if projectCopied {
		return nil // a copied project: the host's files are out of reach
	}
	type root struct{ host, target string }
	roots := []root{{r.ProjectDir, r.ProjectDir}}
	home, _ := a.getenv("HOME")
	for _, name := range slices.Sorted(maps.Keys(r.Mounts)) {
		m := r.Mounts[name]
		if m.Enabled && !m.ReadOnly && filepath.IsAbs(m.Target) {
			roots = append(roots, root{projectfs.ExpandHostPath(m.Source, r.ProjectDir, home), m.Target})
		}
	}
	targets := map[string]bool{}
	for _, m := range r.Mounts {
		targets[filepath.Clean(m.Target)] = true
	}
	for _, c := range r.Copies {
		targets[filepath.Clean(c.Target)] = true
	}
	var out []string
	n := 0
	for _, p := range snap.Paths() {
		if snap.Files[p].Absent {
			continue
		}
		for _, rt := range roots {
			rel, err := filepath.Rel(rt.host, p)
			if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			target := filepath.Join(rt.target, rel)
			if targets[target] {
				break // the manifest mounts something there itself
			}
			name := fmt.Sprintf("%s%d", layerMountPrefix, n)
			for r.Mounts[name].Source != "" {
				n++
				name = fmt.Sprintf("%s%d", layerMountPrefix, n)
			}
			n++
			if r.Mounts == nil {
				r.Mounts = map[string]manifest.Mount{}
			}
			r.Mounts[name] = manifest.Mount{Enabled: true, Source: p, Target: target, ReadOnly: true, Missing: "ignore"}
			targets[target] = true
			out = append(out, p)
			break
		}
	}
	return out
}

// beginPool records the session of r's warm pool (its parked sandboxes can
// write what a run of it can), when a run may use one.
func (a *app) beginPool(r *manifest.Resolved, projectCopied bool, protected []string) {
	if r.Sandbox.Pool == nil || r.Sandbox.Pool.Size == 0 {
		return
	}
	store, err := a.trustStore()
	if err == nil {
		err = store.BeginPool(r.File, a.sessionRoots(r, projectCopied, false), protected)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "airlock: warning: cannot record the warm pool in the trust record: %v\n", err)
	}
}

// started names the session's sandbox.
func (s *layerSession) started(id string) {
	if s == nil || id == "" {
		return
	}
	s.id = id
	if err := s.store.SetSandbox(s.serial, id); err != nil {
		fmt.Fprintf(s.a.stderr, "airlock: warning: cannot record sandbox %s in the trust record: %v\n", id, err)
	}
}

// ended compares the layers with those the sandbox started from, as its main
// command (or shell) ended: a difference is flagged, and said. closed: the
// sandbox is stopped. at is when the CLI learnt of the end (a run's main
// command's code), zero for now.
func (s *layerSession) ended(closed bool, at time.Time) {
	if s == nil || s.id == "" {
		return
	}
	now := trust.NewSnapshot()
	for _, p := range s.snap.Paths() {
		_, _ = now.ReadFile(p)
	}
	changes, err := s.store.Ended(s.serial, now, closed, at)
	if err != nil {
		fmt.Fprintf(s.a.stderr, "airlock: warning: cannot check the manifest's layers after sandbox %s: %v\n", s.id, err)
		return
	}
	warnLayersChanged(s.a, changes, s.id)
}

// layersAfterStop judges the layers of the sandbox the CLI just stopped (stop,
// down), so that what it changed is flagged before anyone edits the file again.
func (a *app) layersAfterStop(id string) {
	store, err := a.trustStore()
	if err != nil {
		return
	}
	changes, err := store.Stopped(id)
	if err != nil {
		fmt.Fprintf(a.stderr, "airlock: warning: cannot check the manifest's layers after sandbox %s: %v\n", id, err)
		return
	}
	warnLayersChanged(a, changes, id)
}

// warnLayersChanged says which layers changed while sandbox id ran.
func warnLayersChanged(a *app, changes []trust.Change, id string) {
	if len(changes) == 0 || a.opts.quiet {
		return
	}
	var names []string
	for _, c := range changes {
		names = append(names, displayPath(c.Path))
	}
	fmt.Fprintf(a.stderr, "airlock: warning: %s changed while sandbox %s ran; the next up or run refuses it until you review it with `airlock trust`\n", strings.Join(names, ", "), id)
}

// done forgets the session when no sandbox came of it.
func (s *layerSession) done() {
	if s == nil || s.id != "" {
		return
	}
	_ = s.store.Drop(s.serial)
}
