package e2e

import (
	"strings"
	"testing"
)

// Spec rules (issue 15): `airlock validate` and the supervisor (PID 1) judge a
// manifest by the same rules. A few rows of the full table
// (sandbox.TestSpecRulesAgree) with the built binary: what validate refuses is
// a config error (exit 2) before any Docker object exists, and what it accepts
// at the edge of every rule starts.

// TestSpecRulesBinary: borderline names refused by validate and by run alike;
// a manifest at the edges (a 63-character daemon name, env names _ and _1,
// after across names with . and -, a year's timeout) validates and runs.
func TestSpecRulesBinary(t *testing.T) {
	limit(t)
	long := strings.Repeat("d", 63)
	for _, c := range []struct{ name, body, want string }{
		{"env name with -", "[env]\n\"my-var\" = \"x\"\n", `env.my-var: invalid variable name`},
		{"daemon name of 64 characters", "[daemons." + long + "x]\ncommand = [\"true\"]\n", "invalid name (at most 63 characters, got 64)"},
		{"daemon env name with .", "[daemons.d]\ncommand = [\"true\"]\nenv = { \"my.var\" = \"x\" }\n", `daemons.d.env."my.var": invalid variable name`},
		{"after itself", "[daemons.d]\ncommand = [\"true\"]\nafter = [\"d\"]\n", "daemons.d.after: a daemon cannot wait for itself"},
		{"ready tcp without host", "[daemons.d]\ncommand = [\"true\"]\nready = { tcp = \":6379\" }\n", `daemons.d.ready.tcp: invalid address ":6379"`},
	} {
		e := newEnv(t, "[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n"+c.body)
		for _, args := range [][]string{{"validate"}, {"run", "--", "true"}} {
			r := e.Run(args...)
			if r.Code != 2 || !strings.Contains(r.Stderr, c.want) {
				t.Errorf("%s: airlock %s: want exit 2 and %q, got %s", c.name, strings.Join(args, " "), c.want, r)
			}
		}
		e.assertClean()
	}

	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"

[env]
_ = "underscore"
_1 = "one"

[daemons.`+long+`]
command = ["sh", "-c", "touch /tmp/long.up; exec sleep 300"]
timeout = 31536000
max_restarts = 10000
ready = { cmd = ["test", "-e", "/tmp/long.up"], timeout = "8760h" }

[daemons."0.b_c-d"]
command = ["sh", "-c", "echo $A_1 > /tmp/second.up; exec sleep 300"]
after = ["`+long+`"]
signal = "SIGKILL"
env = { A_1 = "a1" }
ready = { cmd = ["test", "-s", "/tmp/second.up"], timeout = "20s" }
`)
	e.MustRun("validate")
	r := e.Run("run", "--", "sh", "-c", `echo "$_1 $(cat /tmp/second.up)"; test -e /tmp/long.up`)
	if r.Code != 0 || r.Stdout != "one a1\n" {
		t.Errorf("a manifest at the edges of the rules: want exit 0 and %q, got %s", "one a1\n", r)
	}
	e.assertClean()
}
