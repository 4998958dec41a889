package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/exitcode"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/presets"
	"github.com/airlock-dev/airlock/projectfs"
	"github.com/airlock-dev/airlock/userconfig"
)

// configError marks err as a manifest problem: exit code 2 and a "config error:" prefix
// on every line (exitcode.Config, which the daemon's errors share).
func configError(err error) error { return exitcode.Config(err) }

// manifestFile finds the sandbox.toml to use: --file, else the nearest one above the cwd.
func (a *app) manifestFile() (string, error) {
	if a.opts.file != "" {
		st, err := os.Stat(a.opts.file)
		if err != nil {
			return "", withCode(ExitUsage, fmt.Errorf("cannot use --file %s: %w", a.opts.file, err))
		}
		if st.IsDir() {
			return filepath.Join(a.opts.file, manifest.FileName), nil
		}
		return a.opts.file, nil
	}
	start, err := a.projectFlag()
	if err != nil {
		return "", err
	}
	if start == "" {
		if start, err = os.Getwd(); err != nil {
			return "", fmt.Errorf("cannot find the current directory: %w", err)
		}
	}
	f, err := manifest.FindFile(start)
	if errors.Is(err, manifest.ErrNoManifest) {
		return "", withCode(ExitUsage, fmt.Errorf("%w (run 'airlock init' to write one, or pass --file)", err))
	}
	return f, err
}

// projectFlag returns --project as an absolute path ("" when not given): an
// existing directory, else a usage error.
func (a *app) projectFlag() (string, error) {
	if a.opts.project == "" {
		return "", nil
	}
	abs, err := filepath.Abs(a.opts.project)
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(abs); err == nil && !st.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return "", withCode(ExitUsage, fmt.Errorf("cannot use --project %s: %w", a.opts.project, err))
	}
	return abs, nil
}

// setProject makes --project, when given, the project dir of r.
func (a *app) setProject(r *manifest.Resolved) error {
	dir, err := a.projectFlag()
	if err == nil && dir != "" {
		r.ProjectDir = dir
	}
	return err
}

// paths returns this user's file locations; runtime.state_root from config.toml
// moves the daemon's state (a config.toml that does not load is reported by the
// commands that read it, such as airlock daemon run).
func (a *app) paths() (*paths.Paths, error) {
	p, err := paths.FromEnv(a.getenv)
	if err != nil {
		return nil, err
	}
	home, _ := a.getenv("HOME")
	if cfg, err := userconfig.LoadWithHome(p.UserConfig(), home); err == nil && cfg.Runtime.StateRoot != "" {
		p.StateRoot = cfg.Runtime.StateRoot
	}
	return p, nil
}

// loader returns a manifest loader for this user.
func (a *app) loader() (*manifest.Loader, error) {
	p, err := a.paths()
	if err != nil {
		return nil, err
	}
	cfg, err := a.userConfig()
	if err != nil {
		return nil, err
	}
	project, err := a.projectFlag()
	if err != nil {
		return nil, err
	}
	return &manifest.Loader{
		UserPresetsDir:  p.UserPresets(),
		Builtin:         presets.FS,
		Getenv:          a.getenv,
		Vault:           a.vaultLookup(p),
		Display:         displayPath,
		ProjectDir:      project,
		EnvFilesOutside: cfg.Services.EnvFilesOutside,
	}, nil
}

// loadManifest resolves the project's manifest; manifest problems become config errors.
func (a *app) loadManifest() (*manifest.Resolved, error) { return a.loadManifestWith(nil) }

// loadManifestWith is loadManifest reading the layer files with readFile (nil:
// os.ReadFile).
func (a *app) loadManifestWith(readFile func(string) ([]byte, error)) (*manifest.Resolved, error) {
	file, err := a.manifestFile()
	if err != nil {
		return nil, err
	}
	l, err := a.loader()
	if err != nil {
		return nil, err
	}
	l.ReadFile = readFile
	r, err := l.Load(file)
	if err != nil {
		if manifest.IsConfigError(err) {
			return nil, configError(err)
		}
		return nil, withCode(ExitUsage, err)
	}
	if err := a.setProject(r); err != nil {
		return nil, err
	}
	_, values := r.Redacted()
	for _, v := range values {
		a.redactor.Add(v)
	}
	return r, nil
}

// warnPrivileged prints the warning line of design.md §6 when the sandbox is privileged,
// or gets SYS_ADMIN or ALL through sandbox.cap_add.
func (a *app) warnPrivileged(r *manifest.Resolved) {
	if r.Sandbox.Privileged {
		fmt.Fprintln(a.stderr, "warning: sandbox.privileged = true: the sandbox has full access to the host's devices and kernel")
	}
	for _, c := range manifest.PowerfulCapabilities(&r.Sandbox) {
		fmt.Fprintf(a.stderr, "warning: sandbox.cap_add has %s: root in the sandbox comes close to sandbox.privileged (it can mount filesystems and reach much of the host's kernel)\n", strings.TrimPrefix(c, "CAP_"))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		for _, c := range manifest.PowerfulOf(r.Services[name].CapAdd) {
			fmt.Fprintf(a.stderr, "warning: services.%s.cap_add has %s: root in the service comes close to a privileged container (it can mount filesystems and reach much of the host's kernel)\n", name, strings.TrimPrefix(c, "CAP_"))
		}
	}
	for _, w := range a.hostBindWarnings(r) {
		fmt.Fprintln(a.stderr, "warning: "+w)
	}
	for _, k := range manifest.ProxyOverrides(r) {
		fmt.Fprintf(a.stderr, "warning: %s overrides the egress proxy variable airlock sets (traffic that ignores the proxy is blocked)\n", k)
	}
}

// hostBindWarnings names the binds of the sandbox (mounts) and of its services
// (volumes) that give code inside the host: its / (the whole filesystem), or
// the Docker Engine's socket (the Engine, which is root on its host), itself
// or a folder holding it.
func (a *app) hostBindWarnings(r *manifest.Resolved) []string {
	home, _ := a.getenv("HOME")
	sockets := []string{"/var/run/docker.sock", "/run/docker.sock"}
	if h, _ := a.getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sockets = append(sockets, filepath.Clean(strings.TrimPrefix(h, "unix://")))
	}
	check := func(what, src, into string) []string {
		p := projectfs.ExpandHostPath(src, r.ProjectDir, home)
		forms := []string{p}
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			forms = append(forms, real)
		}
		if slices.Contains(forms, "/") {
			return []string{fmt.Sprintf("%s binds the host's / into %s: code in it reads (and unless read-only, writes) the host's whole filesystem, the Docker Engine's socket included", what, into)}
		}
		for _, sock := range sockets {
			socks := []string{sock}
			if real, err := filepath.EvalSymlinks(sock); err == nil && real != sock {
				socks = append(socks, real)
			}
			for _, f := range forms {
				for _, s := range socks {
					bound := "the Docker Engine's socket " + p
					if s != f {
						bound = fmt.Sprintf("%s, which holds the Docker Engine's socket %s", p, s)
					}
					if s == f || strings.HasPrefix(s, f+"/") {
						return []string{fmt.Sprintf("%s binds %s into %s: code in it controls the Engine, and so the host (as root)", what, bound, into)}
					}
				}
			}
		}
		return nil
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(r.Mounts)) {
		if m := r.Mounts[name]; m.Enabled && m.Source != "" {
			out = append(out, check(manifest.KeyPath("mounts", name, "source"), m.Source, "the sandbox")...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		for i, v := range r.Parsed.Services[name].Volumes {
			if v.Kind == "bind" {
				out = append(out, check(fmt.Sprintf("%s (%q)", manifest.KeyPath("services", name, "volumes"), r.Services[name].Volumes[i]), v.Source, "service "+name)...)
			}
		}
	}
	return out
}

// displayPath shows p relative to the current directory when it is below it.
func displayPath(p string) string {
	cwd, err := os.Getwd()
	if err != nil {
		return p
	}
	if rel, err := filepath.Rel(cwd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}
