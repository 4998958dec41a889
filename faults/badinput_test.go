//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/bench/benchdoc"
	"github.com/airlock-dev/airlock/client"
)

// badInput is one bad input to the CLI: what it is, the manifest (with {{image}}),
// the arguments, and the documented exit code and message.
type badInput struct {
	name     string
	manifest string
	args     []string
	env      []string
	setup    func(e *env)
	// sigint, when set, sends SIGINT to the CLI that long after its start.
	sigint time.Duration
	code   int
	want   []string // in stderr
}

const img = "[sandbox]\nimage = \"{{image}}\"\n"

var badInputs = []badInput{
	{name: "bad TOML", manifest: "[sandbox\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"config error: sandbox.toml:1:"}},
	{name: "unknown key", manifest: img + "bogus = 1\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"config error:", "sandbox.toml:3: sandbox.bogus: unknown key"}},
	{name: "bad signal", manifest: img + "[daemons.x]\ncommand = [\"sleep\", \"9\"]\nsignal = \"SIGFOO\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"daemons.x.signal", "SIGFOO"}},
	{name: "missing mount source", manifest: img + "[mounts.m]\nsource = \"/nonexistent/airlock-faults\"\ntarget = \"/m\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"mounts.m.source", "/nonexistent/airlock-faults does not exist"}},
	{name: "missing copy source", manifest: img + "[copies.c]\nsource = \"no-such-dir\"\ntarget = \"/c\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"copies.c.source", "no-such-dir", "no such file or directory"}},
	{name: "unknown preset", manifest: "presets = [\"nosuchpreset\"]\n" + img, args: []string{"run", "--", "true"}, code: 2, want: []string{"presets", `unknown preset "nosuchpreset"`}},
	{name: "unknown tool", manifest: "tools = [\"frob\"]\n" + img, args: []string{"run", "--", "true"}, code: 2, want: []string{"tools", `unknown tool "frob"`}},
	{name: "preset cycle", manifest: "presets = [\"p1\"]\n" + img, args: []string{"run", "--", "true"}, code: 2, want: []string{"preset cycle: p1 -> p2 -> p1"},
		setup: func(e *env) {
			dir := filepath.Join(e.Config, "airlock", "presets")
			must(e.T, os.MkdirAll(dir, 0o700))
			must(e.T, os.WriteFile(filepath.Join(dir, "p1.toml"), []byte("presets = [\"p2\"]\n"), 0o600))
			must(e.T, os.WriteFile(filepath.Join(dir, "p2.toml"), []byte("presets = [\"p1\"]\n"), 0o600))
		}},
	{name: "daemon after cycle", manifest: img + "[daemons.a]\ncommand = [\"sleep\", \"9\"]\nafter = [\"b\"]\n[daemons.b]\ncommand = [\"sleep\", \"9\"]\nafter = [\"a\"]\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"daemons.a.after: cycle: a -> b -> a"}},
	{name: "missing ${VAR}", manifest: img + "[env]\nX = \"${AIRLOCK_FAULTS_NOPE}\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"env.X", "AIRLOCK_FAULTS_NOPE is not set"}},
	{name: "negative cpus", manifest: img + "cpus = -3\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"sandbox.cpus", "negative"}},
	{name: "absurd memory", manifest: img + "memory = \"99999999T\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"sandbox.memory", "above the maximum"}},
	{name: "bad duration", manifest: img + "ready_timeout = \"soon\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"sandbox.ready_timeout"}},
	{name: "NUL byte", manifest: img + "[env]\nX = \"a\\u0000b\"\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"env.X: must not contain a NUL byte"}},
	{name: "bad egress entry", manifest: img + "[sandbox.egress]\nallow = [\"::::\"]\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"sandbox.egress.allow", `"::::"`}},
	{name: "bad ready regexp", manifest: img + "[daemons.d]\ncommand = [\"sleep\", \"9\"]\nready = { log = \"(\" }\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"daemons.d.ready"}},
	{name: "service without image", manifest: img + "[services.db]\nenv = { A = \"1\" }\n", args: []string{"run", "--", "true"}, code: 2, want: []string{"services.db.image"}},
	{name: "bad --label", manifest: img, args: []string{"run", "--label", "=x", "--", "true"}, code: 2, want: []string{`invalid --label "=x"`}},
	{name: "reserved --label", manifest: img, args: []string{"run", "--label", "dev.airlock.project=x", "--", "true"}, code: 2, want: []string{`--label "dev.airlock.project=x"`}},
	{name: "bad --id", manifest: img, args: []string{"run", "--id", "BAD ID!", "--", "true"}, code: 2, want: []string{`"BAD ID!"`, "not valid"}},
	{name: "bad -e", manifest: img, args: []string{"run", "-e", "=x", "--", "true"}, code: 2, want: []string{`invalid -e "=x"`}},
	{name: "--output outside the project", manifest: img, args: []string{"run", "--output", "../../etc", "--", "true"}, code: 2, want: []string{`invalid --output "../../etc"`}},
	{name: "absolute --output", manifest: img, args: []string{"run", "--output", "/etc", "--", "true"}, code: 2, want: []string{`--output "/etc"`}},
	{name: "unknown command", manifest: img, args: []string{"frobnicate"}, code: 2, want: []string{`unknown command "frobnicate"`}},
	{name: "unknown flag", manifest: img, args: []string{"run", "--frob", "--", "true"}, code: 2, want: []string{"unknown flag: --frob"}},
	{name: "run without a command", manifest: img, args: []string{"run"}, code: 2, want: []string{"requires at least 1 arg"}},
	{name: "missing --file", manifest: img, args: []string{"--file", "/nonexistent/sandbox.toml", "run", "--", "true"}, code: 2, want: []string{"--file /nonexistent/sandbox.toml"}},
	{name: "bad --log-level", manifest: img, args: []string{"--log-level", "loud", "run", "--", "true"}, code: 2, want: []string{"loud"}},
	{name: "bad events --from", manifest: img, args: []string{"events", "--from", "x"}, code: 2, want: []string{`invalid argument "x" for "--from"`}},
	{name: "missing image", manifest: "[sandbox]\nimage = \"airlock-faults/no-such-image:nope\"\n", args: []string{"run", "--", "true"}, code: 125, want: []string{"image airlock-faults/no-such-image:nope"}},
	{name: "unreachable Engine", manifest: img, args: []string{"run", "--", "true"}, env: []string{"DOCKER_HOST=unix:///nonexistent.sock"}, code: 125, want: []string{"cannot reach the Docker Engine at unix:///nonexistent.sock"}},
	{name: "daemon never ready", manifest: img + "[daemons.web]\ncommand = [\"sleep\", \"99\"]\nready = { tcp = \"127.0.0.1:9\", timeout = \"1s\" }\n", args: []string{"run", "--", "true"}, code: 125, want: []string{"daemon web not ready after 1s"}},
	{name: "Ctrl-C while a daemon gets ready", manifest: img + "[daemons.web]\ncommand = [\"sleep\", \"99\"]\nready = { tcp = \"127.0.0.1:9\", timeout = \"30s\" }\n", args: []string{"run", "--", "true"}, sigint: 2 * time.Second, code: 130, want: []string{"interrupted during setup"}},
	{name: "Ctrl-C at once", manifest: img, args: []string{"run", "--", "sleep", "5"}, sigint: 150 * time.Millisecond, code: 130, want: []string{"interrupted during setup"}},
	{name: "command not executable", manifest: img, args: []string{"run", "--", "/etc/passwd"}, code: 126, want: []string{"/etc/passwd: not executable"}},
	{name: "command not found", manifest: img, args: []string{"run", "--", "no-such-command"}, code: 127, want: []string{"no-such-command: not found"}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestBadInputs: each bad input gives its documented exit code and a message
// naming what is wrong, and leaves nothing behind.
func TestBadInputs(t *testing.T) {
	var rows []benchdoc.Row
	var ok, total int
	for _, c := range badInputs {
		total++
		var got string
		passed := t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.manifest)
			if c.setup != nil {
				c.setup(e)
			}
			var r result
			if c.sigint > 0 {
				p := e.Start(c.args...)
				time.Sleep(c.sigint)
				must(t, p.Cmd.Process.Signal(syscall.SIGINT))
				var done bool
				if r, done = p.Wait(time.Minute); !done {
					t.Errorf("did not end within a minute of SIGINT")
				}
			} else {
				r = e.RunEnv(c.env, c.args...)
			}
			got = fmt.Sprintf("exit %d: %s", r.Code, firstLine(r.Stderr))
			if r.Code != c.code {
				t.Errorf("want exit %d, got %s", c.code, r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r.Stderr)
				}
			}
			if left, _ := e.leftoversAfter(leftoverGrace); len(left) > 0 {
				t.Errorf("%d object(s) left: %v", len(left), left)
			}
			if ents, _ := os.ReadDir(filepath.Join(e.Data, "airlock", "sandboxes")); len(ents) > 0 {
				t.Errorf("%d state dir(s) left", len(ents))
			}
		})
		verdict := "✔"
		if passed {
			ok++
		} else {
			verdict = "✘"
		}
		rows = append(rows, benchdoc.Row{Measure: "CLI: " + c.name + " (`" + strings.Join(c.args, " ") + "`)", Result: verdict + " " + mdEscape(got), Target: fmt.Sprintf("exit %d", c.code)})
	}
	apiRows, apiOK, apiTotal := apiBadInputs(t)
	rows = append(rows, apiRows...)
	ok += apiOK
	total += apiTotal
	rows = append([]benchdoc.Row{{Measure: "bad inputs with their documented code, a message naming the fault, and nothing left", Result: fmt.Sprintf("%d/%d", ok, total), Target: fmt.Sprintf("%d/%d (≥ 30)", total, total)}}, rows...)
	record(t, "Bad inputs", "Each input in a fresh environment; the result is the exit code (or HTTP status) and the first line of stderr (or the API error). Afterwards nothing labelled with the project may be left on the Engine and no state dir.", rows, "")
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "airlock:") || strings.HasPrefix(l, "config error:") {
			return l
		}
	}
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

func mdEscape(s string) string {
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// apiBadInputs sends bad create requests to the daemon's API through the Go
// client: each must be refused with 400 and a message naming the fault, and
// create no sandbox.
func apiBadInputs(t *testing.T) (rows []benchdoc.Row, ok, total int) {
	e := newEnv(t, img)
	e.MustRun("daemon", "start")
	var good map[string]any
	must(t, json.Unmarshal([]byte(e.MustRun("config", "--json").Stdout), &good))
	resolved := func(mut func(m map[string]any)) json.RawMessage {
		b, _ := json.Marshal(good)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mut(m)
		out, _ := json.Marshal(m)
		return out
	}
	sb := func(m map[string]any) map[string]any { return m["sandbox"].(map[string]any) }
	man := func(r json.RawMessage) *client.Manifest {
		return &client.Manifest{File: filepath.Join(e.Project, "sandbox.toml"), ProjectDir: e.Project, Resolved: r}
	}
	cases := []struct {
		name string
		req  *client.CreateRequest
		raw  string // a raw body instead of req
		want string
	}{
		{name: "no manifest", req: &client.CreateRequest{Kind: "run", Command: []string{"true"}}, want: "a manifest is required"},
		{name: "unknown kind", req: &client.CreateRequest{Kind: "bogus", Manifest: man(resolved(func(map[string]any) {})), Command: []string{"true"}}, want: "kind must be"},
		{name: "manifest not JSON", req: &client.CreateRequest{Kind: "run", Manifest: man(json.RawMessage(`"x"`)), Command: []string{"true"}}, want: "cannot decode the manifest"},
		{name: "negative cpus", req: &client.CreateRequest{Kind: "run", Manifest: man(resolved(func(m map[string]any) { sb(m)["cpus"] = -1 })), Command: []string{"true"}}, want: "sandbox.cpus"},
		{name: "no image", req: &client.CreateRequest{Kind: "run", Manifest: man(resolved(func(m map[string]any) { sb(m)["image"] = "" })), Command: []string{"true"}}, want: "sandbox.image"},
		{name: "bad daemon signal", req: &client.CreateRequest{Kind: "run", Manifest: man(resolved(func(m map[string]any) {
			m["daemons"] = map[string]any{"x": map[string]any{"command": []string{"sleep", "9"}, "signal": "SIGFOO"}}
		})), Command: []string{"true"}}, want: "SIGFOO"},
		{name: "bad id", req: &client.CreateRequest{ID: "BAD ID!", Kind: "run", Manifest: man(resolved(func(map[string]any) {})), Command: []string{"true"}}, want: "id"},
		{name: "unknown body field", raw: `{"kind":"run","bogus":1}`, want: "bogus"},
		{name: "body not JSON", raw: `{"kind":`, want: ""},
	}
	cl := client.New(e.Socket())
	for _, c := range cases {
		total++
		var got string
		passed := t.Run("API "+c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			status, msg, err := 0, "", error(nil)
			if c.raw != "" {
				status, msg, err = rawCreate(ctx, e.Socket(), c.raw)
			} else {
				var s *client.Sandbox
				s, err = cl.Create(ctx, c.req)
				var ae *client.Error
				switch {
				case errors.As(err, &ae):
					status, msg, err = ae.Status, ae.Error(), nil
				case err == nil:
					msg = "accepted: sandbox " + s.ID
					status = 202
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			got = fmt.Sprintf("%d: %s", status, msg)
			if status != http.StatusBadRequest {
				t.Errorf("want 400, got %s", got)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("the error does not name %q: %s", c.want, got)
			}
		})
		verdict := "✔"
		if passed {
			ok++
		} else {
			verdict = "✘"
		}
		rows = append(rows, benchdoc.Row{Measure: "API: POST /v1/sandboxes, " + c.name, Result: verdict + " " + mdEscape(got), Target: "400"})
	}
	list, err := cl.List(context.Background(), nil)
	must(t, err)
	for _, s := range list {
		if s.Project == e.Project {
			t.Errorf("bad API requests left a sandbox record: %+v", s)
		}
	}
	if left, _ := e.leftoversAfter(leftoverGrace); len(left) > 0 {
		t.Errorf("bad API requests left %v", left)
	}
	return rows, ok, total
}

// rawCreate posts body to the daemon's create endpoint.
func rawCreate(ctx context.Context, socket, body string) (int, string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://airlock/v1/sandboxes", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var ae client.Error
	_ = json.NewDecoder(resp.Body).Decode(&ae)
	return resp.StatusCode, ae.Error(), nil
}
