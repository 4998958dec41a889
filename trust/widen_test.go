package trust

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
)

const base = `
[sandbox]
image = "busybox"
cap_drop = ["CHOWN"]
[sandbox.egress]
allow = ["example.org"]
[mounts.cache]
source = "./cache"
target = "/cache"
read_only = true
[daemons.web]
command = ["web"]
`

func load(t *testing.T, doc string) *manifest.Resolved {
	t.Helper()
	env := map[string]string{"HOME": "/home/u", "PLAIN": "p"}
	l := &manifest.Loader{Builtin: presets.FS, Vault: markerVault{}, Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	r, err := l.LoadBytes("sandbox.toml", t.TempDir(), []byte(doc))
	if err != nil {
		t.Fatalf("cannot load:\n%s\n%v", doc, err)
	}
	return r
}

// TestWidens: each change a sandbox could make to its own manifest is named by
// its area and key; narrowing changes and changes that give nothing more are not.
func TestWidens(t *testing.T) {
	withEgressAllow := strings.Replace(base, `allow = ["example.org"]`, `allow = ["example.org", "*.evil.example"]`, 1)
	// Without egress: ports and other networks may be used.
	open := strings.Replace(base, "[sandbox.egress]\nallow = [\"example.org\"]\n", "", 1)
	closed := strings.Replace(open, "[sandbox]\n", "[sandbox]\nnetwork = \"none\"\n", 1)
	cases := []struct {
		name string
		old  string // base when empty
		new  string
		want []string // substrings of Summary; none: it widens nothing
	}{
		{"same", "", base, nil},
		{"a mount of the home dir", "", base + "[mounts.h]\nsource = \"~\"\ntarget = \"/hosthome\"\n", []string{"mounts (mounts.h: ~ -> /hosthome)"}},
		{"a mount moved", "", strings.Replace(base, `source = "./cache"`, `source = "/"`, 1), []string{"mounts (mounts.cache: / -> /cache (read-only) (was ./cache -> /cache))"}},
		{"a mount made writable", "", strings.Replace(base, "read_only = true", "read_only = false", 1), []string{"mounts (mounts.cache: ./cache -> /cache is now writable)"}},
		{"a copy", "", base + "[copies.k]\nsource = \"~/.ssh\"\ntarget = \"/k\"\n", []string{"copies (copies.k: ~/.ssh -> /k)"}},
		{"privileged", "", strings.Replace(base, "[sandbox]\n", "[sandbox]\nprivileged = true\n", 1), []string{"privileges (sandbox.privileged = true)"}},
		{"harden off", "", strings.Replace(base, "[sandbox]\n", "[sandbox]\nharden = false\n", 1), []string{"privileges (sandbox.harden = false)"}},
		{"a daemon's harden off", "", base + "harden = false\n", []string{"privileges (daemons.web.harden = false)"}},
		{"the docker preset", "", "presets = [\"docker\"]\n" + base, []string{"privileges (sandbox.privileged = true; daemons.dockerd.harden = false)", "presets (docker)"}},
		{"root", "", strings.Replace(base, "[sandbox]\n", "[sandbox]\nuser = \"root\"\n", 1), []string{`user (sandbox.user: "" -> "root")`}},
		{"cap_add", "", strings.Replace(base, "[sandbox]\n", "[sandbox]\ncap_add = [\"SYS_ADMIN\"]\n", 1), []string{"capabilities (cap_add SYS_ADMIN)"}},
		{"cap_drop gone", "", strings.Replace(base, `cap_drop = ["CHOWN"]`, "", 1), []string{"capabilities (cap_drop no longer drops CHOWN)"}},
		{"network host", closed, strings.Replace(closed, `network = "none"`, `network = "host"`, 1), []string{"network (sandbox.network: none -> host)"}},
		{"network bridge", closed, open, []string{"network (sandbox.network: none -> bridge)"}},
		{"network none", open, closed, nil},
		{"a port", open, strings.Replace(open, "[sandbox]\n", "[sandbox]\nports = [\"0.0.0.0:80:80\"]\n", 1), []string{"ports (0.0.0.0:80:80)"}},
		{"egress removed", "", strings.Replace(base, "[sandbox.egress]\nallow = [\"example.org\"]\n", "", 1), []string{"egress (sandbox.egress removed: every destination is reachable)"}},
		{"egress allow", "", withEgressAllow, []string{"egress (allow *.evil.example)"}},
		{"a tool", "", "tools = [\"ssh-agent\"]\n" + base, []string{"tools (ssh-agent)"}},
		{"a vault value", "", base + "[env]\nX = \"${AWS_SECRET}\"\n", []string{"env (env.X takes a value from the vault)"}},
		{"a host value", "", base + "[env]\nX = \"${PLAIN}\"\n", []string{"env (env.X takes a value from the host environment)"}},
		{"a literal env value", "", base + "[env]\nX = \"literal\"\n", nil},
		{"copy to bind", "", strings.Replace(base, "[sandbox]\n", "[sandbox]\nproject = \"bind\"\n", 1), nil},
		{"a build context", "", strings.Replace(base, `image = "busybox"`, "build = { context = \"~\" }", 1), []string{`build (sandbox.build.context = "~")`}},
		{"a service's bind of a host path", "", base + "[services.db]\nimage = \"pg\"\nvolumes = [\"/:/host:ro\", \"data:/data\"]\n", []string{"mounts (services.db.volumes: /:/host:ro)"}},
		{"a service's bind made writable", base + "[services.db]\nimage = \"pg\"\nvolumes = [\"./ci:/ci:ro\"]\n", base + "[services.db]\nimage = \"pg\"\nvolumes = [\"./ci:/ci\"]\n", []string{"mounts (services.db.volumes: ./ci:/ci)"}},
		{"a service's named volume", "", base + "[services.db]\nimage = \"pg\"\nvolumes = [\"data:/data\"]\n", nil},
		{"a service's cap_add", "", base + "[services.db]\nimage = \"pg\"\ncap_add = [\"SYS_ADMIN\"]\n", []string{"capabilities (services.db.cap_add SYS_ADMIN)"}},
		{"several", closed, strings.Replace(closed, `network = "none"`, "network = \"host\"\nprivileged = true", 1), []string{"privileges (sandbox.privileged = true), network (sandbox.network: none -> host)"}},
		// Narrowing: nothing to say.
		{"a mount gone", "", strings.Replace(base, "[mounts.cache]\nsource = \"./cache\"\ntarget = \"/cache\"\nread_only = true\n", "", 1), nil},
		{"egress allow narrowed", withEgressAllow, base, nil},
		{"more dropped", "", strings.Replace(base, `cap_drop = ["CHOWN"]`, `cap_drop = ["CHOWN", "NET_RAW"]`, 1), nil},
		{"another command", "", strings.Replace(base, `command = ["web"]`, `command = ["web", "--fast"]`, 1), nil},
	}
	old := load(t, base)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := old
			if c.old != "" {
				o = load(t, c.old)
			}
			got := Summary(Widens(o, load(t, c.new)))
			if len(c.want) == 0 && got != "" {
				t.Errorf("want nothing, got %q", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in %q", w, got)
				}
			}
		})
	}
	// From copy to a bound project: the sandbox can then write the host's.
	copied := load(t, strings.Replace(base, "[sandbox]\n", "[sandbox]\nproject = \"copy\"\n", 1))
	if got := Summary(Widens(copied, old)); got != "project (sandbox.project: copy -> auto)" {
		t.Errorf("copy -> auto: got %q", got)
	}
	// Against nothing (the accepted layers do not load), everything is new.
	if got := Summary(Widens(nil, old)); !strings.Contains(got, "mounts (mounts.cache: ./cache -> /cache (read-only))") {
		t.Errorf("against an empty manifest: %s", got)
	}
}

func TestIgnoreWidens(t *testing.T) {
	old := []byte("# secrets\n.env\nout/\n")
	got := Summary(IgnoreWidens(old, []byte("out/\n!.env.example\n")))
	want := "ignore (.airlockignore no longer leaves out .env; .airlockignore now copies .env.example)"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := IgnoreWidens(old, []byte(".env\nout/\nmore/\n")); len(got) != 0 {
		t.Errorf("a pattern added widens nothing, got %v", got)
	}
}

func TestDiff(t *testing.T) {
	old := fileOf([]byte("a\nb\nc\nd\ne\nf\ng\nh\ni\n"))
	new := fileOf([]byte("a\nb\nc\nd\ne\nf\ng\nH\ni\n[mounts.h]\nsource = \"\x1b]0;x\a\"\n"))
	got := Diff("sandbox.toml", &old, new)
	want := "--- sandbox.toml (accepted)\n+++ sandbox.toml (now)\n@@ line 5 @@\n e\n f\n g\n-h\n+H\n i\n+[mounts.h]\n+source = \"\\x1b]0;x\\x07\"\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := Diff("sandbox.local.toml", &File{Absent: true}, fileOf([]byte("x = 1\n"))); !strings.Contains(got, "(absent when last accepted)\n@@ line 1 @@\n+x = 1\n") {
		t.Errorf("a new file:\n%s", got)
	}
}
