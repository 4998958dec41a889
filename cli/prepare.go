package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/docker/docker/api/types/registry"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/registryauth"
)

// prepareViaDaemon has the daemon do what comes before a create and can be
// watched (POST /v1/prepare): the host side of the manifest checked (a missing
// mount source with missing = "fail" is a config error, exit 2), warnings, and
// the images pulled or built, the progress on stderr unless -q. The registry
// credentials of this user (registryauth, as docker pull finds them) go with
// the request, for it only; a cluster pulls with its own. Through a daemon on
// another machine a [sandbox.build] context is sent first (PUT
// /v1/build-contexts); the manifest to create from then names the image built
// from it instead (the daemon cannot read the context dir): it is returned,
// r itself otherwise.
func (a *app) prepareViaDaemon(ctx context.Context, c *client.Client, r *manifest.Resolved, eng *client.Engine) (*manifest.Resolved, error) {
	wm, values, err := wireManifest(r)
	if err != nil {
		return nil, withCode(ExitAirlock, err)
	}
	req := &client.PrepareRequest{Manifest: wm, Secrets: values, Engine: eng, Quiet: a.opts.quiet, TTY: isTerminal(a.stderr), ClientFiles: a.remoteDaemon(), ToolEnv: a.toolEnv()}
	if !endpointOf(eng).IsKubernetes() {
		req.RegistryAuth, req.BuildAuth = a.registryAuth(r)
	}
	created := r
	if r.Sandbox.Build != nil && a.remoteDaemon() {
		bs, err := projectfs.ReadBuildContext(r)
		if err != nil {
			return nil, exitcode.OfSandbox(err)
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(bs.WriteTar(pw)) }()
		err = c.PutBuildContext(ctx, bs.Sum, pr)
		pr.CloseWithError(io.ErrClosedPipe)
		if err != nil {
			return nil, withCode(ExitAirlock, fmt.Errorf("cannot send the build context to the daemon at %s: %w", a.remoteHost(), apiFailure(err)))
		}
		req.BuildContext = bs.Sum
		built := *r
		built.Sandbox.Build, built.Sandbox.Image = nil, bs.Tag
		created = &built
	}
	var progress io.Writer
	if !a.opts.quiet {
		progress = a.redactor.Writer(a.stderr)
	}
	// Prepare is idempotent (checks, the image made or pulled once): a daemon
	// that goes away meanwhile is started again and asked again.
	_, err = retryDaemon(a, ctx, func() (struct{}, error) { return struct{}{}, c.Prepare(ctx, req, progress) })
	var pe *client.PrepareError
	switch {
	case err == nil:
		return created, nil
	case errors.As(err, &pe) && pe.ExitCode == ExitUsage:
		return nil, configError(errors.New(pe.Err.Message))
	case errors.As(err, &pe) && pe.ExitCode != 0:
		return nil, withCode(pe.ExitCode, errors.New(pe.Err.Message))
	}
	return nil, apiFailure(err)
}

// remoteDaemon says the daemon is not on this machine: it cannot read this
// machine's files (a unix:// address is a daemon here).
func (a *app) remoteDaemon() bool {
	h := a.remoteHost()
	if h == "" {
		return false
	}
	u, err := url.Parse(h)
	return err != nil || u.Scheme != "unix"
}

// registryAuth are this user's credentials for the images r pulls (the sandbox
// image, unless built, and the services'), by reference, and for a build every
// stored one (as docker build sends them), by registry. A lookup that fails is
// passed on: the daemon's pull fails with it, as this process's would have.
func (a *app) registryAuth(r *manifest.Resolved) (pulls, build map[string]client.RegistryAuth) {
	refs := make([]string, 0, len(r.Services)+1)
	if r.Sandbox.Build == nil && r.Sandbox.Image != "" {
		refs = append(refs, r.Sandbox.Image)
	}
	for _, s := range r.Services {
		refs = append(refs, s.Image)
	}
	if len(refs) > 0 {
		pulls = make(map[string]client.RegistryAuth, len(refs))
	}
	for _, ref := range refs {
		if _, done := pulls[ref]; done {
			continue
		}
		c, err := registryauth.For(ref, a.getenv)
		if err != nil {
			pulls[ref] = client.RegistryAuth{Error: err.Error()}
			continue
		}
		ra := wireAuth(c.AuthConfig())
		ra.Source, ra.Where, ra.Warning = c.Source, c.Where(), c.Warning
		pulls[ref] = ra
	}
	if r.Sandbox.Build != nil {
		// A failed lookup leaves the daemon to find them (and fail the same way).
		if auths, err := registryauth.All(a.getenv); err == nil {
			build = make(map[string]client.RegistryAuth, len(auths))
			for k, v := range auths {
				build[k] = wireAuth(v)
			}
		}
	}
	return pulls, build
}

func wireAuth(a registry.AuthConfig) client.RegistryAuth {
	return client.RegistryAuth{Username: a.Username, Password: a.Password, Auth: a.Auth, IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken, ServerAddress: a.ServerAddress}
}

// toolEnvNames are the variables the builtin tools' host paths come from
// (sandbox/mounts.go, sandbox/gotoolchain.go).
var toolEnvNames = []string{"GOCACHE", "GOPATH", "GOMODCACHE", "GOROOT", "PATH", "UV_CACHE_DIR", "SSH_AUTH_SOCK"}

// toolEnv is this command's environment for the builtin tools, sent with
// each prepare and create so that `GOCACHE=/tmp/x airlock run …` counts
// although the daemon was started by an earlier command with another. None
// to a daemon on another machine (its tools are skipped).
func (a *app) toolEnv() map[string]string {
	if a.remoteDaemon() {
		return nil
	}
	out := map[string]string{}
	for _, k := range toolEnvNames {
		v, _ := a.getenv(k)
		out[k] = v // "" for one this command lacks: the default, not the daemon's
	}
	return out
}
