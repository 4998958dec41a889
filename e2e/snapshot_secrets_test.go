package e2e

import (
	"strings"
	"testing"
)

// snapSecretsManifest substitutes a value from the host's environment.
const snapSecretsManifest = `
[sandbox]
image = "{{image}}"
network = "none"

[env]
TOKEN = "${SNAP_E2E_TOKEN}"
`

// TestCreateFromSnapshotSecrets: `airlock create --from-snapshot NAME` of a
// snapshot whose manifest substitutes ${SNAP_E2E_TOKEN} resolves it again as
// `up` does (from the environment here), from the manifest file the snapshot
// recorded, also run outside the project; without it, the create fails naming
// the variable and makes nothing. The value is in no output.
func TestCreateFromSnapshotSecrets(t *testing.T) {
	limit(t)
	e := newEnv(t, snapSecretsManifest)
	const token = "tok-e2e-5f1d8a"
	env := []string{"SNAP_E2E_TOKEN=" + token}
	r := e.RunEnv(env, "up", "-d")
	if r.Code != 0 {
		t.Fatalf("up -d: %s", r)
	}
	id := strings.TrimSpace(r.Stdout)
	name := "e2e-sec-" + strings.ToLower(strings.ReplaceAll(id[:8], "_", "-"))
	var made []string
	t.Cleanup(func() {
		for _, sb := range append([]string{id}, made...) {
			e.Run("rm", "-f", sb)
		}
		e.Run("snapshots", "rm", name)
	})
	e.MustRun("snapshot", id, name)

	// Outside the project, with the variable set: the recorded manifest's
	// value is resolved again and reaches the new sandbox.
	r = e.RunIn(t.TempDir(), env, "create", "--from-snapshot", name)
	if r.Code != 0 {
		t.Fatalf("create --from-snapshot with SNAP_E2E_TOKEN set: %s", r)
	}
	from := strings.TrimSpace(r.Stdout)
	made = append(made, from)
	if strings.Contains(r.Stdout+r.Stderr, token) {
		t.Errorf("create printed the secret value: %s", r)
	}
	if got := strings.TrimSpace(e.MustRun("exec", from, "--", "sh", "-c", "echo \"$TOKEN\"").Stdout); got != token {
		t.Errorf("TOKEN in the sandbox made from the snapshot: %q, want the value", got)
	}

	// Without it: an error naming the variable, and no sandbox.
	before := len(e.PS())
	r = e.Run("create", "--from-snapshot", name)
	if r.Code == 0 || !strings.Contains(r.Stderr, "SNAP_E2E_TOKEN") || !strings.Contains(r.Stderr, name) {
		t.Errorf("create --from-snapshot without SNAP_E2E_TOKEN: want an error naming it and the snapshot, got %s", r)
	}
	t.Logf("create without the value: %s", strings.TrimSpace(r.Stderr))
	if after := len(e.PS()); after != before {
		t.Errorf("a create that failed for a missing value made a sandbox (%d sandboxes, %d before)", after, before)
	}
}
