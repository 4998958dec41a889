package manifest_test

import (
	"strings"
	"testing"
)

// Line numbers in errors stay right across TOML layouts that span lines.

func TestErrorLines(t *testing.T) {
	tests := []struct{ name, files, want string }{
		{"after a multi-line array",
			img + "[daemons.d]\ncommand = [\n  \"d\",\n  \"--flag\", # comment ]\n]\nsignal = \"BAD\"\n",
			`sandbox.toml:8: daemons.d.signal: unknown signal "BAD" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`},
		{"after a multi-line string that looks like TOML",
			img + "[mounts.m]\nsource = \"./m\"\nmissing = \"create-file\"\nfile_content = \"\"\"\n[daemons.x]\ntarget = \"/x\"\n\"\"\"\ntarget = \"rel\"\n",
			`sandbox.toml:10: mounts.m.target: must be an absolute path (or start with ~/ for the sandbox user's home), got "rel"`},
		{"after a multi-line literal string",
			img + "[env]\nA = '''\nline\nB = 1\n'''\nB = \"${NOPE}\"\n",
			`sandbox.toml:8: env.B: NOPE is not set and not in the vault`},
		{"CRLF line endings",
			strings.ReplaceAll(img+"\n[daemons.d]\ncommand = [\"d\"]\nrestart = \"no\"\n", "\n", "\r\n"),
			`sandbox.toml:6: daemons.d.restart: unknown policy "no" (use one of always, on-failure)`},
		{"dotted keys under a table",
			img + "[daemons]\nd.command = [\"d\"]\nd.ready.tcp = \"nope\"\n",
			`sandbox.toml:5: daemons.d.ready.tcp: invalid address "nope" (use host:port, e.g. "127.0.0.1:6379")`},
		{"spaces in a table header",
			img + "[ daemons . d ]\ncommand = [\"d\"]\n\ncwd = \"rel\"\n",
			`sandbox.toml:6: daemons.d.cwd: must be an absolute path, got "rel"`},
		{"inline table over lines",
			img + "[services.db]\nimage = \"pg\"\nhealthcheck = { cmd = [\n \"true\",\n], retries = -1 }\n",
			`sandbox.toml:5: services.db.healthcheck.retries: must not be negative, got -1`},
		{"bad TOML: the line of the error, not the next",
			"[sandbox]\nimage = \"x\"\n[env\nA = \"1\"\n",
			`sandbox.toml:3: expected '.' or ']' to end table name, but got '\n' instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loadErr(t, map[string]string{"sandbox.toml": tt.files}); got != tt.want {
				t.Errorf("error:\n\tgot  %s\n\twant %s", got, tt.want)
			}
		})
	}
}
