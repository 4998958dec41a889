package manifest_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/manifest"
)

// FuzzLoad feeds arbitrary bytes as sandbox.toml (and as sandbox.local.toml) to the
// loader. It must never panic; every failure must be a config error; a success
// must render as TOML, JSON and settings that never show a vault value, hold only
// numbers within their bounds and no NUL byte, keep vault values out of host
// paths, and pass Validate again after the trip through the wire (Redacted,
// Restore) that the control daemon's API makes.

const fuzzSecret = "FUZZ-VAULT-SECRET"

var fuzzFiles = map[string]string{
	"/proj/team.toml":       "presets = [\"./sub/nested.toml\", \"base\"]\n[env]\nTEAM = \"1\"\n[mounts.cache]\nsource = \"~/.cache\"\ntarget = \"/cache\"\n",
	"/proj/sub/nested.toml": "[daemons.side]\ncommand = [\"side\"]\nready = { log = \"up\" }\n[env]\nNESTED = \"${HOME_DIR:-/root}\"\n",
	"/proj/loop.toml":       "presets = [\"./loop.toml\"]\n",
	"/user/mine.toml":       "tools = [\"git\"]\n[env]\nMINE = \"${SECRET}\"\n",
}

var fuzzBuiltin = fstest.MapFS{
	"redis.toml": {Data: []byte("[env]\nREDIS_URL = \"redis://127.0.0.1:6379/0\"\n[daemons.redis]\ncommand = [\"redis-server\"]\nready = { tcp = \"127.0.0.1:6379\", timeout = \"30s\" }\n")},
	"base.toml":  {Data: []byte("[sandbox]\nimage = \"debian:bookworm\"\nnetwork = \"bridge\"\n")},
	"mine.toml":  {Data: []byte("[env]\nSHADOWED = \"1\"\n")},
}

type fuzzVault struct{}

func (fuzzVault) Lookup(name string) (string, bool, error) {
	if strings.HasPrefix(name, "S") {
		return fuzzSecret, true, nil
	}
	return "", false, nil
}

func fuzzLoader(main, local []byte) *manifest.Loader {
	return &manifest.Loader{
		UserPresetsDir: "/user",
		Builtin:        fuzzBuiltin,
		Getenv: func(name string) (string, bool) {
			v, ok := map[string]string{"HOME_DIR": "/home/dev", "IMAGE": "alpine:3", "EMPTY": ""}[name]
			return v, ok
		},
		Vault: fuzzVault{},
		ReadFile: func(p string) ([]byte, error) {
			switch p {
			case "/proj/sandbox.toml":
				return main, nil
			case "/proj/sandbox.local.toml":
				if local != nil {
					return local, nil
				}
			default:
				if s, ok := fuzzFiles[p]; ok {
					return []byte(s), nil
				}
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
	}
}

func FuzzLoad(f *testing.F) {
	seeds := []struct{ main, local string }{
		{img, ""},
		{rich, ""},
		{everyEntry, "[sandbox]\nnetwork = \"none\"\n[mounts.dir]\nenabled = false\n"},
		{"presets = [\"./team.toml\", \"redis\", \"mine\"]\n" + img + "[env]\nTOKEN = \"${SECRET_TOKEN}\"\nH = \"${HOME_DIR}\"\n", "presets = [\"base\"]\n[daemons.redis]\nenabled = false\n"},
		{"presets = [\"base\"]\n[daemons.a]\ncommand = [\"a\"]\nafter = [\"b\"]\n[daemons.b]\ncommand = [\"b\"]\nafter = [\"a\"]\n", ""},
		{"presets = [\"./loop.toml\"]\n" + img, ""},
		{"presets = [\"nope\", \"../x.toml\", \"\"]\n" + img, ""},
		{"[sandbox]\nimage = \"${IMAGE}\"\ncpus = nan\n[env]\n\"A.B\" = \"${MISSING}\"\n", ""},
		{"[sandbox\nimage = \"x\"\n", "[env]\nA = \n"},
		{"[Sandbox]\nImage = \"x\"\n[[daemons]]\n", "env = []\n"},
		{img + "[daemons.d]\ncommand = [\"d\"]\nready = { tcp = \"x\", http = \"y\", cmd = [], log = \"(\" }\nsignal = \"SIGBOGUS\"\ntimeout = -1\n", "[daemons.d.ready]\nlog = \"ok\"\n"},
		{img + "[mounts.m]\nsource = \"${S}\"\ntarget = \"/m\"\nmissing = \"create-file\"\ncreate_mode = \"9\"\nfile_content = \"x\"\n[copies.c]\nsource = \"$$\"\ntarget = \"/m/\"\nexclude = [\"[\"]\n", ""},
		{img + "[services.db]\nhealthcheck = { cmd = [\"\"], interval = \"-1s\", retries = -1 }\nenv = { P = \"${SECRET:-x}\" }\n", "[services.ghost]\nenabled = false\n"},
		{"tools = [\"git\", \"git\", \"hammer\"]\n[sandbox.build]\nargs = { A = \"1\" }\n", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.main), []byte(s.local))
	}
	f.Fuzz(func(t *testing.T, main, local []byte) {
		secretInInput := bytes.Contains(main, []byte(fuzzSecret)) || bytes.Contains(local, []byte(fuzzSecret))

		r, err := fuzzLoader(main, nil).LoadBytes("sandbox.toml", "/proj", main)
		checkFuzzResult(t, r, err, secretInInput)

		if len(local) == 0 {
			local = nil
		}
		r, err = fuzzLoader(main, local).Load("/proj/sandbox.toml")
		checkFuzzResult(t, r, err, secretInInput)
	})
}

func checkFuzzResult(t *testing.T, r *manifest.Resolved, err error, secretInInput bool) {
	t.Helper()
	if err != nil {
		if !manifest.IsConfigError(err) {
			t.Fatalf("not a config error (%T): %v", err, err)
		}
		if !secretInInput && strings.Contains(err.Error(), fuzzSecret) {
			t.Fatalf("error text shows a vault value: %v", err)
		}
		return
	}
	out, err := r.TOML()
	if err != nil {
		t.Fatalf("TOML: %v", err)
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	settings, err := json.Marshal(r.Settings())
	if err != nil {
		t.Fatalf("Settings: %v", err)
	}
	if !secretInInput {
		for name, b := range map[string][]byte{"TOML": out, "JSON": js, "Settings": settings} {
			if bytes.Contains(b, []byte(fuzzSecret)) {
				t.Fatalf("%s output shows a vault value:\n%s", name, b)
			}
		}
	}
	// The TOML output decodes back, strictly, to the masked manifest.
	var back manifest.Manifest
	md, err := toml.Decode(string(out), &back)
	if err != nil {
		t.Fatalf("TOML output does not decode: %v\n%s", err, out)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Fatalf("TOML output has unknown keys %v:\n%s", u, out)
	}
	if want := r.Masked(); !sameManifest(back, want) {
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(back)
		t.Fatalf("TOML output decodes to another manifest:\n%s\nwant %s\ngot  %s", out, a, b)
	}
	var fromJSON manifest.Manifest
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatalf("JSON output does not decode: %v", err)
	}
	checkFuzzBounds(t, r)
}

// checkFuzzBounds checks what a loaded manifest promises the runtime and the
// supervisor: numbers that convert without wrapping, no NUL, no vault value in
// a host path, and keys of Sources spelled as KeyPath spells them.
func checkFuzzBounds(t *testing.T, r *manifest.Resolved) {
	t.Helper()
	if err := r.Validate(); err != nil {
		t.Fatalf("a loaded manifest fails Validate: %v", err)
	}
	m, values := r.Redacted()
	wire, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back manifest.Manifest
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	restored := manifest.Restore(back, r.File, r.ProjectDir, r.Sources, values)
	if err := restored.Validate(); err != nil {
		t.Fatalf("the manifest restored from the wire fails Validate: %v", err)
	}
	if !sameManifest(restored.Manifest, r.Manifest) {
		t.Fatalf("Restore(Redacted()) is another manifest")
	}
	for key := range r.Sources {
		if _, ok := values[key]; !ok {
			t.Fatalf("Sources names %s, which Redacted does not take out", key)
		}
	}
	if c := r.Sandbox.CPUs; c != 0 && (int64(c*1e9) < 1e7 || int64(c*1e9) > 1024e9) {
		t.Fatalf("sandbox.cpus %g gives NanoCPUs %d", c, int64(c*1e9))
	}
	if r.Sandbox.Memory != "" {
		if n, err := manifest.ParseMemory(r.Sandbox.Memory); err != nil || n < 0 || n > manifest.MaxMemory {
			t.Fatalf("sandbox.memory %q = %d, %v", r.Sandbox.Memory, n, err)
		}
	}
	for name, d := range r.Daemons {
		if d.Timeout < 0 || d.Timeout > manifest.MaxDaemonTimeout || d.MaxRestarts < 0 || d.MaxRestarts > manifest.MaxCount {
			t.Fatalf("daemons.%s: timeout %d, max_restarts %d", name, d.Timeout, d.MaxRestarts)
		}
	}
	for _, sec := range []string{"mounts", "copies"} {
		for key, src := range r.Sources {
			if strings.HasPrefix(key, sec+".") && strings.HasSuffix(key, ".source") && src == manifest.Vault {
				t.Fatalf("%s holds a vault value", key)
			}
		}
	}
	b, _ := json.Marshal(r.Manifest)
	var tree any
	_ = json.Unmarshal(b, &tree)
	var nul func(v any) bool
	nul = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.ContainsRune(x, 0)
		case []any:
			return slices.ContainsFunc(x, nul)
		case map[string]any:
			for k, e := range x {
				if strings.ContainsRune(k, 0) || nul(e) {
					return true
				}
			}
		}
		return false
	}
	if nul(tree) {
		t.Fatalf("the manifest holds a NUL byte: %s", b)
	}
}

// sameManifest compares through JSON, where nil and empty collections agree.
func sameManifest(a, b manifest.Manifest) bool {
	norm := func(m manifest.Manifest) any {
		j, _ := json.Marshal(m)
		var v any
		_ = json.Unmarshal(j, &v)
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
