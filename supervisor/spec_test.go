package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

func TestParseSpecDefaults(t *testing.T) {
	s, err := ParseSpec([]byte(`{"version":1,"main":{"argv":["sh"]},"daemons":[{"name":"redis","command":["redis-server"],"ready":{"tcp":"127.0.0.1:6379"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d := s.Daemons[0]
	if s.LogDir != DefaultLogDir || s.StatusFile != DefaultStatusFile || !*s.Main.Harden {
		t.Errorf("spec defaults: %+v", s)
	}
	if d.Cwd != "/" || d.Signal != "SIGTERM" || *d.Timeout != 10 || d.Restart != "always" || *d.MaxRestarts != 10 || !*d.Harden {
		t.Errorf("daemon defaults: %+v", d)
	}
	if d.Ready.timeout() != 30*time.Second || d.Ready.describe() != "tcp 127.0.0.1:6379" {
		t.Errorf("ready defaults: %+v", d.Ready)
	}
}

func TestParseSpecErrors(t *testing.T) {
	const main = `"main":{"argv":["sh"]}`
	daemon := func(fields string) string {
		return `{"version":1,` + main + `,"daemons":[{"name":"d","command":["x"]` + fields + `}]}`
	}
	long := strings.Repeat("n", 64)
	cases := map[string]struct{ spec, want string }{
		"not json":       {`{`, "cannot decode spec"},
		"trailing":       {`{"version":1,` + main + `} {}`, "trailing data"},
		"unknown field":  {`{"version":1,` + main + `,"extra":true}`, `unknown field "extra"`},
		"version":        {`{` + main + `}`, "cannot use spec version 0"},
		"empty argv0":    {`{"version":1,"main":{"argv":[""]}}`, "main.argv[0] is empty"},
		"bad name":       {`{"version":1,` + main + `,"daemons":[{"name":"a b","command":["x"]}]}`, `daemons[0].name "a b": invalid name (use letters`},
		"name too long":  {`{"version":1,` + main + `,"daemons":[{"name":"` + long + `","command":["x"]}]}`, "invalid name (at most 63 characters, got 64)"},
		"empty name":     {`{"version":1,` + main + `,"daemons":[{"name":"","command":["x"]}]}`, `daemons[0].name "": invalid name`},
		"twice":          {`{"version":1,` + main + `,"daemons":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}`, "daemon a is defined twice"},
		"no command":     {`{"version":1,` + main + `,"daemons":[{"name":"a"}]}`, "daemons.a.command: is required"},
		"relative cwd":   {daemon(`,"cwd":"data"`), `daemons.d.cwd: must be an absolute path, got "data"`},
		"signal":         {daemon(`,"signal":"SIGSTOP"`), `daemons.d.signal: unknown signal "SIGSTOP"`},
		"timeout":        {daemon(`,"timeout":-1`), "daemons.d.timeout: must not be negative"},
		"timeout MaxInt": {daemon(`,"timeout":9223372036854775807`), "daemons.d.timeout: must be at most 31536000 seconds (a year"},
		"timeout year+1": {daemon(`,"timeout":31536001`), "daemons.d.timeout: must be at most 31536000 seconds (a year"},
		"max too large":  {daemon(`,"max_restarts":10001`), "daemons.d.max_restarts: must be at most 10000"},
		"ready too long": {daemon(`,"ready":{"log":"x","timeout":"8761h"}`), `daemons.d.ready.timeout: must be at most a year (8760h), got "8761h"`},
		"restart":        {daemon(`,"restart":"never"`), `unknown policy "never"`},
		"max":            {daemon(`,"max_restarts":-2`), "max_restarts: must not be negative"},
		"after unknown":  {daemon(`,"after":["zz"]`), `daemons.d.after: unknown daemon "zz"`},
		"after self":     {daemon(`,"after":["d"]`), "daemons.d.after: a daemon cannot wait for itself"},
		"after twice":    {`{"version":1,` + main + `,"daemons":[{"name":"a","command":["x"]},{"name":"d","command":["x"],"after":["a","a"]}]}`, `daemons.d.after: names "a" twice`},
		"two checks":     {daemon(`,"ready":{"tcp":"a:1","log":"x"}`), "daemons.d.ready: sets tcp and log; set exactly one check"},
		"no check":       {daemon(`,"ready":{}`), "daemons.d.ready: needs exactly one check"},
		"tcp":            {daemon(`,"ready":{"tcp":"nohost"}`), `daemons.d.ready.tcp: invalid address "nohost"`},
		"tcp no host":    {daemon(`,"ready":{"tcp":":6379"}`), `invalid address ":6379"`},
		"tcp port 0":     {daemon(`,"ready":{"tcp":"localhost:0"}`), `invalid address "localhost:0"`},
		"tcp named port": {daemon(`,"ready":{"tcp":"localhost:http"}`), `invalid address "localhost:http"`},
		"http":           {daemon(`,"ready":{"http":"ftp://x/"}`), `daemons.d.ready.http: invalid URL "ftp://x/"`},
		"cmd empty":      {daemon(`,"ready":{"cmd":[]}`), "daemons.d.ready.cmd: must name a program"},
		"regex":          {daemon(`,"ready":{"log":"(("}`), "daemons.d.ready.log: invalid regular expression"},
		"ready timeout":  {daemon(`,"ready":{"log":"x","timeout":"soon"}`), `daemons.d.ready.timeout: invalid duration "soon"`},
		"ready zero":     {daemon(`,"ready":{"log":"x","timeout":"0s"}`), `daemons.d.ready.timeout: must be positive, got "0s"`},
		"env name":       {daemon(`,"env":[{"name":"1X","value":"v"}]`), `daemons.d.env[0].name "1X": invalid variable name`},
		"env name dash":  {daemon(`,"env":[{"name":"my-var","value":"v"}]`), `daemons.d.env[0].name "my-var": invalid variable name`},
		"main env dot":   {`{"version":1,"main":{"argv":["sh"],"env":[{"name":"my.var","value":"v"}]}}`, `main.env[0].name "my.var": invalid variable name`},
		"env both":       {daemon(`,"env":[{"name":"X","value":"v","secret":"k"}]`), "exactly one of value or secret"},
		"env none":       {daemon(`,"env":[{"name":"X"}]`), "exactly one of value or secret"},
		"user":           {daemon(`,"user":"a:b:c"`), `daemons.d.user: invalid user "a:b:c"`},
		"user blank":     {daemon(`,"user":"a b"`), `invalid user "a b"`},
		"user nbsp":      {daemon(`,"user":"a\u00a0b"`), "invalid user"},
		"user uid -1":    {daemon(`,"user":"4294967295"`), `invalid user "4294967295"`},
		"main user":      {`{"version":1,"main":{"argv":["sh"],"user":":0"}}`, `main.user: invalid user ":0"`},
		"null daemon":    {`{"version":1,` + main + `,"daemons":[null]}`, "daemons[0] is null"},
		"wrong type":     {daemon(`,"timeout":"10s"`), "cannot decode spec"},
		"main env value": {`{"version":1,"main":{"argv":["sh"],"env":[{"name":"X","secret":""}]}}`, "exactly one of value or secret"},
	}
	for name, c := range cases {
		_, err := ParseSpec([]byte(c.spec))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "cannot ") {
			t.Errorf("%s: err %v, want a \"cannot\" error containing %q", name, err, c.want)
		}
	}
}

// TestParseSpecBounds: the largest values are accepted, and a timeout at the
// bound does not wrap around as a time.Duration.
func TestParseSpecBounds(t *testing.T) {
	s, err := ParseSpec([]byte(`{"version":1,"main":{"argv":["sh"]},"daemons":[{"name":"d","command":["x"],"timeout":31536000,"max_restarts":10000,"ready":{"log":"x","timeout":"8760h"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d := s.Daemons[0]
	if got := time.Duration(*d.Timeout) * time.Second; got != MaxReadyTimeout || got <= 0 {
		t.Errorf("timeout as a duration = %v", got)
	}
	if d.Ready.timeout() != MaxReadyTimeout {
		t.Errorf("ready timeout = %v", d.Ready.timeout())
	}
}

func TestFindCycle(t *testing.T) {
	spec := `{"version":1,"main":{"argv":["sh"]},"daemons":[
		{"name":"a","command":["x"],"after":["b"]},
		{"name":"b","command":["x"],"after":["c"]},
		{"name":"c","command":["x"],"after":["a"]},
		{"name":"d","command":["x"]}]}`
	_, err := ParseSpec([]byte(spec))
	if err == nil || !strings.Contains(err.Error(), "cannot order daemons: cycle in after: a -> b -> c -> a") {
		t.Errorf("err %v", err)
	}
	// Two cycles: the first in name order is reported, as validation's first.
	two := `{"version":1,"main":{"argv":["sh"]},"daemons":[
		{"name":"z","command":["x"],"after":["y"]},
		{"name":"y","command":["x"],"after":["z"]},
		{"name":"b","command":["x"],"after":["c"]},
		{"name":"c","command":["x"],"after":["b"]}]}`
	if _, err := ParseSpec([]byte(two)); err == nil || !strings.Contains(err.Error(), "cycle in after: b -> c -> b") {
		t.Errorf("two cycles: err %v", err)
	}
	ok := `{"version":1,"main":{"argv":["sh"]},"daemons":[
		{"name":"a","command":["x"],"after":["b","c"]},
		{"name":"b","command":["x"],"after":["c"]},
		{"name":"c","command":["x"]}]}`
	if _, err := ParseSpec([]byte(ok)); err != nil {
		t.Errorf("diamond: %v", err)
	}
}

// TestParseSpecAtTheBounds: the edge values the rules accept are accepted.
func TestParseSpecAtTheBounds(t *testing.T) {
	name := strings.Repeat("n", specrules.MaxNameLength)
	spec := `{"version":1,"main":{"argv":["sh"],"user":"4294967294:0","env":[{"name":"_","value":""},{"name":"A_1","value":"v"}]},"daemons":[
		{"name":"` + name + `","command":["x"],"cwd":"/srv","timeout":0,"max_restarts":0,"user":"postgres:staff","ready":{"tcp":"[::1]:65535","timeout":"1ns"}},
		{"name":"0.a_b-c","command":["x"],"after":["` + name + `"],"ready":{"http":"https://localhost/health"}},
		{"name":"e","command":["x"],"ready":{"cmd":["true"]}}]}`
	if _, err := ParseSpec([]byte(spec)); err != nil {
		t.Errorf("a spec at the bounds is refused: %v", err)
	}
}

// TestSignalsOfTheRules: every signal the rules accept is one the supervisor can send.
func TestSignalsOfTheRules(t *testing.T) {
	for _, name := range specrules.Signals {
		if _, ok := signalByName(name); !ok {
			t.Errorf("signal %s is valid by the rules but unknown to the supervisor", name)
		}
	}
	if s, ok := signalByName("SIGSTOP"); ok {
		t.Errorf("SIGSTOP, which the rules refuse, is a stop signal to the supervisor (%v)", s)
	}
}
