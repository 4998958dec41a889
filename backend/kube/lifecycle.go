package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/internal/ids"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/supervisor"
)

// whyPending says what keeps a Pod from running: the scheduler's message, or
// the first container's waiting reason.
func whyPending(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			return "not scheduled: " + c.Message
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.State.Running != nil && cs.Started != nil && !*cs.Started && strings.HasPrefix(cs.Name, ServicePrefix) {
			return fmt.Sprintf("service %s runs but has not passed its healthcheck", strings.TrimPrefix(cs.Name, ServicePrefix))
		}
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				if w.Message != "" {
					return fmt.Sprintf("container %s is waiting: %s: %s", cs.Name, w.Reason, w.Message)
				}
				return fmt.Sprintf("container %s is waiting: %s", cs.Name, w.Reason)
			}
		}
	}
	return "it is " + strings.ToLower(string(p.Status.Phase))
}

// Create makes the sandbox's Pod and waits until its primary runs, held: the
// supervisor starts nothing before Start delivers. The project is copied in
// meanwhile (a cluster cannot see this host's files).
func (rt *Runtime) Create(ctx context.Context, req *backend.Request) (sb *backend.Sandbox, err error) {
	r := req.Manifest
	if req.ID == "" {
		req.ID = ids.New()
	} else if err := ids.Validate(req.ID); err != nil {
		return nil, configErr("%v", err)
	}
	if _, err := manifest.CheckBackend(r, manifest.Backend{Name: manifest.BackendKubernetes, AllowPrivileged: rt.cfg.AllowPrivileged}); err != nil {
		return nil, configErr("%v", err)
	}
	if err := rt.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	name := PodName(req.ID)
	if _, err := rt.pods().Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil, configErr("sandbox %s already exists", req.ID)
	}
	uid, gid, err := numericUser(r.Sandbox.User)
	if err != nil {
		return nil, configErr("sandbox.user: %v", err)
	}
	spec := backend.BuildSpec(req, r)
	// Held until Start delivers the values; a pooled sandbox is parked
	// instead (its daemons that take no value start, the rest waits for its
	// claim: docs/pool.md).
	spec.Hold, spec.Park, spec.ClaimStdin = !req.Park, req.Park, req.Park
	labels := req.Labels
	if req.Park {
		labels = maps.Clone(labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[backend.LabelPool] = req.PoolKey
	}
	runUID, runGID, mainUser := PodUser(r, spec, uid, gid)
	planHash := backend.PlanHash(r, r.Sandbox.Image)
	pod, err := BuildPod(PodInput{
		ID: req.ID, Namespace: rt.cfg.Namespace, AirlockImage: rt.cfg.Image, Kind: req.Kind, Labels: labels,
		Manifest: r, Spec: spec, RunAsUser: runUID, RunAsGroup: runGID, MainUser: mainUser, TTY: req.TTY, Stdin: req.Stdin || req.TTY || req.Park,
		PlanHash: planHash, Owner: rt.cfg.Owner, CLIPid: req.CLIPid, CLIStart: req.CLIStart, AllowPrivileged: rt.cfg.AllowPrivileged,
		Keeper: req.KeepFiles, Settings: rt.cfg.Pod,
	})
	if err != nil {
		return nil, err
	}
	done := rt.step(req.ID, "create")
	if _, err := rt.pods().Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, failed("cannot create the Pod of sandbox %s: %v", req.ID, err)
	}
	done()
	defer func() {
		if err != nil {
			if rmErr := rt.Remove(context.WithoutCancel(ctx), req.ID); rmErr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, rmErr)
			}
		}
	}()
	done = rt.step(req.ID, "start")
	// sandbox.ready_timeout bounds the Pod's start: scheduling, image
	// pulls, required services getting ready.
	limit, err := backend.ReadyTimeout(r)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	timedOut := func(err error) error {
		if wctx.Err() == nil || ctx.Err() != nil {
			return err
		}
		why := "its state is unknown"
		if p, gerr := rt.pods().Get(context.WithoutCancel(ctx), name, metav1.GetOptions{}); gerr == nil {
			why = whyPending(p)
		}
		return failed("the sandbox's Pod %s did not run within sandbox.ready_timeout (%s): %s (see kubectl describe pod -n %s %s)", name, limit, why, rt.cfg.Namespace, name)
	}
	if err := rt.startServices(wctx, name, r); err != nil {
		return nil, timedOut(err)
	}
	if _, err := rt.waitPod(wctx, name, primaryRunning); err != nil {
		return nil, timedOut(err)
	}
	done()
	for _, svc := range slices.Sorted(maps.Keys(r.Services)) {
		if rt.onService != nil {
			rt.onService(req.ID, svc, true, "")
		}
	}
	if !req.ClientFiles { // else the client writes them (files API)
		done = rt.step(req.ID, "copy-in")
		err = rt.copyFiles(ctx, name, r, uid, gid, rt.cfg.HostHome)
		done()
		if err != nil {
			return nil, err
		}
	}
	sb = backend.Handle(req.ID, name, req.TTY)
	sb.Name, sb.Project, sb.Kind, sb.PlanHash = name, r.ProjectDir, req.Kind, planHash
	rt.mu.Lock()
	rt.live[req.ID] = &podState{pod: name, resolved: r, values: backend.DeliveredValues(req, r), parked: req.Park}
	rt.mu.Unlock()
	return sb, nil
}

// startServices hands each wrapped service (one with substituted env) its values
// once its sidecar runs: it waits for them before its command starts, and the
// primary starts only once the required services are ready.
func (rt *Runtime) startServices(ctx context.Context, pod string, r *manifest.Resolved) error {
	pending := map[string]map[string]string{} // container → values
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		if v := backend.ServiceValues(name, r); len(v) > 0 {
			pending[ContainerName(name)] = v
		}
	}
	for len(pending) > 0 {
		var ready []string
		_, err := rt.waitPod(ctx, pod, func(p *corev1.Pod) (bool, error) {
			ready = ready[:0]
			for _, cs := range p.Status.InitContainerStatuses {
				if _, ok := pending[cs.Name]; ok && cs.State.Running != nil {
					ready = append(ready, cs.Name)
				}
			}
			if len(ready) > 0 {
				return true, nil
			}
			return primaryRunning(p)
		})
		if err != nil {
			return err
		}
		if len(ready) == 0 {
			return nil // the primary runs: what is left is not waited for
		}
		for _, c := range ready {
			if err := backend.DeliverValues(ctx, inContainer{rt, c}, pod, pending[c]); err != nil {
				return fmt.Errorf("service %s: %w", strings.TrimPrefix(c, ServicePrefix), err)
			}
			delete(pending, c)
		}
	}
	return nil
}

// PodUser returns who the main container runs as (runAsUser, runAsGroup) for
// the sandbox user uid:gid (sandbox.user, nil when it is empty): that user,
// unless a daemon names another one while it is not root
// (manifest.DaemonUsersBeside). Then the container runs as root, so that PID 1
// can start that daemon, and spec gets the sandbox user for the main command,
// `supervise exec` (exec, the shell of up) and the daemons without a user
// (backend.MainUser); mainUser is that user then ("" otherwise), which the Pod
// records for the files API.
func PodUser(r *manifest.Resolved, spec *supervisor.Spec, uid, gid *int64) (runAsUser, runAsGroup *int64, mainUser string) {
	if len(manifest.DaemonUsersBeside(r)) == 0 {
		return uid, gid, ""
	}
	backend.MainUser(spec, r.Sandbox.User)
	root, rootGroup := int64(0), int64(0)
	return &root, &rootGroup, r.Sandbox.User
}

// numericUser reads sandbox.user as "uid" or "uid:gid" (nil when empty).
func numericUser(spec string) (uid, gid *int64, err error) {
	if spec == "" {
		return nil, nil, nil
	}
	u, g, hasGroup := strings.Cut(spec, ":")
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 {
		return nil, nil, fmt.Errorf("%q is not a numeric uid (Kubernetes runs numeric users only)", spec)
	}
	uid = &n
	if hasGroup {
		m, err := strconv.ParseInt(g, 10, 64)
		if err != nil || m < 0 {
			return nil, nil, fmt.Errorf("%q is not a numeric uid:gid", spec)
		}
		gid = &m
	}
	return uid, gid, nil
}

// copyIn streams an archive of paths relative to "/" into the held primary
// through `supervise untar`; what names it in errors.
func (rt *Runtime) copyIn(ctx context.Context, pod, what string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw)) }()
	var out bytes.Buffer
	code, err := rt.stream(ctx, pod, MainContainer, []string{backend.SupervisorIn, "supervise", "untar", "/"}, pr, &out, &out, false, nil)
	pr.CloseWithError(io.ErrClosedPipe)
	if err == nil && code != 0 {
		err = fmt.Errorf("%s", bytes.TrimSpace(out.Bytes()))
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return err
	}
	if err != nil {
		return failed("cannot copy %s into the sandbox: %v", what, err)
	}
	return nil
}

// copyFiles copies the project and every
// [copies] entry into the held primary, owned by the sandbox user.
func (rt *Runtime) copyFiles(ctx context.Context, pod string, r *manifest.Resolved, uid, gid *int64, hostHome string) error {
	u, g := 0, 0
	if uid != nil {
		u = int(*uid)
	}
	if gid != nil {
		g = int(*gid)
	}
	if r.ProjectDir != "" {
		if err := rt.copyIn(ctx, pod, "the project "+r.ProjectDir, func(w io.Writer) error {
			return projectfs.WriteProjectArchive(w, r.ProjectDir, u, g)
		}); err != nil {
			return err
		}
	}
	if len(r.Copies) > 0 {
		home := "/root"
		if u != 0 {
			home = "/" // a numeric user's home is not known without the image's /etc/passwd
		}
		return rt.copyIn(ctx, pod, "[copies]", func(w io.Writer) error {
			return projectfs.WriteCopiesArchive(w, r, u, g, home, hostHome)
		})
	}
	return nil
}

// Open returns a handle on an existing sandbox, to start it with r.
func (rt *Runtime) Open(ctx context.Context, id string, r *manifest.Resolved) (*backend.Sandbox, error) {
	name := PodName(id)
	pod, err := rt.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	if err != nil {
		return nil, failed("cannot read the Pod of sandbox %s: %v", id, err)
	}
	sb := backend.Handle(id, name, mainTTY(pod))
	rt.mu.Lock()
	st := rt.live[id]
	if st == nil {
		st = &podState{pod: name}
		rt.live[id] = st
	}
	if r != nil {
		st.resolved = r
		st.values = backend.DeliveredValues(&backend.Request{}, r)
	}
	rt.mu.Unlock()
	return sb, nil
}

func mainTTY(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == MainContainer {
			return c.TTY
		}
	}
	return false
}

// Start releases the held supervisor with its values. A Pod cannot start twice:
// a sandbox whose primary ended is made again by `up`.
func (rt *Runtime) Start(ctx context.Context, sb *backend.Sandbox) error {
	rt.mu.Lock()
	st := rt.live[sb.ID]
	rt.mu.Unlock()
	if st == nil {
		return failed("cannot start sandbox %s: this daemon did not create it", sb.ID)
	}
	pod, err := rt.pods().Get(ctx, sb.PrimaryID, metav1.GetOptions{})
	if err != nil {
		return failed("cannot read the Pod of sandbox %s: %v", sb.ID, err)
	}
	if ok, _ := primaryRunning(pod); !ok || pod.DeletionTimestamp != nil {
		return failed("cannot start sandbox %s again: its Pod's primary ended (on the kubernetes backend a stopped sandbox is gone; airlock up makes a new one)", sb.ID)
	}
	if !st.parked { // a parked one gets its values with its claim
		defer rt.step(sb.ID, "secrets delivery")()
		if err := backend.DeliverValues(ctx, rt, sb.PrimaryID, st.values); err != nil {
			return err
		}
	}
	// The primary ran since Create, held: the annotation tells a started one
	// from a held one (Running, ps), for this daemon and the next.
	patch := []byte(`{"metadata":{"annotations":{"` + annotationStarted + `":"true"}}}`)
	if err := rt.pods().Patch(ctx, sb.PrimaryID, types.MergePatchType, patch); err != nil {
		return failed("cannot mark sandbox %s started: %v", sb.ID, err)
	}
	return nil
}

// annotationStarted marks a Pod whose supervisor was released by Start.
const annotationStarted = "dev.airlock.started"

func started(p *corev1.Pod) bool { return p.Annotations[annotationStarted] == "true" }

// Stop deletes the Pod, giving the supervisor its stop timeout to shut the
// daemons down: a Pod cannot be stopped and started again.
func (rt *Runtime) Stop(ctx context.Context, id string) error {
	err := rt.pods().Delete(ctx, PodName(id), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return failed("cannot stop sandbox %s: %v", id, err)
	}
	// Until the Pod is gone, not only its primary: an `up` right after the stop
	// must not find the Pod still terminating and try to start it.
	never := func(*corev1.Pod) (bool, error) { return false, nil }
	if _, err := rt.waitPod(ctx, PodName(id), never); err != nil && err != errGone {
		return err
	}
	return nil
}

// Remove deletes the sandbox's Pod at once; a missing one is not an error.
func (rt *Runtime) Remove(ctx context.Context, id string) error {
	zero := int64(0)
	err := rt.pods().Delete(ctx, PodName(id), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsForbidden(err) {
		// A user without the right to delete Pods may still read them: a Pod
		// that was never made (its create was refused too) is removed.
		if _, gerr := rt.pods().Get(ctx, PodName(id), metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			err = nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return failed("cannot remove sandbox %s: %v", id, err)
	}
	rt.mu.Lock()
	delete(rt.live, id)
	rt.mu.Unlock()
	return nil
}

// RemoveContainers is Remove: the Pod holds every container.
func (rt *Runtime) RemoveContainers(ctx context.Context, id string) error { return rt.Remove(ctx, id) }

// RemoveNetworks does nothing: a Pod has no network of its own to remove.
func (rt *Runtime) RemoveNetworks(context.Context, string) error { return nil }

func (rt *Runtime) pods() podClient { return podClient{rc: rt.core, ns: rt.cfg.Namespace} }

// mainStatus is the primary container's status in a Pod (nil before it has one).
func mainStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == MainContainer {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// primaryRunning is true once the primary runs; an error says why it never will.
func primaryRunning(pod *corev1.Pod) (bool, error) {
	if cs := mainStatus(pod); cs != nil {
		switch {
		case cs.State.Running != nil:
			return true, nil
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			return false, failed("the sandbox's primary exited with code %d before it was started (%s)", t.ExitCode, strings.TrimSpace(t.Reason+" "+t.Message))
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false, failed("the sandbox's Pod ended before its primary ran: %s %s", pod.Status.Reason, pod.Status.Message)
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff", "RunContainerError":
					return false, failed("the sandbox's container %s cannot run: %s: %s", cs.Name, w.Reason, w.Message)
				}
			}
			if t := cs.State.Terminated; t != nil && cs.Name != MainContainer && t.ExitCode != 0 && !isSidecar(pod, cs.Name) {
				return false, failed("the sandbox's init container %s failed with code %d: %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Reason+" "+t.Message))
			}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return false, failed("the sandbox's Pod cannot be scheduled: %s", c.Message)
		}
	}
	return false, nil
}

func isSidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// primaryEnded is true once the primary terminated (or the Pod failed without it).
func primaryEnded(pod *corev1.Pod) (bool, error) {
	if cs := mainStatus(pod); cs != nil && cs.State.Terminated != nil {
		return true, nil
	}
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded, nil
}

// waitPod waits until cond holds for the Pod (errGone when it is deleted).
func (rt *Runtime) waitPod(ctx context.Context, name string, cond func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	for {
		pod, err := rt.pods().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, errGone
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, failed("cannot wait for the sandbox's Pod %s: %v", name, ctx.Err())
			}
			return nil, failed("cannot read the Pod %s: %v", name, err)
		}
		if ok, err := cond(pod); ok || err != nil {
			return pod, err
		}
		w, err := rt.pods().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: pod.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return nil, failed("timed out waiting for the sandbox's Pod %s (see kubectl describe pod -n %s %s)", name, rt.cfg.Namespace, name)
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil, errGone
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ok, err := cond(p); ok || err != nil {
				w.Stop()
				return p, err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil, failed("timed out waiting for the sandbox's Pod %s (see kubectl describe pod -n %s %s)", name, rt.cfg.Namespace, name)
		}
	}
}

// Running reports whether a sandbox's primary runs, started (not held).
func (rt *Runtime) Running(ctx context.Context, pod string) bool {
	p, err := rt.pods().Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return false
	}
	cs := mainStatus(p)
	return cs != nil && cs.State.Running != nil && started(p)
}

// ExitCode is the primary's exit code once it ended (nil before, or when unknown).
func (rt *Runtime) ExitCode(ctx context.Context, pod string) *int {
	p, err := rt.pods().Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if cs := mainStatus(p); cs != nil && cs.State.Terminated != nil {
		c := int(cs.State.Terminated.ExitCode)
		return &c
	}
	return nil
}

// PrimaryEnd is the primary's exit code and the last lines of its output, once it ended.
func (rt *Runtime) PrimaryEnd(ctx context.Context, pod string, lines int) (*int, string, bool) {
	code := rt.ExitCode(ctx, pod)
	if code == nil {
		return nil, "", false
	}
	n := int64(lines)
	b, err := rt.pods().Logs(pod, &corev1.PodLogOptions{Container: MainContainer, TailLines: &n}).DoRaw(ctx)
	if err != nil {
		return code, "", true
	}
	return code, string(b), true
}

// KillPrimary signals the primary's PID 1 (SIGKILL removes the Pod at once: a
// cluster has no kill call).
func (rt *Runtime) KillPrimary(ctx context.Context, pod, signal string) error {
	if signal == "SIGKILL" || signal == "KILL" || signal == "9" {
		zero := int64(0)
		err := rt.pods().Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	_, err := rt.stream(ctx, pod, MainContainer, []string{backend.SupervisorIn, "supervise", "signal", signal}, nil, io.Discard, io.Discard, false, nil)
	return err
}

// Get describes one sandbox.
func (rt *Runtime) Get(ctx context.Context, id string) (*backend.Info, error) {
	p, err := rt.pods().Get(ctx, PodName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil) {
		// A Pod being deleted is gone for good: it cannot be started again.
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, id)
	}
	if err != nil {
		return nil, failed("cannot read the Pod of sandbox %s: %v", id, err)
	}
	in := info(p)
	return &in, nil
}

// List describes the sandboxes whose Pods carry every given label (this daemon's
// only); running ones unless all.
func (rt *Runtime) List(ctx context.Context, want map[string]string, all bool) ([]backend.Info, error) {
	sel := labels.Set{backend.LabelRole: "primary"}
	if rt.cfg.Owner != "" {
		sel[backend.LabelOwner] = rt.cfg.Owner
	}
	maps.Copy(sel, want)
	list, err := rt.pods().List(ctx, metav1.ListOptions{LabelSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, failed("cannot list sandboxes: %v", err)
	}
	var out []backend.Info
	for i := range list.Items {
		in := info(&list.Items[i])
		if all || in.State == "running" {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b backend.Info) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func info(p *corev1.Pod) backend.Info {
	get := func(k string) string { v, _ := MetaValue(&p.ObjectMeta, k); return v }
	in := backend.Info{
		ID: get(backend.LabelSandbox), Kind: get(backend.LabelKind), Project: get(backend.LabelProject),
		CreatedAt: p.CreationTimestamp.UTC(), PlanHash: get(backend.LabelPlanHash), Container: p.Name,
		Labels: map[string]string{}, CLIPid: get(backend.LabelCLIPid), CLIStart: get(backend.LabelCLIStart), Pool: get(backend.LabelPool),
	}
	for _, c := range p.Spec.Containers {
		if c.Name == MainContainer {
			in.Image = c.Image
		}
	}
	for k, v := range p.Labels {
		if !strings.HasPrefix(k, "dev.airlock") {
			in.Labels[k] = v
		}
	}
	in.Daemons.Total, _ = strconv.Atoi(get(backend.LabelDaemons))
	cs := mainStatus(p)
	switch {
	case p.DeletionTimestamp != nil:
		in.State = "removing"
	case cs != nil && cs.State.Running != nil && started(p):
		in.State = "running"
	case cs != nil && cs.State.Terminated != nil, p.Status.Phase == corev1.PodSucceeded, p.Status.Phase == corev1.PodFailed:
		in.State = "stopped"
	default:
		in.State = "created"
	}
	return in
}

// WatchPrimaries reports the ends of this daemon's primaries (an OOM kill, an
// eviction, a lost node included) from the cluster's watch until ctx ends or the
// watch breaks.
func (rt *Runtime) WatchPrimaries(ctx context.Context, on func(backend.PrimaryEvent)) error {
	sel := labels.Set{backend.LabelRole: "primary"}
	if rt.cfg.Owner != "" {
		sel[backend.LabelOwner] = rt.cfg.Owner
	}
	w, err := rt.pods().Watch(ctx, metav1.ListOptions{LabelSelector: sel.AsSelector().String()})
	if err != nil {
		return err
	}
	defer w.Stop()
	reported := map[string]bool{} // by Pod UID
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the cluster's watch ended")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			uid := string(p.UID)
			if id, _ := MetaValue(&p.ObjectMeta, backend.LabelSandbox); id != "" && !reported[uid] {
				cs := mainStatus(p)
				why := rt.whyTakenAway(ctx, p)
				switch {
				case why != "":
					// Evicted (a lost node, a drain): before its primary ends, if
					// it ever does (the kubelet of a lost node kills nothing).
					reported[uid] = true
					ev := backend.PrimaryEvent{SandboxID: id, Died: true, Reason: "its Pod was " + why}
					if cs != nil && cs.State.Terminated != nil {
						code := int(cs.State.Terminated.ExitCode)
						ev.ExitCode = &code
					}
					on(ev)
				case cs != nil && cs.State.Terminated != nil:
					reported[uid] = true
					code := int(cs.State.Terminated.ExitCode)
					if cs.State.Terminated.Reason == "OOMKilled" {
						on(backend.PrimaryEvent{SandboxID: id, OOM: true})
					}
					on(backend.PrimaryEvent{SandboxID: id, Died: true, ExitCode: &code})
				case ev.Type == watch.Deleted, p.Status.Phase == corev1.PodFailed:
					// Evicted, deleted behind airlock's back, its node lost.
					reported[uid] = true
					on(backend.PrimaryEvent{SandboxID: id, Died: true})
				}
			}
			if ev.Type == watch.Deleted {
				delete(reported, uid) // nothing more comes of this Pod
			}
		}
	}
}

// FollowEgress does nothing: egress rules are refused on this backend.
func (rt *Runtime) FollowEgress(context.Context, string, func(backend.EgressDenial)) error {
	return nil
}

// DiskUsage is unknown on a cluster.
func (rt *Runtime) DiskUsage(context.Context) *backend.DiskUsage { return nil }

// PruneCandidates is empty: a cluster keeps no images or volumes of airlock's.
func (rt *Runtime) PruneCandidates(context.Context, backend.PruneOptions, *backend.DiskUsage) ([]backend.PruneObject, error) {
	return nil, nil
}

// PruneRemove removes nothing.
func (rt *Runtime) PruneRemove(context.Context, backend.PruneObject) (bool, error) { return false, nil }
