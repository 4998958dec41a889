package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// serviceWatch follows one starting service until it is ready or failed.
type serviceWatch struct {
	sandbox  string
	svc      *services
	name, id string
	primary  string // the sandbox's primary container
	probe    string // the healthcheck's argv, for messages
	job      bool   // others wait for it to complete: exit 0 is its success
	timeout  string // sandbox.ready_timeout, for messages
	deadline time.Time
}

// serviceState is what one inspection of a starting service says.
type serviceState int

const (
	servicePending serviceState = iota
	serviceReady
	serviceFailed
)

// check inspects the service once. A failure comes with its reason (without the
// log lines, which fail adds).
func (w *serviceWatch) check(ctx context.Context) (serviceState, string, error) {
	ci, err := w.svc.engine.ContainerInspect(ctx, w.id)
	if err != nil {
		return servicePending, "", err
	}
	st := ci.State
	if st == nil {
		return servicePending, "", nil
	}
	if w.probe == "" && ci.Config != nil && ci.Config.Healthcheck != nil && len(ci.Config.Healthcheck.Test) > 1 {
		w.probe = strings.Join(ci.Config.Healthcheck.Test[1:], " ")
	}
	health := st.Health
	if health != nil && (health.Status == container.NoHealthcheck || health.Status == "" && !hasHealthcheck(ci.Config)) {
		// Podman 4.3's Docker-compatible API sends an empty Health for a container without
		// a healthcheck where Docker sends none.
		health = nil
	}
	switch {
	case w.job && st.Status == container.StateExited && st.ExitCode == 0 && !st.OOMKilled:
		return serviceReady, "", nil
	case w.job && (st.Status == container.StateExited || st.Status == container.StateDead):
		return serviceFailed, fmt.Sprintf("service %s did not complete successfully: it exited with code %d", w.name, st.ExitCode), nil
	case w.job:
		return servicePending, "", nil
	case st.Status == container.StateExited || st.Status == container.StateDead:
		how := fmt.Sprintf("exited with code %d", st.ExitCode)
		if st.OOMKilled {
			how = "was killed for lack of memory"
		}
		if health != nil {
			return serviceFailed, fmt.Sprintf("service %s %s before it was healthy", w.name, how), nil
		}
		return serviceFailed, fmt.Sprintf("service %s %s", w.name, how), nil
	case !st.Running:
		return servicePending, "", nil
	case health == nil:
		return serviceReady, "", nil
	}
	switch health.Status {
	case container.Healthy:
		return serviceReady, "", nil
	case container.Unhealthy:
		msg := fmt.Sprintf("service %s is unhealthy (healthcheck %s failed %d times", w.name, w.probe, st.Health.FailingStreak)
		if n := len(st.Health.Log); n > 0 && st.Health.Log[n-1] != nil {
			if out := strings.TrimSpace(st.Health.Log[n-1].Output); out != "" {
				msg += ": " + firstLine(out)
			}
		}
		return serviceFailed, msg + ")", nil
	}
	return servicePending, "", nil
}

// hasHealthcheck reports whether a container's config runs a healthcheck.
func hasHealthcheck(c *container.Config) bool {
	return c != nil && c.Healthcheck != nil && len(c.Healthcheck.Test) > 0 && c.Healthcheck.Test[0] != "NONE"
}

// timedOut is the reason given when the service is not ready by the deadline.
func (w *serviceWatch) timedOut() string {
	if w.job {
		return fmt.Sprintf("service %s has not completed after %s", w.name, w.timeout)
	}
	if w.probe != "" {
		return fmt.Sprintf("service %s is not healthy after %s (healthcheck %s)", w.name, w.timeout, w.probe)
	}
	return fmt.Sprintf("service %s is not running after %s", w.name, w.timeout)
}

// fail is the error of a failed required service: the reason and its last log lines.
func (w *serviceWatch) fail(ctx context.Context, reason string) error {
	logs := w.svc.logs(ctx, w.id)
	if logs == "" {
		return failed("%s; it logged nothing", reason)
	}
	return failed("%s; last log lines:\n%s", reason, logs)
}

// wait waits until every watched service is ready, and fails with the first
// that fails or is not ready by its deadline.
func (s *services) wait(ctx context.Context, watches []*serviceWatch) error {
	if len(watches) == 0 {
		return nil
	}
	tick := time.NewTicker(servicePollInterval)
	defer tick.Stop()
	pending := watches
	for {
		next := pending[:0]
		for _, w := range pending {
			state, reason, err := w.check(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil && cerrdefs.IsNotFound(err):
				return failed("service %s is gone (its container %.12s was removed)", w.name, w.id)
			case err != nil:
				return failed("cannot inspect service %s: %v", w.name, err)
			case state == serviceFailed:
				err := w.fail(ctx, reason)
				s.result(w.sandbox, w.name, false, err.Error())
				return err
			case state == servicePending && !time.Now().Before(w.deadline):
				err := w.fail(ctx, w.timedOut())
				s.result(w.sandbox, w.name, false, err.Error())
				return err
			case state == servicePending:
				next = append(next, w)
			default:
				s.result(w.sandbox, w.name, true, "")
			}
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// report follows an optional service in the background and reports its first
// result as a notice. It ends with ctx, by the deadline at the latest, and quietly
// when the container disappears (the sandbox was removed meanwhile).
func (w *serviceWatch) report(ctx context.Context) {
	tick := time.NewTicker(servicePollInterval)
	defer tick.Stop()
	for {
		state, reason, err := w.check(ctx)
		switch {
		case err != nil && (ctx.Err() != nil || cerrdefs.IsNotFound(err)):
			return
		case err != nil:
			w.svc.notice("optional service %s: cannot inspect it: %v", w.name, err)
			return
		case state == serviceReady:
			w.svc.notice("optional service %s is ready", w.name)
			w.svc.result(w.sandbox, w.name, true, "")
			return
		case state == serviceFailed:
			if w.svc.primaryEnded(ctx, w.primary) {
				return // stopped with the sandbox, not a failure of its own
			}
			err := w.fail(ctx, reason)
			w.svc.notice("optional service %s failed: %v", w.name, err)
			w.svc.result(w.sandbox, w.name, false, err.Error())
			return
		case !time.Now().Before(w.deadline):
			if w.svc.primaryEnded(ctx, w.primary) {
				return
			}
			err := w.fail(ctx, w.timedOut())
			w.svc.notice("optional service %s failed: %v", w.name, err)
			w.svc.result(w.sandbox, w.name, false, err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// primaryEnded reports whether the sandbox's primary container has run and exited,
// or is gone: the sandbox is shutting down.
func (s *services) primaryEnded(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	ci, err := s.engine.ContainerInspect(ctx, id)
	if err != nil {
		return cerrdefs.IsNotFound(err) || ctx.Err() != nil
	}
	return ci.State != nil && (ci.State.Status == container.StateExited || ci.State.Status == container.StateDead || ci.State.Status == container.StateRemoving)
}

// logs returns the last log lines of a service container, stdout and stderr
// interleaved, each indented.
func (s *services) logs(ctx context.Context, id string) string {
	rc, err := s.engine.ContainerLogs(ctx, id, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(serviceLogLines),
	})
	if err != nil {
		return "  (cannot read its logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var buf bytes.Buffer
	// Service containers never have a TTY, so the stream is multiplexed.
	if _, err := stdcopy.StdCopy(&buf, &buf, rc); err != nil && buf.Len() == 0 {
		return "  (cannot read its logs: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) > serviceLogLines {
		lines = lines[len(lines)-serviceLogLines:]
	}
	var out []string
	for _, l := range lines {
		if l = strings.TrimRight(l, "\r"); l != "" || len(out) > 0 {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}
