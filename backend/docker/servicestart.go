package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// serviceStart is one start of a sandbox's services: what the manifest
// declares of them, the condition each must reach for the others, and how far
// the start is.
type serviceStart struct {
	svc         *services
	sb          *backend.Sandbox
	declared    map[string]manifest.Service
	conds       map[string]string // what other services wait for: the condition each service must reach
	timeout     time.Duration
	timeoutText string
	startedAt   map[string]time.Time // a service has ready_timeout from the end of its start
	done        map[string]bool      // started, and its condition (if any) reached
	waited      map[string]bool      // its readiness was already waited for and reported
	started     []string
}

// start starts the service containers and waits for the required ones.
func (s *services) start(ctx context.Context, sb *backend.Sandbox) error {
	if len(sb.Services) == 0 {
		return nil
	}
	st, err := s.newStart(sb)
	if err != nil {
		return err
	}
	// Start in waves: every service whose dependencies reached their
	// conditions, all at once (a slow one does not hold the others back).
	for left := slices.Sorted(maps.Keys(sb.Services)); len(left) > 0; {
		wave, rest := st.nextWave(left)
		if len(wave) == 0 { // validate refuses cycles; a hand-made manifest may not
			return configErr("services: depends_on has a cycle among %s", strings.Join(rest, ", "))
		}
		left = rest
		if err := st.startWave(ctx, wave); err != nil {
			return err
		}
	}

	var gating []*serviceWatch
	for _, name := range st.started {
		if st.waited[name] {
			continue
		}
		w := st.watch(name)
		if st.required(name) {
			gating = append(gating, w)
			continue
		}
		go w.report(ctx)
	}
	return s.wait(ctx, gating)
}

// newStart reads what a start of sb's services needs of its manifest.
func (s *services) newStart(sb *backend.Sandbox) (*serviceStart, error) {
	timeout, err := backend.ReadyTimeout(ownState(sb).manifest)
	if err != nil {
		return nil, err
	}
	st := &serviceStart{svc: s, sb: sb, timeout: timeout, conds: map[string]string{},
		startedAt: map[string]time.Time{}, done: map[string]bool{}, waited: map[string]bool{}}
	if ownState(sb).manifest != nil {
		st.declared = ownState(sb).manifest.Services
	}
	// A service others wait to complete is a job: its exit 0 is its success.
	for _, svc := range st.declared {
		for dep, c := range svc.DependsOn {
			if _, ok := sb.Services[dep]; ok && (st.conds[dep] == "" || c != manifest.ServiceStarted) {
				st.conds[dep] = c
			}
		}
	}
	st.timeoutText = timeout.String()
	if ownState(sb).manifest != nil && ownState(sb).manifest.Sandbox.ReadyTimeout != "" {
		st.timeoutText = ownState(sb).manifest.Sandbox.ReadyTimeout
	}
	return st, nil
}

// required reports whether a service gates the start. A service the manifest
// no longer names (a sandbox opened with a newer manifest) is required, as
// services are by default.
func (st *serviceStart) required(name string) bool {
	s, known := st.declared[name]
	return !known || s.Required
}

// watch follows the service name from its start.
func (st *serviceStart) watch(name string) *serviceWatch {
	sb := st.sb
	w := &serviceWatch{svc: st.svc, sandbox: sb.ID, name: name, id: sb.Services[name], primary: sb.PrimaryID, timeout: st.timeoutText,
		deadline: st.startedAt[name].Add(st.timeout), job: st.conds[name] == manifest.ServiceCompletedSuccessfully}
	if s, ok := st.declared[name]; ok && s.Healthcheck != nil {
		w.probe = strings.Join(s.Healthcheck.Cmd, " ")
	}
	return w
}

// nextWave splits the services left to start into those whose dependencies
// reached their conditions (wave) and the others (rest).
func (st *serviceStart) nextWave(left []string) (wave, rest []string) {
	for _, name := range left {
		ready := true
		for dep := range st.declared[name].DependsOn {
			if _, ok := st.sb.Services[dep]; ok && !st.done[dep] {
				ready = false
			}
		}
		if ready {
			wave = append(wave, name)
		} else {
			rest = append(rest, name)
		}
	}
	return wave, rest
}

// startWave starts the services of a wave at once, hands each its values,
// and waits for those others wait on to reach their conditions. A required
// service (or one others wait on) that does not start fails the start; an
// optional one is reported.
func (st *serviceStart) startWave(ctx context.Context, wave []string) error {
	s, sb := st.svc, st.sb
	errs := make([]error, len(wave))
	var wg sync.WaitGroup
	for i, name := range wave {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.engine.ContainerStart(ctx, sb.Services[name], container.StartOptions{}); err != nil {
				errs[i] = fmt.Errorf("cannot start service %s: %v", name, err)
				return
			}
			errs[i] = s.deliverSecrets(ctx, sb, name)
		}()
	}
	wg.Wait()
	now := time.Now()
	var startErrs []error
	var gate []*serviceWatch
	for i, name := range wave {
		st.startedAt[name] = now
		switch {
		case errs[i] == nil:
			st.started = append(st.started, name)
			if c := st.conds[name]; c == manifest.ServiceHealthy || c == manifest.ServiceCompletedSuccessfully {
				gate = append(gate, st.watch(name))
				st.waited[name] = true
			}
		case st.required(name) || st.conds[name] != "":
			startErrs = append(startErrs, errs[i])
		default:
			s.notice("optional service %s failed: %v", name, errs[i])
			s.result(sb.ID, name, false, errs[i].Error())
		}
	}
	if len(startErrs) > 0 {
		return &backend.Error{Code: 125, Err: errors.Join(startErrs...)}
	}
	if err := s.wait(ctx, gate); err != nil {
		return err
	}
	for _, name := range wave {
		st.done[name] = true
	}
	return nil
}
