// Package paths computes every file location of DESIGN §2 from the XDG variables.
package paths

import (
	"fmt"
	"os"
	"path/filepath"
)

// Paths are the locations of one user's airlock files.
type Paths struct {
	ConfigDir  string // $XDG_CONFIG_HOME/airlock
	DataDir    string // $XDG_DATA_HOME/airlock
	RuntimeDir string // $XDG_RUNTIME_DIR/airlock, else /tmp/airlock-<uid>

	// StateRoot holds ids.db and daemon/ (runtime.state_root in
	// config.toml); it defaults to DataDir. The vault stays in DataDir.
	StateRoot string
}

// FromEnv derives the paths from getenv (os.LookupEnv in the CLI, a map in tests).
func FromEnv(getenv func(string) (string, bool)) (*Paths, error) {
	get := func(k string) string {
		v, _ := getenv(k)
		return v
	}
	home := get("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("cannot find the home directory: %w", err)
		}
		home = h
	}
	or := func(k, def string) string {
		if v := get(k); v != "" && filepath.IsAbs(v) {
			return v
		}
		return def
	}
	p := &Paths{
		ConfigDir: filepath.Join(or("XDG_CONFIG_HOME", filepath.Join(home, ".config")), "airlock"),
		DataDir:   filepath.Join(or("XDG_DATA_HOME", filepath.Join(home, ".local", "share")), "airlock"),
	}
	p.StateRoot = p.DataDir
	if rt := get("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		p.RuntimeDir = filepath.Join(rt, "airlock")
	} else {
		p.RuntimeDir = filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Getuid()))
	}
	return p, nil
}

// UserConfig is config.toml, the user's settings.
func (p *Paths) UserConfig() string { return filepath.Join(p.ConfigDir, "config.toml") }

// UserPresets is the folder of user presets (<name>.toml).
func (p *Paths) UserPresets() string { return filepath.Join(p.ConfigDir, "presets") }

// Socket is the control daemon's Unix socket.
func (p *Paths) Socket() string { return filepath.Join(p.RuntimeDir, "airlockd.sock") }

// Lock is the control daemon's singleton lock.
func (p *Paths) Lock() string { return filepath.Join(p.RuntimeDir, "airlockd.lock") }

// Store is the bbolt database of IDs and events.
func (p *Paths) Store() string { return filepath.Join(p.StateRoot, "ids.db") }

// DaemonDir holds airlockd.pid, airlockd.version and airlockd.log.
func (p *Paths) DaemonDir() string { return filepath.Join(p.StateRoot, "daemon") }

// Vault is the prefix of the vault files (vault.*).
func (p *Paths) Vault() string { return filepath.Join(p.DataDir, "vault") }
