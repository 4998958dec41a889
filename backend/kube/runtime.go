package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/engine/kubecontext"
	"github.com/airlock-dev/airlock/manifest"
)

// Config and ConfigOf are the endpoint of a Kubernetes backend (its
// engine.Kubernetes), as package kubecontext reads it from the kubeconfig
// without reaching the cluster.

// Config says which cluster, namespace and airlock image a runtime uses.
type Config = kubecontext.Config

// ConfigOf reads a Config back from a Kubernetes backend's endpoint (Config.Endpoint).
func ConfigOf(ep engine.Endpoint) (Config, error) { return kubecontext.ConfigOf(ep) }

var _ backend.Backend = (*Runtime)(nil)

// Runtime runs sandboxes as Pods of one namespace of a cluster.
type Runtime struct {
	cfg      Config
	rest     *rest.Config
	core     *rest.RESTClient // the core/v1 API (client.go)
	endpoint engine.Endpoint

	onService func(sandboxID, service string, ready bool, detail string)
	onStep    func(sandboxID, step string, d time.Duration)

	mu      sync.Mutex
	nsReady bool
	live    map[string]*podState  // by sandbox ID: what Start needs of Create
	sizes   map[string]*sizeQueue // by sandbox ID: the attached terminal's sizes
}

// podState is what this runtime keeps of a sandbox it created or opened.
type podState struct {
	pod      string
	resolved *manifest.Resolved
	values   map[string]string // delivered at start
	parked   bool              // made for a warm pool: its values come with its claim
	// claimW, for a parked Pod a run attached to (Attach), is that attach's
	// stdin: Claim writes the claim on it, then the run's stdin (claimIn).
	claimW  *io.PipeWriter
	claimIn io.Reader
}

// IsEndpoint reports whether an endpoint names a Kubernetes backend.
func IsEndpoint(ep engine.Endpoint) bool { return ep.IsKubernetes() }

// load is kubecontext.Load, its failure airlock's (exit 125).
func load(cfg Config) (clientcmd.ClientConfig, Config, error) {
	cc, cfg, err := kubecontext.Load(cfg)
	if err != nil {
		return nil, cfg, &backend.Error{Code: 125, Err: err}
	}
	return cc, cfg, nil
}

// Open connects to the cluster of cfg as kubectl would (client-go's loading
// rules), resolving the current context so that the endpoint names it.
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	cc, cfg, err := load(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, &backend.Error{Code: 125, Err: fmt.Errorf("cannot use the Kubernetes context %q: %w", cfg.Context, err)}
	}
	rc.QPS, rc.Burst = 50, 100
	core, err := newCoreClient(rc)
	if err != nil {
		return nil, &backend.Error{Code: 125, Err: fmt.Errorf("cannot make a Kubernetes client: %w", err)}
	}
	rt := &Runtime{cfg: cfg, rest: rc, core: core, endpoint: cfg.Endpoint(), live: map[string]*podState{}}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := core.Get().AbsPath("/version").DoRaw(pctx); err != nil {
		return nil, &backend.Error{Code: 125, Err: fmt.Errorf("cannot reach the Kubernetes cluster of context %q at %s: %w", cfg.Context, rc.Host, err)}
	}
	return rt, nil
}

// Location is the endpoint naming this backend.
func (rt *Runtime) Location() engine.Endpoint { return rt.endpoint }

// Namespace is the namespace the sandboxes' Pods live in.
func (rt *Runtime) Namespace() string { return rt.cfg.Namespace }

// SetHooks sets what hears services' first results and the steps' durations.
func (rt *Runtime) SetHooks(onService func(sandboxID, service string, ready bool, detail string), onStep func(sandboxID, step string, d time.Duration)) {
	rt.onService, rt.onStep = onService, onStep
}

func (rt *Runtime) step(id, name string) func() {
	start := time.Now()
	return func() {
		if rt.onStep != nil {
			rt.onStep(id, name, time.Since(start))
		}
	}
}

// ensureNamespace makes the namespace when it is missing and that is allowed.
func (rt *Runtime) ensureNamespace(ctx context.Context) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.nsReady {
		return nil
	}
	err := rt.getNamespace(ctx)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err) && rt.cfg.CreateNamespace:
		err = rt.createNamespace(ctx)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return failed("cannot create the namespace %s: %v", rt.cfg.Namespace, err)
		}
	case apierrors.IsNotFound(err):
		return failed("the namespace %s does not exist (create it, or allow airlock to: [kubernetes] create_namespace = true)", rt.cfg.Namespace)
	case apierrors.IsForbidden(err):
		// Reading namespaces may be forbidden where using one is not: go on.
	default:
		return failed("cannot read the namespace %s: %v", rt.cfg.Namespace, err)
	}
	rt.nsReady = true
	return nil
}

func failed(format string, args ...any) error {
	return &backend.Error{Code: 125, Err: fmt.Errorf(format, args...)}
}

func configErr(format string, args ...any) error {
	return &backend.Error{Code: 2, Err: fmt.Errorf(format, args...)}
}

var errGone = errors.New("the sandbox's Pod is gone")
