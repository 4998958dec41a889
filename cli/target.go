package cli

import (
	"path/filepath"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/engine"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// target is where a new sandbox goes, as the CLI resolves it without opening
// an Engine or cluster client: the daemon is told, and opens it.
type target struct {
	// engine is the Docker Engine or Kubernetes backend to create it on (nil:
	// the daemon's own, for a daemon on another machine).
	engine *client.Engine
	// remote says the sandbox cannot see this host's files: its project is
	// copied in when the manifest says "auto".
	remote bool
	kube   bool
	// clientFiles says the daemon is on another machine: the CLI writes the
	// project and [copies] into the created sandbox through the files API.
	clientFiles bool
}

// projectCopied reports whether a sandbox of r on t gets a copy of the
// project rather than a bind mount (then run --output copies results back).
func (t *target) projectCopied(r *manifest.Resolved) bool {
	return projectfs.Mode(r, t.remote) == "copy"
}

// target resolves where this invocation's sandbox goes (--backend,
// AIRLOCK_BACKEND, config.toml; DOCKER_HOST, DOCKER_CONTEXT or the kubeconfig).
func (a *app) target() (*target, error) {
	b, err := a.backend()
	if err != nil {
		return nil, err
	}
	if b.Kube() {
		ep, err := a.kubeEndpoint(b)
		if err != nil {
			return nil, err
		}
		return &target{engine: wireEngine(ep), remote: true, kube: true, clientFiles: a.remoteDaemon()}, nil
	}
	if a.remoteHost() != "" {
		// The daemon's own Engine. A daemon on another machine cannot see
		// this one's files; one on a unix socket here can.
		return &target{remote: a.remoteDaemon(), clientFiles: a.remoteDaemon()}, nil
	}
	ep, err := engine.Resolve(a.getenv)
	if err != nil {
		return nil, withCode(ExitAirlock, err)
	}
	return &target{engine: wireEngine(ep), remote: !ep.Local()}, nil
}

// wireEngine is ep as the daemon's API carries it.
func wireEngine(ep engine.Endpoint) *client.Engine { return engine.ToWire(ep) }

// endpointOf is the endpoint of an Engine the API names (the zero one for
// nil), a cluster packed in Host as an earlier daemon answers read into the
// typed form.
func endpointOf(e *client.Engine) engine.Endpoint {
	ep, _ := engine.FromWire(e)
	return ep
}

// engineHost is the host of an Engine the API names, for people: a cluster's
// in the packed form ("kubernetes:///NAMESPACE?context=…").
func engineHost(e *client.Engine) string {
	ep := endpointOf(e)
	ep.Context = ""
	return ep.String()
}

// firstPath is the first file of a KUBECONFIG list ("" for none): the one the
// daemon is told to read, so that it reaches the cluster the CLI reached.
func firstPath(list string) string {
	for _, p := range filepath.SplitList(list) {
		if p != "" {
			return p
		}
	}
	return ""
}
