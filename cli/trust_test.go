package cli

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/trust"
)

func TestTrustRefusal(t *testing.T) {
	cases := []struct {
		changes []trust.Change
		want    string
	}{
		{[]trust.Change{{Path: "/p/sandbox.local.toml", Inside: true, Sandbox: "s1"}, {Path: "/p/sandbox.toml"}},
			`/p/sandbox.local.toml changed while sandbox s1 ran: it widens mounts (mounts.h: ~ -> /hosthome); review with "airlock trust"`},
		{[]trust.Change{{Path: "/p/sandbox.toml", Inside: true}, {Path: "/p/team.toml", Inside: true, Sandbox: "s2"}},
			`/p/sandbox.toml, /p/team.toml changed while sandbox s2 ran: together they widen mounts (mounts.h: ~ -> /hosthome); review with "airlock trust"`},
		{[]trust.Change{{Path: "/p/sandbox.toml", Inside: true}},
			`/p/sandbox.toml changed while a sandbox ran: it widens mounts (mounts.h: ~ -> /hosthome); review with "airlock trust"`},
	}
	for _, c := range cases {
		if got := refusal(c.changes, "mounts (mounts.h: ~ -> /hosthome)"); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestReadYes(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "YES\r": true, " y \nmore": true, "\n": false, "n\n": false, "yep\n": false, "": false} {
		if got := readYes(strings.NewReader(in)); got != want {
			t.Errorf("readYes(%q) = %v, want %v", in, got, want)
		}
	}
}
