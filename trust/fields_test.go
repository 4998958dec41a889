package trust

import (
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/presets"
)

// widenCases holds, for every key whose widening rule names an area, a change
// of it (old manifest, new manifest) that Widens must report in that area. A
// key of the field table with no rule, or with an area and no case here, fails
// TestEveryKeyHasAWideningRule: a new key cannot be added without saying what
// a change of it gives a sandbox.
var widenCases = map[string]struct{ old, new string }{
	"presets":                    {``, `presets = ["redis"]`},
	"tools":                      {``, `tools = ["git"]`},
	"sandbox.image":              {``, "[sandbox]\nimage = \"${HOST_VAR}\""},
	"sandbox.build":              {``, "[sandbox.build]\ncontext = \"/\""},
	"sandbox.build.context":      {"[sandbox.build]\ncontext = \".\"", "[sandbox.build]\ncontext = \"..\""},
	"sandbox.build.dockerfile":   {"[sandbox.build]\ncontext = \".\"", "[sandbox.build]\ncontext = \".\"\ndockerfile = \"/etc/x\""},
	"sandbox.user":               {``, "[sandbox]\nuser = \"root\""},
	"sandbox.harden":             {``, "[sandbox]\nharden = false"},
	"sandbox.privileged":         {``, "[sandbox]\nprivileged = true"},
	"sandbox.project":            {"[sandbox]\nproject = \"copy\"", "[sandbox]\nproject = \"bind\""},
	"sandbox.egress":             {"[sandbox.egress]\nallow = [\"a.example\"]", ``},
	"sandbox.egress.allow":       {"[sandbox.egress]\nallow = [\"a.example\"]", "[sandbox.egress]\nallow = [\"a.example\", \"b.example\"]"},
	"sandbox.egress.network":     {"[sandbox.egress]\nallow = []", "[sandbox.egress]\nallow = []\nnetwork = \"host\""},
	"sandbox.network":            {"[sandbox]\nnetwork = \"none\"", "[sandbox]\nnetwork = \"bridge\""},
	"sandbox.ports":              {``, "[sandbox]\nports = [\"8080\"]"},
	"sandbox.cap_add":            {``, "[sandbox]\ncap_add = [\"NET_ADMIN\"]"},
	"sandbox.cap_drop":           {"[sandbox]\ncap_drop = [\"CHOWN\"]", ``},
	"env":                        {``, "[env]\nT = \"${HOST_VAR}\""},
	"mounts.<name>":              {``, "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\""},
	"mounts.<name>.enabled":      {"[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\"\nenabled = false", "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\""},
	"mounts.<name>.source":       {"[mounts.h]\nsource = \"/tmp\"\ntarget = \"/h\"", "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\""},
	"mounts.<name>.target":       {"[mounts.h]\nsource = \"/tmp\"\ntarget = \"/h\"", "[mounts.h]\nsource = \"/tmp\"\ntarget = \"/g\""},
	"mounts.<name>.read_only":    {"[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\"\nread_only = true", "[mounts.h]\nsource = \"/etc\"\ntarget = \"/h\""},
	"mounts.<name>.missing":      {"[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"", "[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"\nmissing = \"create-dir\""},
	"mounts.<name>.create_mode":  {"[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"\nmissing = \"create-dir\"", "[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"\nmissing = \"create-dir\"\ncreate_mode = \"777\""},
	"mounts.<name>.file_content": {"[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"\nmissing = \"create-file\"", "[mounts.h]\nsource = \"/x\"\ntarget = \"/h\"\nmissing = \"create-file\"\nfile_content = \"y\""},
	"copies.<name>":              {``, "[copies.c]\nsource = \"/etc\"\ntarget = \"/c\""},
	"copies.<name>.enabled":      {"[copies.c]\nsource = \"/etc\"\ntarget = \"/c\"\nenabled = false", "[copies.c]\nsource = \"/etc\"\ntarget = \"/c\""},
	"copies.<name>.source":       {"[copies.c]\nsource = \"/tmp\"\ntarget = \"/c\"", "[copies.c]\nsource = \"/etc\"\ntarget = \"/c\""},
	"copies.<name>.exclude":      {"[copies.c]\nsource = \"/etc\"\ntarget = \"/c\"\nexclude = [\"shadow\"]", "[copies.c]\nsource = \"/etc\"\ntarget = \"/c\""},
	"daemons.<name>.harden":      {"[daemons.d]\ncommand = [\"x\"]", "[daemons.d]\ncommand = [\"x\"]\nharden = false"},
	"daemons.<name>.user":        {"[daemons.d]\ncommand = [\"x\"]", "[daemons.d]\ncommand = [\"x\"]\nuser = \"root\""},
	"daemons.<name>.env":         {"[daemons.d]\ncommand = [\"x\"]", "[daemons.d]\ncommand = [\"x\"]\nenv = { T = \"${HOST_VAR}\" }"},
	"services.<name>.env":        {"[services.s]\nimage = \"x\"", "[services.s]\nimage = \"x\"\nenv = { T = \"${HOST_VAR}\" }"},
	"services.<name>.user":       {"[services.s]\nimage = \"x\"", "[services.s]\nimage = \"x\"\nuser = \"0\""},
	"services.<name>.env_file":   {"[services.s]\nimage = \"x\"", "[services.s]\nimage = \"x\"\nenv_file = [\"other.env\"]"},
	"services.<name>.volumes":    {"[services.s]\nimage = \"x\"", "[services.s]\nimage = \"x\"\nvolumes = [\"/etc:/h\"]"},
	"services.<name>.cap_add":    {"[services.s]\nimage = \"x\"", "[services.s]\nimage = \"x\"\ncap_add = [\"SYS_ADMIN\"]"},
	"services.<name>.cap_drop":   {"[services.s]\nimage = \"x\"\ncap_drop = [\"CHOWN\"]", "[services.s]\nimage = \"x\""},
}

func TestEveryKeyHasAWideningRule(t *testing.T) {
	dir := t.TempDir()
	l := manifest.Loader{
		Builtin:  presets.FS,
		Getenv:   func(k string) (string, bool) { return "host-value", k == "HOST_VAR" },
		ReadFile: func(p string) ([]byte, error) { return []byte("T=1\n"), nil },
	}
	load := func(key, extra string) *manifest.Resolved {
		t.Helper()
		base := "[sandbox]\nimage = \"x\"\n"
		if strings.Contains(extra, "image = \"$") {
			base = ""
		} else if strings.HasPrefix(extra, "[sandbox]\n") {
			base = "[sandbox]\nimage = \"x\"\n" + extra[9:] + "\n"
			extra = ""
		}
		r, err := l.LoadBytes("sandbox.toml", dir, []byte(extra+"\n"+base))
		if err != nil {
			t.Fatalf("%s: %v\n%s", key, err, extra+"\n"+base)
		}
		return r
	}
	for _, f := range manifest.Fields {
		switch {
		case f.Widens == "":
			t.Errorf("%s has no widening rule (manifest.Field.Widens)", f.Key)
		case f.Widens == "never":
		case !slices.Contains(Areas, f.Widens):
			t.Errorf("%s: unknown widening area %q", f.Key, f.Widens)
		default:
			c, ok := widenCases[f.Key]
			if !ok {
				t.Errorf("%s widens %s but has no case in widenCases", f.Key, f.Widens)
				continue
			}
			ws := Widens(load(f.Key, c.old), load(f.Key, c.new))
			if !slices.ContainsFunc(ws, func(w Widening) bool { return w.Area == f.Widens }) {
				t.Errorf("%s: the change is not reported in %s: %+v", f.Key, f.Widens, ws)
			}
			// Back the other way, narrowing or the same, nothing of that area
			// is new unless the case widens both ways.
			if ws := Widens(load(f.Key, c.new), load(f.Key, c.new)); len(ws) != 0 {
				t.Errorf("%s: no change reported as %+v", f.Key, ws)
			}
		}
	}
	for k := range widenCases {
		if !slices.ContainsFunc(manifest.Fields, func(f manifest.Field) bool { return f.Key == k }) {
			t.Errorf("widenCases has %s, which is no key", k)
		}
	}
}
