package docker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/manifest/specrules"
	"github.com/airlock-dev/airlock/supervisor"
)

// TestSpecRulesAgree feeds one table of borderline manifests to both sides
// that judge them (unit test, no Engine):
//   - validation, as `airlock validate` runs it (the manifest as TOML through
//     manifest.Loader) and as the control daemon runs it (Resolved.Validate on a
//     restored manifest);
//   - the supervisor: the spec built from the same manifest the way a sandbox
//     is created (buildSpec), as JSON through supervisor.ParseSpec.
//
// Every row must get the same verdict from all three, and a refusal must carry
// the row's reason on each side: what validation accepts, PID 1 runs, and what
// PID 1 would refuse (exit 125 at start), validation refuses first.
func TestSpecRulesAgree(t *testing.T) {
	const base = "[sandbox]\nimage = \"x\"\n[daemons.d]\ncommand = [\"d\"]\n"
	long := func(n int) string { return strings.Repeat("n", n) }
	// daemon adds a daemon like d (with the defaults Load gave it), changed by f.
	daemon := func(name string, f func(*manifest.Daemon)) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) {
			d := m.Daemons["d"]
			d.Env = nil
			if f != nil {
				f(&d)
			}
			m.Daemons[name] = d
		}
	}
	// d changes the daemon d.
	d := func(f func(*manifest.Daemon)) func(*manifest.Manifest) { return daemon("d", f) }
	env := func(name string) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) { m.Env = map[string]string{name: "x"} }
	}
	denv := func(name string) func(*manifest.Manifest) {
		return d(func(d *manifest.Daemon) { d.Env = map[string]string{name: "x"} })
	}
	pathPrepend := func(dirs ...string) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) { m.Sandbox.PathPrepend = dirs }
	}
	ready := func(r manifest.Ready) func(*manifest.Manifest) {
		if r.Timeout == "" {
			r.Timeout = "30s"
		}
		return d(func(d *manifest.Daemon) { d.Ready = &r })
	}
	after := func(graph map[string][]string) func(*manifest.Manifest) {
		return func(m *manifest.Manifest) {
			for name, a := range graph {
				daemon(name, func(d *manifest.Daemon) { d.After = a })(m)
			}
		}
	}
	rows := []struct {
		name   string
		change func(*manifest.Manifest)
		// want is "" for a manifest both sides accept, else a part of the
		// reason both give.
		want string
	}{
		// Daemon names: the log folder's name.
		{"name of 63 characters", daemon(long(63), nil), ""},
		{"name of 64 characters", daemon(long(64), nil), "invalid name (at most 63 characters, got 64)"},
		{"name with . _ -", daemon("a.b_c-d", nil), ""},
		{"name with a leading digit", daemon("0day", nil), ""},
		{"name with a leading -", daemon("-d", nil), "invalid name (use letters"},
		{"name with a leading .", daemon(".d", nil), "invalid name (use letters"},
		{"name with a blank", daemon("a b", nil), "invalid name (use letters"},
		{"name with a slash", daemon("a/b", nil), "invalid name (use letters"},
		{"name not ASCII", daemon("dé", nil), "invalid name (use letters"},
		{"empty name", daemon("", nil), "invalid name (use letters"},

		// Environment names: [env] (main.env) and daemons.*.env.
		{"env name _", env("_"), ""},
		{"env name _1", env("_1"), ""},
		{"env name A1_b", env("A1_b"), ""},
		{"env name with -", env("my-var"), "invalid variable name"},
		{"env name with .", env("my.var"), "invalid variable name"},
		{"env name with a leading digit", env("1X"), "invalid variable name"},
		{"env name with =", env("A=B"), "invalid variable name"},
		{"env name with a blank", env("A B"), "invalid variable name"},
		{"env name not ASCII", env("É"), "invalid variable name"},
		{"empty env name", env(""), "invalid variable name"},
		{"daemon env name with -", denv("my-var"), "invalid variable name"},
		{"daemon env name with .", denv("my.var"), "invalid variable name"},
		{"daemon env name with a leading digit", denv("9"), "invalid variable name"},
		{"empty daemon env name", denv(""), "invalid variable name"},
		{"daemon env name _x9", denv("_x9"), ""},

		// after: unknown, self, twice, cycles.
		{"after a chain", after(map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil}), ""},
		{"after a diamond", after(map[string][]string{"a": {"b", "c"}, "b": {"c"}, "c": nil}), ""},
		{"after itself", after(map[string][]string{"a": {"a"}}), "a daemon cannot wait for itself"},
		{"after unknown", after(map[string][]string{"a": {"ghost"}}), `unknown daemon "ghost"`},
		{"after twice", after(map[string][]string{"a": {"d", "d"}}), `names "d" twice`},
		{"after a cycle of two", after(map[string][]string{"a": {"b"}, "b": {"a"}}), "a -> b -> a"},
		{"after a cycle of three", after(map[string][]string{"a": {"c"}, "b": {"a"}, "c": {"b"}}), "a -> c -> b -> a"},
		{"after two cycles", after(map[string][]string{"y": {"z"}, "z": {"y"}, "b": {"c"}, "c": {"b"}}), "b -> c -> b"},

		// command and cwd.
		{"empty command", d(func(d *manifest.Daemon) { d.Command = nil }), "is required: the program"},
		{"empty program", d(func(d *manifest.Daemon) { d.Command = []string{"", "x"} }), "is required: the program"},
		{"cwd absolute", d(func(d *manifest.Daemon) { d.Cwd = "/srv/data" }), ""},
		{"cwd relative", d(func(d *manifest.Daemon) { d.Cwd = "data" }), `must be an absolute path, got "data"`},

		// sandbox.path_prepend: the spec's path_prepend.
		{"path_prepend absolute", pathPrepend("/opt/go/bin", "/x"), ""},
		{"path_prepend relative", pathPrepend("/x", "bin"), `element 1: must be an absolute path, got "bin"`},
		{"path_prepend with :", pathPrepend("/a:/b"), `element 0: must not contain ':' (PATH's separator) or a NUL byte, got "/a:/b"`},
		{"path_prepend empty entry", pathPrepend(""), `element 0: must be an absolute path, got ""`},

		// signal, timeout, restart, max_restarts.
		{"signal SIGKILL", d(func(d *manifest.Daemon) { d.Signal = "SIGKILL" }), ""},
		{"signal SIGUSR2", d(func(d *manifest.Daemon) { d.Signal = "SIGUSR2" }), ""},
		{"signal SIGSTOP", d(func(d *manifest.Daemon) { d.Signal = "SIGSTOP" }), `unknown signal "SIGSTOP"`},
		{"signal in lower case", d(func(d *manifest.Daemon) { d.Signal = "sigterm" }), `unknown signal "sigterm"`},
		{"signal without SIG", d(func(d *manifest.Daemon) { d.Signal = "TERM" }), `unknown signal "TERM"`},
		{"timeout 0", d(func(d *manifest.Daemon) { d.Timeout = 0 }), ""},
		{"timeout a year", d(func(d *manifest.Daemon) { d.Timeout = specrules.MaxDaemonTimeout }), ""},
		{"timeout a year and a second", d(func(d *manifest.Daemon) { d.Timeout = specrules.MaxDaemonTimeout + 1 }), "must be at most 31536000 seconds"},
		{"timeout -1", d(func(d *manifest.Daemon) { d.Timeout = -1 }), "must not be negative (0 waits forever)"},
		{"restart on-failure", d(func(d *manifest.Daemon) { d.Restart = "on-failure" }), ""},
		{"restart never", d(func(d *manifest.Daemon) { d.Restart = "never" }), `unknown policy "never"`},
		{"max_restarts 0", d(func(d *manifest.Daemon) { d.MaxRestarts = 0 }), ""},
		{"max_restarts 10000", d(func(d *manifest.Daemon) { d.MaxRestarts = 10000 }), ""},
		{"max_restarts 10001", d(func(d *manifest.Daemon) { d.MaxRestarts = 10001 }), "must be at most 10000"},
		{"max_restarts -1", d(func(d *manifest.Daemon) { d.MaxRestarts = -1 }), "must not be negative (0 means no limit)"},

		// oneshot: no ready check, no restart policy but the defaults.
		{"oneshot", d(func(d *manifest.Daemon) { d.Oneshot = true }), ""},
		{"oneshot after another daemon", func(m *manifest.Manifest) {
			daemon("setup", func(d *manifest.Daemon) { d.Oneshot, d.After = true, []string{"d"} })(m)
		}, ""},
		{"oneshot with a ready check", d(func(d *manifest.Daemon) { d.Oneshot, d.Ready = true, &manifest.Ready{Log: "x", Timeout: "30s"} }), "a one-shot daemon has no ready check"},
		{"oneshot restart on-failure", d(func(d *manifest.Daemon) { d.Oneshot, d.Restart = true, "on-failure" }), "a one-shot daemon is never restarted"},
		{"oneshot max_restarts 0", d(func(d *manifest.Daemon) { d.Oneshot, d.MaxRestarts = true, 0 }), "a one-shot daemon is never restarted"},

		// user.
		{"user name", d(func(d *manifest.Daemon) { d.User = "postgres" }), ""},
		{"user uid:gid", d(func(d *manifest.Daemon) { d.User = "1000:1000" }), ""},
		{"user name:group", d(func(d *manifest.Daemon) { d.User = "postgres:staff" }), ""},
		{"user largest uid", d(func(d *manifest.Daemon) { d.User = "4294967294" }), ""},
		{"user uid -1", d(func(d *manifest.Daemon) { d.User = "4294967295" }), `invalid user "4294967295"`},
		{"user of 256 bytes", d(func(d *manifest.Daemon) { d.User = long(256) }), ""},
		{"user of 257 bytes", d(func(d *manifest.Daemon) { d.User = long(257) }), "invalid user"},
		{"user of 200 two-byte letters", d(func(d *manifest.Daemon) { d.User = strings.Repeat("é", 200) }), "invalid user"},
		{"user with two colons", d(func(d *manifest.Daemon) { d.User = "a:b:c" }), `invalid user "a:b:c"`},
		{"user without a name", d(func(d *manifest.Daemon) { d.User = ":0" }), `invalid user ":0"`},
		{"user without a group", d(func(d *manifest.Daemon) { d.User = "0:" }), `invalid user "0:"`},
		{"user with a blank", d(func(d *manifest.Daemon) { d.User = "a b" }), `invalid user "a b"`},
		{"user with a non-breaking space", d(func(d *manifest.Daemon) { d.User = "a\u00a0b" }), "invalid user"},

		// ready checks.
		{"ready tcp at the largest port", ready(manifest.Ready{TCP: "localhost:65535"}), ""},
		{"ready tcp IPv6", ready(manifest.Ready{TCP: "[::1]:6379"}), ""},
		{"ready tcp without host", ready(manifest.Ready{TCP: ":6379"}), `invalid address ":6379"`},
		{"ready tcp port 0", ready(manifest.Ready{TCP: "localhost:0"}), `invalid address "localhost:0"`},
		{"ready tcp port 65536", ready(manifest.Ready{TCP: "localhost:65536"}), `invalid address "localhost:65536"`},
		{"ready tcp named port", ready(manifest.Ready{TCP: "localhost:redis"}), `invalid address "localhost:redis"`},
		{"ready tcp without port", ready(manifest.Ready{TCP: "localhost"}), `invalid address "localhost"`},
		{"ready http", ready(manifest.Ready{HTTP: "http://127.0.0.1:8080/health"}), ""},
		{"ready https", ready(manifest.Ready{HTTP: "https://localhost/"}), ""},
		{"ready http other scheme", ready(manifest.Ready{HTTP: "ftp://x/"}), `invalid URL "ftp://x/"`},
		{"ready http without host", ready(manifest.Ready{HTTP: "http:///x"}), `invalid URL "http:///x"`},
		{"ready cmd", ready(manifest.Ready{Cmd: []string{"redis-cli", "ping"}}), ""},
		{"ready cmd empty program", ready(manifest.Ready{Cmd: []string{""}}), "must name a program"},
		{"ready log", ready(manifest.Ready{Log: "^ready$"}), ""},
		{"ready log bad pattern", ready(manifest.Ready{Log: "(("}), "invalid regular expression"},
		{"ready no check", ready(manifest.Ready{}), "needs exactly one check"},
		{"ready two checks", ready(manifest.Ready{TCP: "a:1", Log: "x"}), "sets tcp and log; set exactly one check"},
		{"ready timeout 1ns", ready(manifest.Ready{Log: "x", Timeout: "1ns"}), ""},
		{"ready timeout a year", ready(manifest.Ready{Log: "x", Timeout: "8760h"}), ""},
		{"ready timeout over a year", ready(manifest.Ready{Log: "x", Timeout: "8760h0m1s"}), "must be at most a year"},
		{"ready timeout 0", ready(manifest.Ready{Log: "x", Timeout: "0s"}), `must be positive, got "0s"`},
		{"ready timeout negative", ready(manifest.Ready{Log: "x", Timeout: "-1s"}), `must be positive, got "-1s"`},
		{"ready timeout not a duration", ready(manifest.Ready{Log: "x", Timeout: "soon"}), `invalid duration "soon"`},
	}
	loader := &manifest.Loader{Getenv: func(string) (string, bool) { return "", false }}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r, err := loader.LoadBytes("sandbox.toml", "/proj", []byte(base))
			if err != nil {
				t.Fatal(err)
			}
			m := r.Manifest
			row.change(&m)

			// Validation, as `airlock validate` runs it: the manifest as a file.
			var file bytes.Buffer
			if err := toml.NewEncoder(&file).Encode(m); err != nil {
				t.Fatal(err)
			}
			_, validateErr := loader.LoadBytes("sandbox.toml", "/proj", file.Bytes())
			// Validation, as the control daemon runs it.
			restoredErr := manifest.Restore(m, "sandbox.toml", "/proj", nil, nil).Validate()
			// The supervisor, on the spec a sandbox made from it would get.
			spec := backend.BuildSpec(&backend.Request{Command: []string{"sh"}}, &manifest.Resolved{Manifest: m, ProjectDir: "/proj"})
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			_, specErr := supervisor.ParseSpec(data)

			for _, side := range []struct {
				what string
				err  error
			}{{"airlock validate", validateErr}, {"Resolved.Validate", restoredErr}, {"supervisor.ParseSpec", specErr}} {
				switch {
				case row.want == "" && side.err != nil:
					t.Errorf("%s refuses it: %v\nmanifest:\n%s", side.what, side.err, file.Bytes())
				case row.want != "" && side.err == nil:
					t.Errorf("%s accepts it, want %q\nmanifest:\n%s", side.what, row.want, file.Bytes())
				case row.want != "" && !strings.Contains(side.err.Error(), row.want):
					t.Errorf("%s: %v\nwant the reason %q", side.what, side.err, row.want)
				}
			}
		})
	}
}

// TestSpecRulesEmptyMeansDefault: the only values validation refuses that
// reach the supervisor as valid are the ones a spec cannot carry. An empty
// cwd, signal, restart or ready timeout in the spec means its default, so an
// explicit empty one in the manifest (refused by validation) would be run
// with the default. Validation is then the stricter side: nothing it accepts
// is refused by PID 1.
func TestSpecRulesEmptyMeansDefault(t *testing.T) {
	rows := map[string]struct {
		change func(*manifest.Daemon)
		want   string
	}{
		"cwd":           {func(d *manifest.Daemon) { d.Cwd = "" }, "daemons.d.cwd: must be an absolute path"},
		"signal":        {func(d *manifest.Daemon) { d.Signal = "" }, `daemons.d.signal: unknown signal ""`},
		"restart":       {func(d *manifest.Daemon) { d.Restart = "" }, `daemons.d.restart: unknown policy ""`},
		"ready timeout": {func(d *manifest.Daemon) { d.Ready = &manifest.Ready{Log: "x"} }, `daemons.d.ready.timeout: invalid duration ""`},
	}
	r := loadBytes(t, "[sandbox]\nimage = \"x\"\n[daemons.d]\ncommand = [\"d\"]\n", nil)
	for name, row := range rows {
		m := r.Manifest
		m.Daemons = map[string]manifest.Daemon{"d": r.Daemons["d"]}
		dm := m.Daemons["d"]
		row.change(&dm)
		m.Daemons["d"] = dm
		if err := manifest.Restore(m, "sandbox.toml", "/proj", nil, nil).Validate(); err == nil || !strings.Contains(err.Error(), row.want) {
			t.Errorf("%s: validation: %v, want %q", name, err, row.want)
		}
		data, err := json.Marshal(backend.BuildSpec(&backend.Request{Command: []string{"sh"}}, &manifest.Resolved{Manifest: m, ProjectDir: "/proj"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := supervisor.ParseSpec(data); err != nil {
			t.Errorf("%s: an empty value in the spec should mean the default: %v", name, err)
		}
	}
}
