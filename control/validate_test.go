package control_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/manifest"
)

// TestCreateValidatesTheManifest: the API checks a create request's manifest
// with the rules of `airlock validate` and answers 400 with the same
// `key.path: message` errors, before an ID is reserved or anything created.
func TestCreateValidatesTheManifest(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	d := e.startDaemon(binA)
	c := d.client
	ctx := ctxT(t, 2*time.Minute)
	id := uniq("validated")

	// tamper returns a create request whose manifest edit changed.
	tamper := func(edit func(m *manifest.Manifest, req *client.CreateRequest)) *client.CreateRequest {
		req := e.upRequest(id)
		req.Start = false
		var m manifest.Manifest
		if err := json.Unmarshal(req.Manifest.Resolved, &m); err != nil {
			t.Fatal(err)
		}
		edit(&m, req)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		req.Manifest.Resolved = b
		return req
	}
	refused := func(what string, req *client.CreateRequest, reason string, lines ...string) {
		t.Helper()
		sb, err := c.Create(ctx, req)
		var ce *client.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: create = %+v, %v; want a %s error", what, sb, err, reason)
		}
		if ce.Status != http.StatusBadRequest || ce.Reason != reason {
			t.Errorf("%s: status %d, reason %s; want 400 %s (%s)", what, ce.Status, ce.Reason, reason, ce.Message)
		}
		got := strings.Split(ce.Message, "\n")
		for _, l := range lines {
			found := false
			for _, g := range got {
				found = found || g == l
			}
			if !found {
				t.Errorf("%s: the message lacks the line\n\t%s\ngot:\n\t%s", what, l, strings.Join(got, "\n\t"))
			}
		}
		if len(lines) > 0 && len(got) != len(lines) {
			t.Errorf("%s: %d lines, want %d:\n\t%s", what, len(got), len(lines), strings.Join(got, "\n\t"))
		}
	}

	refused("absurd values", tamper(func(m *manifest.Manifest, _ *client.CreateRequest) {
		m.Sandbox.CPUs = 1e300
		m.Sandbox.Memory = "99999999999t"
		idle := m.Daemons["idle"]
		idle.Timeout = 1<<63 - 1
		idle.Command = append(idle.Command, "a\x00b")
		idle.Signal = "SIGBOGUS"
		m.Daemons["idle"] = idle
		m.Env = map[string]string{"A.B": "x", "OK": "y\x00"}
	}), client.ReasonConfig,
		`daemons.idle.command: must not contain a NUL byte (element 3)`,
		`daemons.idle.signal: unknown signal "SIGBOGUS" (use one of SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL)`,
		`daemons.idle.timeout: must be at most 31536000 seconds (a year; 0 waits forever), got 9223372036854775807`,
		`env."A.B": invalid variable name (use letters, digits and _, not starting with a digit)`,
		`env.OK: must not contain a NUL byte`,
		`sandbox.cpus: must be between 0.01 and 1024 (0 means no limit), got 1e+300`,
		`sandbox.memory: size "99999999999t" is above the maximum of 1024t (1 PiB)`,
	)
	refused("a vault value in a host path", tamper(func(m *manifest.Manifest, req *client.CreateRequest) {
		m.Mounts = map[string]manifest.Mount{"cache": {Enabled: true, Source: manifest.Mask, Target: "/cache", Missing: "warn"}}
		req.Manifest.Sources = map[string]string{"mounts.cache.source": "vault"}
		req.Secrets = map[string]string{"mounts.cache.source": "/home/dev/secret-path"}
	}), client.ReasonConfig,
		`mounts.cache.source: a value from the vault cannot be used in a host path (it would show in messages); use an environment variable`)
	refused("no image", tamper(func(m *manifest.Manifest, _ *client.CreateRequest) { m.Sandbox.Image = "" }), client.ReasonConfig,
		`sandbox.image: is required unless [sandbox.build] is given`)
	// "host" is the client's user: the CLI resolves it (cli.TestHostUserResolved).
	refused("an unresolved host user", tamper(func(m *manifest.Manifest, _ *client.CreateRequest) { m.Sandbox.User = manifest.HostUser }), client.ReasonConfig,
		`sandbox.user: "host" must be resolved by the client to the uid:gid of the user running it before the manifest is sent (airlock's CLI does); send that "UID:GID" instead`)
	unknown := e.upRequest(id)
	unknown.Manifest.Resolved = json.RawMessage(strings.Replace(string(unknown.Manifest.Resolved), `"sandbox":{`, `"sandbox":{"bogus":1,`, 1))
	refused("an unknown key", unknown, client.ReasonInvalidRequest)

	// Nothing was recorded, and the ID was not reserved.
	if list, err := c.List(ctx, nil); err != nil || len(list) != 0 {
		t.Errorf("refused creates left records: %+v %v", list, err)
	}
	req := e.upRequest(id)
	req.Start = false
	sb, err := c.Create(ctx, req)
	if err != nil {
		t.Fatalf("create with the id a refused request named: %v", err)
	}
	if evs := allEvents(t, c, sb.ID); len(evs) == 0 || evs[0].Kind != "sandbox.accepted" || evs[0].Sequence != 1 {
		t.Errorf("events of the accepted sandbox: %v", kinds(evs))
	}
	if ev, err := c.WaitEvent(ctx, sb.ID, 0, "sandbox.created", "sandbox.failed"); err != nil || ev.Kind != "sandbox.created" {
		t.Fatalf("the accepted sandbox: %s %v\n%s", ev.Reason, err, dumpEvents(c, sb.ID))
	}
	if _, err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, sb.ID, 60*time.Second, client.StateDeleted)
}
