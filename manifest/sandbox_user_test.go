package manifest_test

import (
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// sandbox.user is checked for its form as daemons.<name>.user is, by validate
// as by run (issue 24: validate accepted "${UID}", which run then refused).
// It is not substituted (design.md §5 lists where ${VAR} is), so a ${…} in a user
// is refused, saying so.

// "host" (manifest.HostUser), the user running the CLI, is accepted by
// validation as it is: the CLI resolves it to a uid:gid before it sends the
// manifest (cli.TestHostUserResolved); the kubernetes backend refuses it
// (TestCheckBackend).
func TestSandboxUser(t *testing.T) {
	for _, u := range []string{"postgres", "1000", "1000:1000", "app:staff", "host$", manifest.HostUser} {
		r := load(t, map[string]string{"sandbox.toml": img + "user = \"" + u + "\"\n"})
		if r.Sandbox.User != u {
			t.Errorf("user %q decoded as %q", u, r.Sandbox.User)
		}
	}
	for _, u := range []string{"a:b:c", ":50", "a b", "4294967295"} {
		got := loadErr(t, map[string]string{"sandbox.toml": img + "user = \"" + u + "\"\n"})
		want := `sandbox.toml:3: sandbox.user: invalid user "` + u + `" (use a name, uid, name:group or uid:gid, e.g. "postgres" or "1000:1000")`
		if got != want {
			t.Errorf("user %q:\n\tgot  %s\n\twant %s", u, got, want)
		}
	}
}

func TestUserIsNotSubstituted(t *testing.T) {
	const why = ` is not substituted: ${VAR} applies only in env values, sandbox.image and mount and copy sources (write a name, uid or uid:gid, e.g. "1000:1000")`
	got := loadErr(t, map[string]string{"sandbox.toml": img + "user = \"${UID}\"\n"})
	if want := `sandbox.toml:3: sandbox.user: "${UID}"` + why; got != want {
		t.Errorf("sandbox.user:\n\tgot  %s\n\twant %s", got, want)
	}
	got = loadErr(t, map[string]string{"sandbox.toml": img + "[daemons.db]\ncommand = [\"db\"]\nuser = \"${UID}:${GID}\"\n"})
	if want := `sandbox.toml:5: daemons.db.user: "${UID}:${GID}"` + why; got != want {
		t.Errorf("daemons.db.user:\n\tgot  %s\n\twant %s", got, want)
	}
}
