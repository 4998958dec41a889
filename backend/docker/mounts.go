package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/projectfs"
)

// bind is one bind mount resolved on the host. Target may still start with ~,
// which resolve() replaces with the sandbox user's home.
type bind struct {
	Name     string // mounts.<name> or tools.<tool>
	Source   string
	Target   string
	ReadOnly bool
	// Cache names a tool's cache (go-build, go-mod, npm, uv, apt): a sandbox
	// user that cannot write Source gets a cache of its own (usercache.go).
	Cache string
}

// hostPlan is what the host side of a manifest gives the container: bind mounts and
// environment from mounts and tools, with warnings for what was skipped.
type hostPlan struct {
	Binds []bind
	// ServiceBinds are the bind sources of services.*.volumes.
	ServiceBinds serviceBinds
	Env          []string
	// Path are directories the tools put in front of every process's PATH
	// (after sandbox.path_prepend's).
	Path     []string
	Warnings []string
	// toolEnv is the caller's environment for the tools (Request.ToolEnv).
	toolEnv map[string]string
}

// getenv is the caller's value of a tool variable, else the planner's.
func (hp *hostPlan) getenv(p *hostPlanner, k string) string {
	if v, ok := hp.toolEnv[k]; ok {
		return v
	}
	return p.env(k)
}

// hostPlanner makes a manifest's host plan: the host environment (Getenv),
// the Engine's name for messages, and what it is (the architecture the go
// tool's toolchain must run on).
type hostPlanner struct {
	getenv     func(string) (string, bool)
	engineName string
	kind       engineKind
}

// planner is the runtime's host planner.
func (rt *Runtime) planner() *hostPlanner {
	return &hostPlanner{getenv: rt.Getenv, engineName: rt.EngineName, kind: rt.kind()}
}

// env is the host's value of k ("" when unset).
func (p *hostPlanner) env(k string) string { return lookupEnv(p.getenv, k) }

// expandHost resolves ~ (the host home) and relative paths (from the project dir).
func (p *hostPlanner) expandHost(hostPath, projectDir string) string {
	return projectfs.ExpandHostPath(hostPath, projectDir, p.env("HOME"))
}

// plan handles every mount's missing mode and every tool. It runs before any
// Docker object exists, so a missing source with missing = "fail" is a config error
// that leaves nothing behind.
// remote says the sandbox cannot see this host's files (a remote Engine, or a
// client on another machine).
func (p *hostPlanner) plan(ctx context.Context, r *manifest.Resolved, remote bool, toolEnv map[string]string) (*hostPlan, error) {
	hp := &hostPlan{toolEnv: toolEnv}
	for _, name := range slices.Sorted(maps.Keys(r.Mounts)) {
		m := r.Mounts[name]
		src := p.expandHost(m.Source, r.ProjectDir)
		key := "mounts." + name
		if remote {
			// A remote Engine cannot see this host's files (design.md §7).
			if m.Missing == "ignore" {
				continue
			}
			return nil, configErr("%s.source: %s is a path on this host, and the Engine at %s cannot see it (use [copies.%s] to copy it in, or missing = \"ignore\" to skip the mount on a remote Engine)", key, src, p.engineName, manifest.KeyPath(name))
		}
		_, err := os.Stat(src)
		switch {
		case err == nil:
		case !errors.Is(err, fs.ErrNotExist):
			return nil, configErr("%s.source: cannot use %s: %v", key, src, err)
		default:
			switch m.Missing {
			case "fail":
				return nil, configErr("%s.source: %s does not exist (set missing = \"warn\", \"ignore\", \"create-dir\" or \"create-file\" to allow that)", key, src)
			case "warn":
				hp.Warnings = append(hp.Warnings, fmt.Sprintf("%s: %s does not exist; not mounted", key, src))
				continue
			case "ignore":
				continue
			case "create-dir", "create-file":
				if err := createSource(src, m); err != nil {
					return nil, failed("%s: %v", key, err)
				}
			}
		}
		hp.Binds = append(hp.Binds, bind{Name: key, Source: src, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, t := range r.Tools {
		if remote {
			hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.%s: skipped: the Engine at %s cannot see this host's files", t, p.engineName))
			continue
		}
		p.planTool(ctx, t, hp)
	}
	hp.Binds = dedupBinds(hp.Binds)
	sbinds, err := p.planServiceBinds(r, remote)
	if err != nil {
		return nil, err
	}
	hp.ServiceBinds = sbinds
	return hp, nil
}

func createSource(src string, m manifest.Mount) error {
	mode, err := strconv.ParseUint(m.CreateMode, 8, 32)
	if err != nil {
		return fmt.Errorf("invalid create_mode %q", m.CreateMode)
	}
	if m.Missing == "create-dir" {
		if err := os.MkdirAll(src, os.FileMode(mode)); err != nil {
			return fmt.Errorf("cannot create %s: %w", src, err)
		}
		return os.Chmod(src, os.FileMode(mode))
	}
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Dir(src), err)
	}
	if err := os.WriteFile(src, []byte(m.FileContent), os.FileMode(mode)); err != nil {
		return fmt.Errorf("cannot create %s: %w", src, err)
	}
	return os.Chmod(src, os.FileMode(mode))
}

// cacheRoot is where tool caches are mounted inside the sandbox, independent of the user.
const cacheRoot = "/var/cache/airlock"

// planTool adds a builtin tool's mounts and environment (design.md §7). Caches are
// created on the host when missing; missing credentials are skipped with a warning.
func (p *hostPlanner) planTool(ctx context.Context, tool string, hp *hostPlan) {
	home := p.expandHost("~", "/")
	envOr := func(k, def string) string {
		if v := hp.getenv(p, k); v != "" {
			return v
		}
		return def
	}
	cred := func(src, target string, ro bool) {
		if _, err := os.Stat(src); err != nil {
			hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.%s: %s does not exist; skipped", tool, src))
			return
		}
		hp.Binds = append(hp.Binds, bind{Name: "tools." + tool, Source: src, Target: target, ReadOnly: ro})
	}
	cache := func(name, src, target, envName string) {
		if err := os.MkdirAll(src, 0o755); err != nil {
			hp.Warnings = append(hp.Warnings, fmt.Sprintf("tools.%s: cannot create %s: %v; skipped", tool, src, err))
			return
		}
		hp.Binds = append(hp.Binds, bind{Name: "tools." + tool, Source: src, Target: target, Cache: name})
		if envName != "" {
			hp.Env = append(hp.Env, envName+"="+target)
		}
	}
	switch tool {
	case "git":
		cred(filepath.Join(home, ".gitconfig"), "~/.gitconfig", true)
		cred(filepath.Join(home, ".config", "gh"), "~/.config/gh", true)
	case "ssh-agent":
		sock := hp.getenv(p, "SSH_AUTH_SOCK")
		if sock == "" {
			hp.Warnings = append(hp.Warnings, "tools.ssh-agent: SSH_AUTH_SOCK is not set; skipped")
			return
		}
		const target = "/run/airlock/ssh-agent.sock"
		before := len(hp.Binds)
		cred(sock, target, false)
		if len(hp.Binds) > before {
			hp.Env = append(hp.Env, "SSH_AUTH_SOCK="+target)
		}
	case "claude":
		cred(filepath.Join(home, ".claude"), "~/.claude", false)
	case "codex":
		cred(filepath.Join(home, ".codex"), "~/.codex", false)
		cred(filepath.Join(home, ".agents"), "~/.agents", false)
	case "go":
		cache("go-build", envOr("GOCACHE", filepath.Join(home, ".cache", "go-build")), cacheRoot+"/go-build", "GOCACHE")
		gopath := envOr("GOPATH", filepath.Join(home, "go"))
		cache("go-mod", envOr("GOMODCACHE", filepath.Join(strings.Split(gopath, ":")[0], "pkg", "mod")), cacheRoot+"/go-mod", "GOMODCACHE")
		p.planGoToolchain(ctx, hp)
	case "npm":
		cache("npm", filepath.Join(home, ".npm"), cacheRoot+"/npm", "npm_config_cache")
	case "uv":
		cache("uv", envOr("UV_CACHE_DIR", filepath.Join(home, ".cache", "uv")), cacheRoot+"/uv", "UV_CACHE_DIR")
	case "apt":
		cache("apt", filepath.Join(home, ".cache", "airlock", "apt"), "/var/cache/apt/archives", "")
	}
}

// dedupBinds keeps the first bind of every target (a tool and a mount of the same
// target are one mount).
func dedupBinds(binds []bind) []bind {
	seen := map[string]bool{}
	out := binds[:0]
	for _, b := range binds {
		key := b.Target
		if strings.HasPrefix(key, "/") {
			key = path.Clean(key)
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, b)
	}
	return out
}
