// Package paths computes every file location of design.md §2 from the XDG variables
// (on macOS, without them, under ~/Library/Application Support/airlock).
package paths

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Paths are the locations of one user's airlock files.
type Paths struct {
	ConfigDir  string // $XDG_CONFIG_HOME/airlock (macOS default: ~/Library/Application Support/airlock)
	DataDir    string // $XDG_DATA_HOME/airlock (macOS default: the same)
	RuntimeDir string // $XDG_RUNTIME_DIR/airlock, else /tmp/airlock-<uid> (macOS: <DataDir>/run)

	// StateRoot holds ids.db and daemon/ (runtime.state_root in
	// config.toml); it defaults to DataDir. The vault stays in DataDir.
	StateRoot string

	// runtimeFallback says RuntimeDir is the shared-root fallback (no
	// XDG_RUNTIME_DIR), where another local user may have made it first.
	runtimeFallback bool
}

// FromEnv derives the paths from getenv (os.LookupEnv in the CLI, a map in tests).
//
// On Linux (and every system but macOS) they are the XDG ones: config in
// $XDG_CONFIG_HOME/airlock (~/.config/airlock), data in $XDG_DATA_HOME/airlock
// (~/.local/share/airlock), the socket and lock in $XDG_RUNTIME_DIR/airlock or
// else /tmp/airlock-<uid>. On macOS a variable that is set still wins; without
// it, config and data are ~/Library/Application Support/airlock and the socket
// and lock are in its run/ folder (macOS has no per-user runtime dir, and its
// /tmp is shared by every user).
func FromEnv(getenv func(string) (string, bool)) (*Paths, error) {
	return fromEnv(getenv, runtime.GOOS)
}

// MacAppDir is the folder of airlock's files on macOS, under the home dir.
const MacAppDir = "Library/Application Support/airlock"

func fromEnv(getenv func(string) (string, bool), goos string) (*Paths, error) {
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
	configHome, dataHome := filepath.Join(home, ".config"), filepath.Join(home, ".local", "share")
	if goos == "darwin" {
		// Both default to ~/Library/Application Support: one airlock folder.
		configHome = filepath.Join(home, filepath.Dir(filepath.FromSlash(MacAppDir)))
		dataHome = configHome
	}
	p := &Paths{
		ConfigDir: filepath.Join(or("XDG_CONFIG_HOME", configHome), "airlock"),
		DataDir:   filepath.Join(or("XDG_DATA_HOME", dataHome), "airlock"),
	}
	p.StateRoot = p.DataDir
	if rt := get("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		p.RuntimeDir = filepath.Join(rt, "airlock")
	} else if goos == "darwin" {
		// In the user's own folder: no shared root, no fallback.
		p.RuntimeDir = filepath.Join(home, filepath.FromSlash(MacAppDir), "run")
	} else {
		p.RuntimeDir = filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Getuid()))
		p.runtimeFallback = true
	}
	return p, nil
}

// EnsureRuntimeDir makes the runtime directory (socket and lock) when missing
// and refuses it, with an *UnsafeDirError naming it and its owner, unless it is
// a real directory of the current user's with mode 0700 (design.md §2). The CLI
// checks it before it talks to the socket, the daemon before it takes the lock.
func (p *Paths) EnsureRuntimeDir() error {
	err := EnsurePrivateDir(p.RuntimeDir)
	var ue *UnsafeDirError
	if errors.As(err, &ue) && p.runtimeFallback {
		ue.Hint = "set XDG_RUNTIME_DIR to a private directory of yours (`mkdir -m 0700 -p ~/.airlock-run && export XDG_RUNTIME_DIR=~/.airlock-run`, or /run/user/<uid> where the login manager made one), or have " + p.RuntimeDir + " removed (its owner or root can)"
	}
	return err
}

// EnsureDaemonDir makes DaemonDir (pid, version, listen options, log) with the
// same checks as EnsureRuntimeDir: runtime.state_root may put it under a
// shared root.
func (p *Paths) EnsureDaemonDir() error {
	return EnsurePrivateDir(p.DaemonDir())
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

// Trust is the folder of the trust record: the manifest layers each project's
// sandboxes started from (package trust).
func (p *Paths) Trust() string { return filepath.Join(p.DataDir, "trust") }
