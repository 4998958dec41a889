package benchdoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/client"
)

// Project is a benchmark's hermetic airlock user: a temporary home with its
// own XDG dirs (so its own control daemon), and a project dir.
type Project struct {
	Home string   // the temporary home
	Dir  string   // the project dir, Home/project
	Env  []string // this process's environment with the user's XDG dirs
}

// NewProject makes a Project in a new temporary home named prefix* with files
// (sandbox.toml and any others) in its project dir. Close removes it.
func NewProject(prefix string, files map[string]string) (*Project, error) {
	home, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	p := &Project{Home: home, Dir: filepath.Join(home, "project"), Env: append(os.Environ(),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"))}
	if err := writeDir(p.Dir, files); err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	return p, nil
}

// writeDir makes dir with files in it.
func writeDir(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// AddDir makes one more project dir of the user, Home/name, with files
// (sandbox.toml and any others), and returns its path.
func (p *Project) AddDir(name string, files map[string]string) (string, error) {
	dir := filepath.Join(p.Home, name)
	return dir, writeDir(dir, files)
}

// Configure writes the user's config.toml.
func (p *Project) Configure(config string) error {
	dir := filepath.Join(p.Home, "config", "airlock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600)
}

// Client is a client of the user's control daemon.
func (p *Project) Client() *client.Client {
	return client.New(filepath.Join(p.Home, "run", "airlock", "airlockd.sock"))
}

// Command is name args run in the project dir with the user's environment.
func (p *Project) Command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir, c.Env = p.Dir, p.Env
	return c
}

// Timed runs name args in the project dir and returns how long it took and
// its output (stdout and stderr); a failure's error holds the output.
func (p *Project) Timed(name string, args ...string) (time.Duration, string, error) {
	return Timed(p.Command(name, args...))
}

// Projects makes n more project dirs of the user, Home/projects/p0 … p(n-1),
// each with manifest as its sandbox.toml.
func (p *Project) Projects(n int, manifest string) ([]string, error) {
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(p.Home, "projects", "p"+strconv.Itoa(i))
		if err := writeDir(dirs[i], map[string]string{"sandbox.toml": manifest}); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// TimedIn is Timed in dir instead of the project dir.
func (p *Project) TimedIn(dir, name string, args ...string) (time.Duration, string, error) {
	c := p.Command(name, args...)
	c.Dir = dir
	return Timed(c)
}

// Close stops the user's control daemon (airlock daemon stop with the binary
// airlock) and removes the home.
func (p *Project) Close(airlock string) {
	_ = p.Command(airlock, "daemon", "stop").Run()
	os.RemoveAll(p.Home)
}

// Time is Timed without the output: how long name args took in the project
// dir, or the failure (whose error holds the output); a sample for
// Timings.Add.
func (p *Project) Time(name string, args ...string) (time.Duration, error) {
	d, _, err := p.Timed(name, args...)
	return d, err
}
