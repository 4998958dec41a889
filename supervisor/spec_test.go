package supervisor

import (
	"strings"
	"testing"
	"time"
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
	cases := map[string]struct{ spec, want string }{
		"not json":       {`{`, "cannot decode spec"},
		"trailing":       {`{"version":1,` + main + `} {}`, "trailing data"},
		"unknown field":  {`{"version":1,` + main + `,"extra":true}`, `unknown field "extra"`},
		"version":        {`{` + main + `}`, "cannot use spec version 0"},
		"empty argv0":    {`{"version":1,"main":{"argv":[""]}}`, "main.argv[0] is empty"},
		"bad name":       {`{"version":1,` + main + `,"daemons":[{"name":"a b","command":["x"]}]}`, "not a valid daemon name"},
		"twice":          {`{"version":1,` + main + `,"daemons":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}`, "daemon a is defined twice"},
		"no command":     {`{"version":1,` + main + `,"daemons":[{"name":"a"}]}`, "daemons.a.command is empty"},
		"signal":         {daemon(`,"signal":"SIGSTOP"`), `daemons.d.signal: unknown signal "SIGSTOP"`},
		"timeout":        {daemon(`,"timeout":-1`), "daemons.d.timeout is negative"},
		"timeout MaxInt": {daemon(`,"timeout":9223372036854775807`), "daemons.d.timeout is more than 31536000 seconds (a year)"},
		"timeout year+1": {daemon(`,"timeout":31536001`), "daemons.d.timeout is more than 31536000 seconds (a year)"},
		"max too large":  {daemon(`,"max_restarts":10001`), "daemons.d.max_restarts is more than 10000"},
		"ready too long": {daemon(`,"ready":{"log":"x","timeout":"8761h"}`), `daemons.d.ready.timeout "8761h" is more than a year`},
		"restart":        {daemon(`,"restart":"never"`), `unknown policy "never"`},
		"max":            {daemon(`,"max_restarts":-2`), "max_restarts is negative"},
		"after unknown":  {daemon(`,"after":["zz"]`), `after: unknown daemon "zz"`},
		"after self":     {daemon(`,"after":["d"]`), "cycle in after: d -> d"},
		"two checks":     {daemon(`,"ready":{"tcp":"a:1","log":"x"}`), "exactly one of tcp, http, cmd or log (has 2)"},
		"no check":       {daemon(`,"ready":{}`), "(has 0)"},
		"tcp":            {daemon(`,"ready":{"tcp":"nohost"}`), "is not host:port"},
		"http":           {daemon(`,"ready":{"http":"ftp://x/"}`), "is not an http(s) URL"},
		"regex":          {daemon(`,"ready":{"log":"(("}`), "daemons.d.ready.log"},
		"ready timeout":  {daemon(`,"ready":{"log":"x","timeout":"soon"}`), `timeout "soon" is not a positive duration`},
		"env name":       {daemon(`,"env":[{"name":"1X","value":"v"}]`), "not a valid variable name"},
		"env both":       {daemon(`,"env":[{"name":"X","value":"v","secret":"k"}]`), "exactly one of value or secret"},
		"env none":       {daemon(`,"env":[{"name":"X"}]`), "exactly one of value or secret"},
		"user":           {daemon(`,"user":"a:b:c"`), `daemons.d.user "a:b:c" is not USER or USER:GROUP`},
		"user blank":     {daemon(`,"user":"a b"`), "is not USER or USER:GROUP"},
		"main user":      {`{"version":1,"main":{"argv":["sh"],"user":":0"}}`, `main.user ":0" is not USER or USER:GROUP`},
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
	ok := `{"version":1,"main":{"argv":["sh"]},"daemons":[
		{"name":"a","command":["x"],"after":["b","c"]},
		{"name":"b","command":["x"],"after":["c"]},
		{"name":"c","command":["x"]}]}`
	if _, err := ParseSpec([]byte(ok)); err != nil {
		t.Errorf("diamond: %v", err)
	}
}
