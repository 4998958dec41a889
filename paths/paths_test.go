package paths

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromXDG(t *testing.T) {
	p, err := FromEnv(env(map[string]string{
		"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d", "XDG_RUNTIME_DIR": "/r",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		p.UserConfig():  "/c/airlock/config.toml",
		p.UserPresets(): "/c/airlock/presets",
		p.Socket():      "/r/airlock/airlockd.sock",
		p.Lock():        "/r/airlock/airlockd.lock",
		p.Store():       "/d/airlock/ids.db",
		p.DaemonDir():   "/d/airlock/daemon",
		p.Vault():       "/d/airlock/vault",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// Without the XDG variables (or with relative ones, which the spec ignores) the
// defaults of design.md §2 apply.
func TestDefaults(t *testing.T) {
	p, err := fromEnv(env(map[string]string{"HOME": "/h", "XDG_DATA_HOME": "relative"}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.UserConfig() != "/h/.config/airlock/config.toml" || p.Store() != "/h/.local/share/airlock/ids.db" {
		t.Errorf("defaults: %s %s", p.UserConfig(), p.Store())
	}
	rt := filepath.Join(os.TempDir(), fmt.Sprintf("airlock-%d", os.Getuid()))
	if p.Socket() != filepath.Join(rt, "airlockd.sock") {
		t.Errorf("socket %s, want under %s", p.Socket(), rt)
	}
}

// runtime.state_root moves the daemon's state but not the vault.
func TestStateRoot(t *testing.T) {
	p, _ := FromEnv(env(map[string]string{"HOME": "/h", "XDG_DATA_HOME": "/d"}))
	p.StateRoot = "/s"
	if p.Store() != "/s/ids.db" || p.DaemonDir() != "/s/daemon" || p.Vault() != "/d/airlock/vault" {
		t.Errorf("state root: %s %s %s", p.Store(), p.DaemonDir(), p.Vault())
	}
}

// On macOS, without the XDG variables, everything is under
// ~/Library/Application Support/airlock, the socket and lock in its run/.
func TestMacOSDefaults(t *testing.T) {
	p, err := fromEnv(env(map[string]string{"HOME": "/Users/me"}), "darwin")
	if err != nil {
		t.Fatal(err)
	}
	const app = "/Users/me/Library/Application Support/airlock"
	for got, want := range map[string]string{
		p.UserConfig():  app + "/config.toml",
		p.UserPresets(): app + "/presets",
		p.Socket():      app + "/run/airlockd.sock",
		p.Lock():        app + "/run/airlockd.lock",
		p.Store():       app + "/ids.db",
		p.DaemonDir():   app + "/daemon",
		p.Vault():       app + "/vault",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	if p.runtimeFallback {
		t.Error("the macOS runtime dir is marked as the shared /tmp fallback")
	}
}

// On macOS the XDG variables still win, each on its own.
func TestMacOSHonoursXDG(t *testing.T) {
	p, err := fromEnv(env(map[string]string{"HOME": "/Users/me", "XDG_CONFIG_HOME": "/c", "XDG_RUNTIME_DIR": "/r"}), "darwin")
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		p.UserConfig(): "/c/airlock/config.toml",
		p.Socket():     "/r/airlock/airlockd.sock",
		p.Store():      "/Users/me/Library/Application Support/airlock/ids.db",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	p, _ = fromEnv(env(map[string]string{"HOME": "/Users/me", "XDG_DATA_HOME": "/d"}), "darwin")
	if p.Store() != "/d/airlock/ids.db" || p.Socket() != "/Users/me/Library/Application Support/airlock/run/airlockd.sock" {
		t.Errorf("XDG_DATA_HOME on macOS: %s %s", p.Store(), p.Socket())
	}
}

// Linux keeps the XDG defaults whatever macOS does.
func TestLinuxDefaults(t *testing.T) {
	p, err := fromEnv(env(map[string]string{"HOME": "/h"}), "linux")
	if err != nil {
		t.Fatal(err)
	}
	if p.UserConfig() != "/h/.config/airlock/config.toml" || p.Store() != "/h/.local/share/airlock/ids.db" || !p.runtimeFallback {
		t.Errorf("linux defaults: %s %s fallback=%v", p.UserConfig(), p.Store(), p.runtimeFallback)
	}
}
