package cli

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/imagetar"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/userconfig"
)

// backendEnv chooses the backend over config.toml's runtime.backend; --backend
// wins over both.
const backendEnv = "AIRLOCK_BACKEND"

// backendChoice is the backend this invocation uses, and its settings.
type backendChoice struct {
	// Name is userconfig.BackendDocker or userconfig.BackendKubernetes.
	Name string
	// From says where Name came from: "--backend", "AIRLOCK_BACKEND", the
	// config.toml path (when the file exists: its runtime.backend or the
	// default), or "default".
	From string
	// Kubernetes is [kubernetes] of config.toml, with Image resolved: this
	// build's localhost/airlock image when the file leaves it empty.
	Kubernetes userconfig.Kubernetes
}

// Kube reports whether the backend is Kubernetes.
func (b *backendChoice) Kube() bool { return b.Name == userconfig.BackendKubernetes }

// manifestBackend is the backend as manifest.CheckBackend takes it.
func (b *backendChoice) manifestBackend() manifest.Backend {
	return manifest.Backend{Name: b.Name, AllowPrivileged: b.Kubernetes.AllowPrivileged}
}

// checkBackendFlag refuses an unknown --backend before any command runs
// (a usage error, exit 2).
func (a *app) checkBackendFlag() error {
	if !a.opts.backendSet {
		return nil
	}
	if err := userconfig.CheckBackend(a.opts.backend); err != nil {
		return withCode(ExitUsage, fmt.Errorf("invalid --backend: %w", err))
	}
	return nil
}

// backend returns the backend to use: --backend, else AIRLOCK_BACKEND (when
// not empty), else runtime.backend of config.toml, else docker; with the
// [kubernetes] settings of config.toml. An unknown name is a usage error naming
// it, the choices and where it came from; a config.toml that does not load is
// a config error (both exit 2).
func (a *app) backend() (*backendChoice, error) {
	b := &backendChoice{}
	switch env, _ := a.getenv(backendEnv); {
	case a.opts.backendSet:
		if err := a.checkBackendFlag(); err != nil {
			return nil, err
		}
		b.Name, b.From = a.opts.backend, "--backend"
	case env != "":
		if err := userconfig.CheckBackend(env); err != nil {
			return nil, withCode(ExitUsage, fmt.Errorf("invalid %s: %w", backendEnv, err))
		}
		b.Name, b.From = env, backendEnv
	}
	cfg, err := a.userConfig()
	if err != nil {
		return nil, err
	}
	if b.Name == "" {
		b.Name, b.From = cfg.Runtime.Backend, "default"
		if cfg.Exists {
			b.From = cfg.File
		}
	}
	b.Kubernetes = cfg.Kubernetes
	if b.Kubernetes.Image == "" {
		b.Kubernetes.Image = imagetar.ImageRef(BuildID)
	}
	return b, nil
}

// checkBackend reports what r cannot mean on backend b (manifest.CheckBackend):
// its warnings on stderr, its problems as config errors (exit 2).
func (a *app) checkBackend(r *manifest.Resolved, b *backendChoice) error {
	warnings, err := manifest.CheckBackend(r, b.manifestBackend())
	for _, w := range warnings {
		fmt.Fprintln(a.stderr, "warning: "+w)
	}
	switch {
	case err == nil:
		return nil
	case manifest.IsConfigError(err):
		return configError(err)
	default:
		return withCode(ExitUsage, err)
	}
}

// userConfig loads the user's config.toml: a file that does not load is a
// config error (exit 2).
func (a *app) userConfig() (*userconfig.Config, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	home, _ := a.getenv("HOME")
	cfg, err := userconfig.LoadWithHome(p.UserConfig(), home)
	if err != nil {
		if userconfig.IsConfigError(err) {
			return nil, configError(err)
		}
		return nil, withCode(ExitUsage, err)
	}
	return cfg, nil
}

// manifestFor loads the manifest, checks it for the chosen backend and warns
// of what it grants (config, validate): what those commands read.
func (a *app) manifestFor() (*manifest.Resolved, *backendChoice, error) {
	b, err := a.backend()
	if err != nil {
		return nil, nil, err
	}
	r, err := a.loadManifest()
	if err != nil {
		return nil, nil, err
	}
	if err := a.checkBackend(r, b); err != nil {
		return nil, nil, err
	}
	a.warnPrivileged(r)
	return r, b, nil
}
