package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
)

// Start starts the services (waiting for the required ones) and then the primary
// container. The supervisor inside waits for the daemons before the main command.
// Substituted values are delivered through the Engine API once the container runs
// (the supervisor waits for them before it starts anything).
func (rt *Runtime) Start(ctx context.Context, sb *backend.Sandbox) error {
	if ownState(sb).manifest == nil {
		return errors.New("cannot start a sandbox without its manifest")
	}
	if err := (egressProxy{rt: rt}).start(ctx, sb); err != nil {
		return err
	}
	if !ownState(sb).hold {
		if err := rt.services().start(ctx, sb); err != nil {
			return err
		}
	}
	if !ownState(sb).fresh {
		if err := resetStatus(ctx, rt.Engine, sb.PrimaryID); err != nil {
			return err
		}
	}
	done := rt.step(sb.ID, "start")
	if ownState(sb).shard != "" {
		// Engine 20.10 finds a container's networks by name when it starts it,
		// though it was created with the network's ID: a second network named
		// airlock-shared (another process made one at the same time) fails the
		// start, and a failed start ends the caller's attach. Look first, and
		// remove the younger ones (sharednet's find); one list call.
		// A shard removed while the sandbox was stopped (its last running
		// sandbox went) is made again: the start finds it by name.
		_, _ = rt.shards().Network(ctx, ownState(sb).shard, true)
	}
	err := rt.Engine.ContainerStart(ctx, sb.PrimaryID, container.StartOptions{})
	if err != nil && ownState(sb).shard != "" && strings.Contains(err.Error(), "is ambiguous") {
		// One appeared since: remove it and start again.
		if _, nerr := rt.shards().Network(ctx, ownState(sb).shard, true); nerr == nil {
			err = rt.Engine.ContainerStart(ctx, sb.PrimaryID, container.StartOptions{})
		}
	}
	if err != nil {
		if pe := portInUse(err, ownState(sb).manifest.Sandbox.Ports); pe != nil {
			return &backend.Error{Code: 125, Err: pe}
		}
		return failed("cannot start the sandbox container: %v", err)
	}
	done()
	if ownState(sb).hold {
		// Its supervisor waits for the services in its network namespace.
		if err := rt.services().start(ctx, sb); err != nil {
			// Nothing runs in it yet: stopped, as a failed start leaves it.
			_ = rt.Engine.ContainerKill(context.WithoutCancel(ctx), sb.PrimaryID, "SIGKILL")
			return err
		}
	}
	sb.Ports = readPorts(ctx, rt.Engine, sb)
	ownState(sb).fresh = false
	values := backend.DeliveredValues(&backend.Request{EnvSecrets: ownState(sb).envSecrets}, ownState(sb).manifest)
	if ownState(sb).hold && ownState(sb).parked {
		values = nil // the release; the values come with the claim
	}
	if ownState(sb).hold || (len(values) > 0 && !ownState(sb).parked) {
		defer rt.step(sb.ID, "secrets delivery")()
		if err := backend.DeliverValues(ctx, rt, sb.PrimaryID, values); err != nil {
			return err
		}
	}
	return nil
}

// WaitExit waits for the primary container to exit and returns its exit code.
// Register it before Start so that a fast exit is not missed.
//
// The code comes from whichever answers first: the Engine's "die" event or its
// wait. Engine 20.10 answers a wait only once it has released the container's
// network (50–100 ms after the process exited); the die event, which carries
// the same exit code, is sent before that. The wait stays as the fallback for an
// event stream that broke or subscribed too late.
func (rt *Runtime) WaitExit(ctx context.Context, sb *backend.Sandbox) (<-chan int, <-chan error) {
	codes := make(chan int, 1)
	errs := make(chan error, 1)
	evctx, stopEvents := context.WithCancel(ctx)
	msgs, evErrs := rt.Engine.Events(evctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("container", sb.PrimaryID),
		filters.Arg("event", string(events.ActionDie)),
	)})
	wc, ec := rt.Engine.ContainerWait(ctx, sb.PrimaryID, container.WaitConditionNextExit)
	go func() {
		defer stopEvents()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					msgs = nil
					continue
				}
				if code, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
					codes <- code
					return
				}
			case <-evErrs:
				msgs, evErrs = nil, nil // the wait answers
			case w := <-wc:
				if w.Error != nil && w.Error.Message != "" {
					errs <- failed("cannot wait for the sandbox: %s", w.Error.Message)
					return
				}
				codes <- int(w.StatusCode)
				return
			case err := <-ec:
				errs <- err
				return
			}
		}
	}()
	return codes, errs
}

// Stop stops a sandbox: the primary (its supervisor shuts the daemons down within
// their timeouts) and the services.
func (rt *Runtime) Stop(ctx context.Context, id string) error {
	objs, err := listObjects(ctx, rt.Engine, ownerKey(rt.Owner), id)
	if err != nil {
		return err
	}
	if objs.primary == nil {
		return fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	// A paused sandbox is thawed first, so that its supervisor takes the stop
	// signal at once and stops the daemons in order (Engine 20.10 thaws a
	// container it stops by itself; this does not count on it).
	_ = freezer{engine: rt.Engine}.thaw(ctx, append([]container.Summary{*objs.primary}, objs.services...))
	timeout := stopTimeout(objs.primary.Labels)
	if err := rt.Engine.ContainerStop(ctx, objs.primary.ID, container.StopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
		return failed("cannot stop sandbox %s: %v", id, err)
	}
	for _, s := range objs.services {
		if err := rt.Engine.ContainerStop(ctx, s.ID, container.StopOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return failed("cannot stop service %s of sandbox %s: %v", s.Labels[backend.LabelService], id, err)
		}
	}
	for _, c := range objs.all {
		if c.Labels[backend.LabelRole] == RoleEgress {
			_ = rt.Engine.ContainerStop(ctx, c.ID, container.StopOptions{})
		}
	}
	rt.egressRelease(ctx, id)
	return nil
}

// stopTimeout gives the supervisor time for the longest daemon timeout plus margin.
func stopTimeout(labels map[string]string) int {
	if t, err := strconv.Atoi(labels[backend.LabelStopTimeout]); err == nil {
		return t
	}
	return 30
}

// Remove removes every object labelled with the sandbox ID (containers, network);
// the sandbox's state lives in its container and goes with it. Removing what does
// not exist is not an error.
func (rt *Runtime) Remove(ctx context.Context, id string) error {
	eb := rt.egressLookup(ctx, id) // before its primary goes
	cerr := rt.RemoveContainers(ctx, id)
	rt.egressLeave(ctx, id, eb) // its network back to the park
	nerr := rt.RemoveNetworks(ctx, id)
	var verr error
	if cerr == nil {
		verr = rt.services().removeVolumes(ctx, id)
	}
	if err := errors.Join(cerr, nerr, verr); err != nil {
		return failed("cannot remove sandbox %s: %v", id, err)
	}
	return nil
}

// RemoveContainers removes every container labelled with the sandbox ID.
func (rt *Runtime) RemoveContainers(ctx context.Context, id string) error {
	objs, err := listObjects(ctx, rt.Engine, ownerKey(rt.Owner), id)
	if err != nil {
		return err
	}
	var errs []error
	var shards []string
	for _, c := range append(objs.services, objs.all...) {
		if err := removeContainer(ctx, rt.Engine, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		} else {
			rt.forgetWarm(c.ID)
			if s := c.Labels[LabelShard]; s != "" {
				shards = append(shards, s)
			}
		}
	}
	for _, s := range shards {
		rt.shards().Leave(ctx, s) // a shard beyond the first goes with its last sandbox
	}
	return errors.Join(errs...)
}

// RemoveNetworks removes the sandbox's own networks. The Engine removes a network
// that only stopped containers are attached to, so a stopped sandbox's network can
// go while its containers are still being removed; one in use is an error.
func (rt *Runtime) RemoveNetworks(ctx context.Context, id string) error {
	nets, err := rt.Engine.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", backend.LabelSandbox+"="+id))})
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nets {
		if !ownerKey(rt.Owner).owns(n.Labels) {
			continue
		}
		if err := rt.Engine.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

type sandboxObjects struct {
	primary  *container.Summary
	services []container.Summary
	all      []container.Summary // every container of the sandbox, primary included
}

// listObjects lists the containers of sandbox id that are owner's.
func listObjects(ctx context.Context, eng client.APIClient, owner ownerKey, id string) (*sandboxObjects, error) {
	list, err := eng.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", backend.LabelSandbox+"="+id))})
	if err != nil {
		return nil, failed("cannot list the containers of sandbox %s: %v", id, err)
	}
	objs := &sandboxObjects{}
	for i := range list {
		c := list[i]
		if !owner.owns(c.Labels) {
			continue // another daemon's sandbox of the same ID
		}
		switch c.Labels[backend.LabelRole] {
		case "primary":
			objs.primary = &c
			objs.all = append(objs.all, c)
		case "service":
			objs.services = append(objs.services, c)
		default:
			objs.all = append(objs.all, c)
		}
	}
	return objs, nil
}

// List returns the sandboxes whose primary carries every given label; only running
// ones unless all.
func (rt *Runtime) List(ctx context.Context, labels map[string]string, all bool) ([]backend.Info, error) {
	args := filters.NewArgs(filters.Arg("label", backend.LabelRole+"=primary"), filters.Arg("label", backend.LabelSandbox))
	if rt.Owner != "" {
		// Only this daemon's: List serves the reaper, which must never touch
		// another daemon's sandboxes (nor unowned ones it cannot vouch for).
		args.Add("label", backend.LabelOwner+"="+rt.Owner)
	}
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	list, err := rt.Engine.ContainerList(ctx, container.ListOptions{All: all, Filters: args})
	if err != nil {
		return nil, failed("cannot list sandboxes: %v", err)
	}
	out := make([]backend.Info, 0, len(list))
	for _, c := range list {
		out = append(out, infoOf(c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// infoOf describes the sandbox whose primary is c.
func infoOf(c container.Summary) backend.Info {
	in := backend.Info{
		ID: c.Labels[backend.LabelSandbox], Kind: c.Labels[backend.LabelKind], Project: c.Labels[backend.LabelProject],
		CreatedAt: time.Unix(c.Created, 0).UTC(), PlanHash: c.Labels[backend.LabelPlanHash], Image: c.Image,
		Container: c.ID, Labels: userLabels(c.Labels),
		CLIPid: c.Labels[backend.LabelCLIPid], CLIStart: c.Labels[backend.LabelCLIStart], Pool: c.Labels[backend.LabelPool],
	}
	switch c.State {
	case "running":
		in.State = "running"
	case "exited", "dead":
		in.State = "stopped"
	default:
		in.State = c.State
	}
	in.Daemons.Total, _ = strconv.Atoi(c.Labels[backend.LabelDaemons])
	return in
}

// userLabels drops airlock's own labels.
func userLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if len(k) < 11 || k[:11] != "dev.airlock" {
			out[k] = v
		}
	}
	return out
}

// Get returns the sandbox with this ID (its primary must exist).
func (rt *Runtime) Get(ctx context.Context, id string) (*backend.Info, error) {
	objs, err := listObjects(ctx, rt.Engine, ownerKey(rt.Owner), id)
	if err != nil {
		return nil, err
	}
	if objs.primary == nil {
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	in := infoOf(*objs.primary)
	return &in, nil
}

// Open returns a handle on an existing sandbox, to start it again with the manifest
// it was made from.
func (rt *Runtime) Open(ctx context.Context, id string, r *manifest.Resolved) (*backend.Sandbox, error) {
	objs, err := listObjects(ctx, rt.Engine, ownerKey(rt.Owner), id)
	if err != nil {
		return nil, err
	}
	if objs.primary == nil {
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	p := objs.primary
	sb := &backend.Sandbox{
		ID: id, Name: objectName(id), Project: p.Labels[backend.LabelProject], Kind: p.Labels[backend.LabelKind],
		PlanHash: p.Labels[backend.LabelPlanHash], PrimaryID: p.ID, Services: map[string]string{},
		Own: &sandboxState{manifest: r, shard: p.Labels[LabelShard], hold: p.Labels[LabelHold] != ""},
	}
	for _, s := range objs.services {
		sb.Services[s.Labels[backend.LabelService]] = s.ID
	}
	for _, c := range objs.all {
		if c.Labels[backend.LabelRole] == RoleEgress {
			ownState(sb).egressID = c.ID
		}
	}
	if strings.HasPrefix(p.HostConfig.NetworkMode, egressNetPrefix) {
		sb.Network = p.HostConfig.NetworkMode // a parked network (egress rules)
	} else if _, err := rt.Engine.NetworkInspect(ctx, sb.Name, network.InspectOptions{}); err == nil {
		sb.Network = sb.Name
	}
	ci, err := rt.Engine.ContainerInspect(ctx, p.ID)
	if err == nil && ci.Config != nil {
		sb.TTY = ci.Config.Tty
	}
	// A container that never ran has no status stream to reset.
	if err == nil && ci.ContainerJSONBase != nil && ci.State != nil {
		started, perr := time.Parse(time.RFC3339Nano, ci.State.StartedAt)
		ownState(sb).fresh = perr == nil && started.Year() <= 1
	}
	return sb, nil
}

// Running reports whether a container runs (false when it is gone or the Engine
// cannot say).
func (rt *Runtime) Running(ctx context.Context, containerID string) bool {
	// On this host, a container whose cgroup lists a process runs (read
	// where its cgroup is kept, once learned: procsPlace); else the Engine says.
	if !rt.Remote {
		if n, ok := rt.procsAt.count(containerID); ok && n > 0 {
			return true
		}
	}
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	return err == nil && ci.State != nil && ci.State.Running
}

// ExitCode returns a stopped container's exit code (nil when unknown).
func (rt *Runtime) ExitCode(ctx context.Context, containerID string) *int {
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil || ci.State == nil || ci.State.Running || ci.State.Status == "created" {
		return nil // running, or never ran
	}
	code := ci.State.ExitCode
	return &code
}

// OOMKilled reports whether the Engine says the container was killed for its
// memory limit, and whether it has one (backend.OOMReporter). Engine 20.10
// sets the flag only when it learned of the kill before the exit; else its
// oom event alone says so, after the die event.
func (rt *Runtime) OOMKilled(ctx context.Context, containerID string) (killed, limited bool) {
	ci, err := rt.Engine.ContainerInspect(ctx, containerID)
	if err != nil || ci.ContainerJSONBase == nil || ci.State == nil {
		return false, false
	}
	return ci.State.OOMKilled, ci.HostConfig != nil && ci.HostConfig.Memory > 0
}

var _ backend.OOMReporter = (*Runtime)(nil)
