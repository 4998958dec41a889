package manifest_test

import (
	"strings"
	"testing"
)

// Validation after merging (design.md §3): each error names the file, the line and the
// key path of the value at fault.

func TestValidationErrors(t *testing.T) {
	const daemon = img + "[daemons.redis]\ncommand = [\"redis-server\"]\n" // daemons.redis at line 3
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		// [sandbox]
		{"sandbox without image or build", map[string]string{"sandbox.toml": "[sandbox]\nuser = \"dev\"\n"},
			`sandbox.toml:1: sandbox.image: is required unless [sandbox.build] is given`},
		{"no sandbox table at all", map[string]string{"sandbox.toml": "tools = [\"git\"]\n"},
			`sandbox.image: is required unless [sandbox.build] is given`},
		{"bad network", map[string]string{"sandbox.toml": img + "network = \"overlay\"\n"},
			`sandbox.toml:3: sandbox.network: unknown network "overlay" (use one of bridge, none, host)`},
		{"bad memory", map[string]string{"sandbox.toml": img + "memory = \"lots\"\n"},
			`sandbox.toml:3: sandbox.memory: invalid size "lots" (use a number with an optional unit k, m, g or t, e.g. "512m")`},
		{"bad memory unit", map[string]string{"sandbox.toml": img + "memory = \"512x\"\n"},
			`sandbox.toml:3: sandbox.memory: invalid size "512x" (use a number with an optional unit k, m, g or t, e.g. "512m")`},
		{"negative cpus", map[string]string{"sandbox.toml": img + "cpus = -1.5\n"},
			`sandbox.toml:3: sandbox.cpus: must not be negative, got -1.5`},
		{"cpus not finite", map[string]string{"sandbox.toml": img + "cpus = inf\n"},
			`sandbox.toml:3: sandbox.cpus: must be a finite number, got +Inf`},
		{"cpus NaN", map[string]string{"sandbox.toml": img + "cpus = nan\n"},
			`sandbox.toml:3: sandbox.cpus: must be a finite number, got NaN`},
		{"bad ready_timeout", map[string]string{"sandbox.toml": img + "ready_timeout = \"60\"\n"},
			`sandbox.toml:3: sandbox.ready_timeout: invalid duration "60" (use a Go duration such as "30s" or "2m")`},
		{"zero ready_timeout", map[string]string{"sandbox.toml": img + "ready_timeout = \"0s\"\n"},
			`sandbox.toml:3: sandbox.ready_timeout: must be positive, got "0s"`},
		{"pool size too large", map[string]string{"sandbox.toml": img + "[sandbox.pool]\nsize = 65\n"},
			`sandbox.toml:4: sandbox.pool.size: must be between 0 and 64 (got 65)`},
		{"negative pool size", map[string]string{"sandbox.toml": img + "[sandbox.pool]\nsize = -1\n"},
			`sandbox.toml:4: sandbox.pool.size: must be between 0 and 64 (got -1)`},
		{"bad pool idle_ttl", map[string]string{"sandbox.toml": img + "[sandbox.pool]\nsize = 2\nidle_ttl = \"soon\"\n"},
			`sandbox.toml:5: sandbox.pool.idle_ttl: invalid duration "soon" (use a Go duration such as "30s" or "2m")`},
		{"workdir out of the project", map[string]string{"sandbox.toml": img + "workdir = \"src/../../x\"\n"},
			`sandbox.toml:3: sandbox.workdir: must be an absolute path, or a path in the project dir (relative to it), got "src/../../x"`},
		{"empty shell program", map[string]string{"sandbox.toml": img + "shell = [\"\", \"-l\"]\n"},
			`sandbox.toml:3: sandbox.shell: the first element (the program) must not be empty`},
		{"empty build context", map[string]string{"sandbox.toml": "[sandbox.build]\ncontext = \"\"\n"},
			`sandbox.toml:2: sandbox.build.context: must not be empty`},
		{"unknown tool", map[string]string{"sandbox.toml": "tools = [\"git\", \"hammer\"]\n" + img},
			`sandbox.toml:1: tools: unknown tool "hammer" (known tools: git, ssh-agent, claude, codex, go, npm, uv, apt)`},
		{"empty env name", map[string]string{"sandbox.toml": img + "[env]\n\"\" = \"x\"\n"},
			`sandbox.toml:4: env."": invalid variable name (use letters, digits and _, not starting with a digit)`},
		{"env name with =", map[string]string{"sandbox.toml": img + "[env]\n\"A=B\" = \"x\"\n"},
			`sandbox.toml:4: env."A=B": invalid variable name (use letters, digits and _, not starting with a digit)`},
		{"empty service env name", map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\nenv = { \"\" = \"x\" }\n"},
			`sandbox.toml:5: services.db.env."": invalid variable name (it must not be empty or contain = or NUL)`},
		{"service env name with =", map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\nenv = { \"A=B\" = \"x\" }\n"},
			`sandbox.toml:5: services.db.env."A=B": invalid variable name (it must not be empty or contain = or NUL)`},

		// daemons
		{"bad signal", map[string]string{"sandbox.toml": daemon + "signal = \"SIGBOGUS\"\n"},
			`sandbox.toml:5: daemons.redis.signal: unknown signal "SIGBOGUS" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`},
		{"signal without SIG is not accepted", map[string]string{"sandbox.toml": daemon + "signal = \"TERM\"\n"},
			`sandbox.toml:5: daemons.redis.signal: unknown signal "TERM" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`},
		{"bad restart", map[string]string{"sandbox.toml": daemon + "restart = \"never\"\n"},
			`sandbox.toml:5: daemons.redis.restart: unknown policy "never" (use one of always, on-failure)`},
		{"negative timeout", map[string]string{"sandbox.toml": daemon + "timeout = -1\n"},
			`sandbox.toml:5: daemons.redis.timeout: must not be negative (0 waits forever), got -1`},
		{"negative max_restarts", map[string]string{"sandbox.toml": daemon + "max_restarts = -3\n"},
			`sandbox.toml:5: daemons.redis.max_restarts: must not be negative (0 means no limit), got -3`},
		{"relative cwd", map[string]string{"sandbox.toml": daemon + "cwd = \"data\"\n"},
			`sandbox.toml:5: daemons.redis.cwd: must be an absolute path, got "data"`},
		{"missing command", map[string]string{"sandbox.toml": img + "[daemons.redis]\nsignal = \"SIGINT\"\n"},
			`sandbox.toml:3: daemons.redis.command: is required: the program and its arguments, e.g. ["redis-server"]`},
		{"empty command", map[string]string{"sandbox.toml": img + "[daemons.redis]\ncommand = []\n"},
			`sandbox.toml:4: daemons.redis.command: is required: the program and its arguments, e.g. ["redis-server"]`},
		{"after unknown daemon", map[string]string{"sandbox.toml": daemon + "after = [\"postgres\"]\n"},
			`sandbox.toml:5: daemons.redis.after: unknown daemon "postgres" (declared daemons: redis)`},
		{"after itself", map[string]string{"sandbox.toml": daemon + "after = [\"redis\"]\n"},
			`sandbox.toml:5: daemons.redis.after: a daemon cannot wait for itself`},
		{"after cycle of two", map[string]string{"sandbox.toml": img + "[daemons.a]\ncommand = [\"a\"]\nafter = [\"b\"]\n[daemons.b]\ncommand = [\"b\"]\nafter = [\"a\"]\n"},
			`sandbox.toml:5: daemons.a.after: cycle: a -> b -> a`},
		{"after cycle of three", map[string]string{"sandbox.toml": img + "[daemons.a]\ncommand = [\"a\"]\nafter = [\"c\"]\n[daemons.b]\ncommand = [\"b\"]\nafter = [\"a\"]\n[daemons.c]\ncommand = [\"c\"]\nafter = [\"b\"]\n"},
			`sandbox.toml:5: daemons.a.after: cycle: a -> c -> b -> a`},
		{"ready with no kind", map[string]string{"sandbox.toml": daemon + "ready = { timeout = \"5s\" }\n"},
			`sandbox.toml:5: daemons.redis.ready: needs exactly one check: tcp, http, cmd or log`},
		{"ready with two kinds", map[string]string{"sandbox.toml": daemon + "ready = { tcp = \"127.0.0.1:6379\", log = \"ready\" }\n"},
			`sandbox.toml:5: daemons.redis.ready: sets tcp and log; set exactly one check`},
		{"ready tcp without port", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\ntcp = \"127.0.0.1\"\n"},
			`sandbox.toml:6: daemons.redis.ready.tcp: invalid address "127.0.0.1" (use host:port, e.g. "127.0.0.1:6379")`},
		{"ready tcp port out of range", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\ntcp = \"localhost:70000\"\n"},
			`sandbox.toml:6: daemons.redis.ready.tcp: invalid address "localhost:70000" (use host:port, e.g. "127.0.0.1:6379")`},
		{"ready http without scheme", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\nhttp = \"localhost:8080/health\"\n"},
			`sandbox.toml:6: daemons.redis.ready.http: invalid URL "localhost:8080/health" (use http://host:port/path)`},
		{"ready http ftp", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\nhttp = \"ftp://localhost/\"\n"},
			`sandbox.toml:6: daemons.redis.ready.http: invalid URL "ftp://localhost/" (use http://host:port/path)`},
		{"ready bad log regexp", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\nlog = \"ready (\"\n"},
			"sandbox.toml:6: daemons.redis.ready.log: invalid regular expression: error parsing regexp: missing closing ): `ready (`"},
		{"ready empty cmd", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\ncmd = []\n"},
			`sandbox.toml:6: daemons.redis.ready.cmd: must name a program, e.g. ["redis-cli", "ping"]`},
		{"ready bad timeout", map[string]string{"sandbox.toml": daemon + "[daemons.redis.ready]\ntcp = \"127.0.0.1:6379\"\ntimeout = \"30\"\n"},
			`sandbox.toml:7: daemons.redis.ready.timeout: invalid duration "30" (use a Go duration such as "30s" or "2m")`},
		{"ready negative timeout", map[string]string{"sandbox.toml": daemon + "ready = { tcp = \"127.0.0.1:6379\", timeout = \"-5s\" }\n"},
			`sandbox.toml:5: daemons.redis.ready.timeout: must be positive, got "-5s"`},

		// mounts and copies
		{"relative mount target", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"a\"\n"},
			`sandbox.toml:5: mounts.m.target: must be an absolute path (or start with ~/ for the sandbox user's home), got "a"`},
		{"relative copy target", map[string]string{"sandbox.toml": img + "[copies.c]\nsource = \"./a\"\ntarget = \"./a\"\n"},
			`sandbox.toml:5: copies.c.target: must be an absolute path (or start with ~/ for the sandbox user's home), got "./a"`},
		{"missing mount target", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\n"},
			`sandbox.toml:3: mounts.m.target: is required`},
		{"missing mount source", map[string]string{"sandbox.toml": img + "[mounts.m]\ntarget = \"/a\"\n"},
			`sandbox.toml:3: mounts.m.source: is required`},
		{"missing copy source", map[string]string{"sandbox.toml": img + "[copies.c]\nsource = \"\"\ntarget = \"/c\"\n"},
			`sandbox.toml:4: copies.c.source: is required`},
		{"duplicate target across a mount and a copy", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/data\"\n[copies.c]\nsource = \"./b\"\ntarget = \"/data/\"\n"},
			`sandbox.toml:8: copies.c.target: /data/ is also the target of mounts.m`},
		{"duplicate target across two mounts", map[string]string{"sandbox.toml": img + "[mounts.a]\nsource = \"./a\"\ntarget = \"~/x\"\n[mounts.b]\nsource = \"./b\"\ntarget = \"~/x\"\n"},
			`sandbox.toml:8: mounts.b.target: ~/x is also the target of mounts.a`},
		{"bad missing", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/a\"\nmissing = \"skip\"\n"},
			`sandbox.toml:6: mounts.m.missing: unknown value "skip" (use one of fail, warn, ignore, create-dir, create-file)`},
		{"create_mode without create", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/a\"\ncreate_mode = \"700\"\n"},
			`sandbox.toml:6: mounts.m.create_mode: only applies with missing = "create-dir" or "create-file"`},
		{"create_mode not octal", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/a\"\nmissing = \"create-dir\"\ncreate_mode = \"rwx\"\n"},
			`sandbox.toml:7: mounts.m.create_mode: invalid mode "rwx" (use octal digits such as "755")`},
		{"create_mode 8 is not octal", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/a\"\nmissing = \"create-file\"\ncreate_mode = \"648\"\n"},
			`sandbox.toml:7: mounts.m.create_mode: invalid mode "648" (use octal digits such as "755")`},
		{"file_content with create-dir", map[string]string{"sandbox.toml": img + "[mounts.m]\nsource = \"./a\"\ntarget = \"/a\"\nmissing = \"create-dir\"\nfile_content = \"hello\"\n"},
			`sandbox.toml:7: mounts.m.file_content: only applies with missing = "create-file"`},
		{"bad exclude pattern", map[string]string{"sandbox.toml": img + "[copies.c]\nsource = \"./a\"\ntarget = \"/a\"\nexclude = [\"[\"]\n"},
			`sandbox.toml:6: copies.c.exclude: invalid pattern "["`},

		// services
		{"service without image", map[string]string{"sandbox.toml": img + "[services.db]\ncommand = [\"postgres\"]\n"},
			`sandbox.toml:3: services.db.image: is required`},
		{"healthcheck without cmd", map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\nhealthcheck = { interval = \"2s\" }\n"},
			`sandbox.toml:5: services.db.healthcheck.cmd: is required: the probe's program and arguments, e.g. ["pg_isready"]`},
		{"healthcheck bad interval", map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\n[services.db.healthcheck]\ncmd = [\"true\"]\ninterval = \"1 second\"\n"},
			`sandbox.toml:7: services.db.healthcheck.interval: invalid duration "1 second" (use a Go duration such as "30s" or "2m")`},
		{"healthcheck negative retries", map[string]string{"sandbox.toml": img + "[services.db]\nimage = \"pg\"\n[services.db.healthcheck]\ncmd = [\"true\"]\nretries = -1\n"},
			`sandbox.toml:7: services.db.healthcheck.retries: must not be negative, got -1`},

		// entry names
		{"daemon name with a space", map[string]string{"sandbox.toml": img + "[daemons.\"my redis\"]\ncommand = [\"r\"]\n"},
			`sandbox.toml:3: daemons."my redis": invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)`},
		{"mount name starting with a dash", map[string]string{"sandbox.toml": img + "[mounts.-m]\nsource = \"./a\"\ntarget = \"/a\"\n"},
			`sandbox.toml:3: mounts.-m: invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)`},
		{"service name with a slash", map[string]string{"sandbox.toml": img + "[services.\"a/b\"]\nimage = \"x\"\n"},
			`sandbox.toml:3: services."a/b": invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)`},
		{"empty copy name", map[string]string{"sandbox.toml": img + "[copies.\"\"]\nsource = \"./a\"\ntarget = \"/a\"\n"},
			`sandbox.toml:3: copies."": invalid name (use letters, digits, '_', '.' and '-', starting with a letter or digit)`},

		// errors in a value a preset set name the preset
		{"bad value in a path preset", map[string]string{"sandbox.toml": "presets = [\"./p.toml\"]\n" + img, "p.toml": "# team preset\n[daemons.x]\ncommand = [\"x\"]\nrestart = \"sometimes\"\n"},
			`p.toml:4: daemons.x.restart: unknown policy "sometimes" (use one of always, on-failure)`},
		{"two ready kinds set over a preset's check name the layer that set them", map[string]string{
			"p.toml":       "[daemons.web]\ncommand = [\"web\"]\nready = { tcp = \"127.0.0.1:80\" }\n",
			"sandbox.toml": "presets = [\"./p.toml\"]\n" + img + "\n[daemons.web.ready]\nhttp = \"http://127.0.0.1/\"\nlog = \"up\"\n"},
			`sandbox.toml:5: daemons.web.ready: sets http and log; set exactly one check`},
		{"invalid build arg names", map[string]string{"sandbox.toml": "[sandbox.build]\nargs = { \"\" = \"x\" }\n"},
			`sandbox.toml:2: sandbox.build.args."": invalid variable name (it must not be empty or contain = or NUL)`},
		{"bad value in sandbox.local.toml over a preset", map[string]string{"sandbox.toml": "presets = [\"redis\"]\n" + img, "sandbox.local.toml": "[daemons.redis]\n\nsignal = \"SIGSTOP\"\n"},
			`sandbox.local.toml:3: daemons.redis.signal: unknown signal "SIGSTOP" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loadErr(t, tt.files)
			if got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", strings.ReplaceAll(got, "\n", "\n\t     "), tt.want)
			}
		})
	}
}

func TestValidationValidValues(t *testing.T) {
	// Values at the edges of what validation accepts.
	load(t, map[string]string{"sandbox.toml": `[sandbox]
image = "x"
memory = "1.5GiB"
cpus = 0.5
network = "none"
workdir = "/work"
[mounts.home]
source = "~/.config"
target = "~"
missing = "create-file"
create_mode = "0600"
file_content = "x"
[copies.c]
source = "./c"
target = "~/c"
exclude = ["*.tmp", ".git"]
[daemons.a]
command = ["a"]
signal = "SIGKILL"
timeout = 0
max_restarts = 0
ready = { http = "https://localhost:8443/ready" }
[daemons."b.c"]
command = ["b"]
after = ["a"]
restart = "on-failure"
ready = { cmd = ["test", "-f", "/ready"] }
[daemons.d]
command = ["d"]
after = ["a", "b.c"]
ready = { log = "^listening" }
[services.db]
image = "pg"
required = false
`})
}

func TestValidationReportsEveryError(t *testing.T) {
	got := loadErr(t, map[string]string{
		"sandbox.toml": `tools = ["hammer"]
[sandbox]
network = "wifi"
[daemons.redis]
command = ["redis-server"]
signal = "SIGBOGUS"
restart = "never"
after = ["ghost"]
[mounts.m]
source = "./a"
target = "rel"
[services.db]
command = ["x"]
`,
		"sandbox.local.toml": "[daemons.redis]\ntimeout = -2\n",
	})
	wantLines(t, got,
		`sandbox.local.toml:2: daemons.redis.timeout: must not be negative (0 waits forever), got -2`,
		`sandbox.toml:1: tools: unknown tool "hammer" (known tools: git, ssh-agent, claude, codex, go, npm, uv, apt)`,
		`sandbox.toml:2: sandbox.image: is required unless [sandbox.build] is given`,
		`sandbox.toml:3: sandbox.network: unknown network "wifi" (use one of bridge, none, host)`,
		`sandbox.toml:6: daemons.redis.signal: unknown signal "SIGBOGUS" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`,
		`sandbox.toml:7: daemons.redis.restart: unknown policy "never" (use one of always, on-failure)`,
		`sandbox.toml:8: daemons.redis.after: unknown daemon "ghost" (declared daemons: redis)`,
		`sandbox.toml:11: mounts.m.target: must be an absolute path (or start with ~/ for the sandbox user's home), got "rel"`,
		`sandbox.toml:12: services.db.image: is required`,
	)
	if n := strings.Count(got, "\n") + 1; n != 9 {
		t.Errorf("got %d errors, want 9:\n%s", n, got)
	}
	// Sorted by file, then line.
	if !strings.HasPrefix(got, "sandbox.local.toml:2:") {
		t.Errorf("errors are not sorted by file and line:\n%s", got)
	}
}
