package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	daemonSecret = "s3cr3t-daemon-value"
	mainSecret   = "s3cr3t-main-value"
)

// TestSecrets: each process gets only the secrets its own env references;
// the file is deleted; no value reaches the status stream, logs or stderr.
func TestSecrets(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.secrets = map[string]string{"env.DB": daemonSecret, "env.TOKEN": mainSecret, "env.UNUSED": "unused-value"}
	d := s.daemon("d", sh(fmt.Sprintf(`echo "DB=$DB TOKEN=$TOKEN" > %q; exec sleep 100`, s.path("daemon.out"))))
	d.Env = []EnvEntry{{Name: "DB", Secret: "env.DB"}}
	d.Ready = &Ready{Cmd: []string{"test", "-s", s.path("daemon.out")}, Timeout: "20s"}
	s.spec.Main.Argv = sh(fmt.Sprintf(`echo "DB=$DB TOKEN=$TOKEN" > %q`, s.path("main.out")))
	s.spec.Main.Env = []EnvEntry{{Name: "TOKEN", Secret: "env.TOKEN"}}
	r := s.run()
	if r.code != 0 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := strings.TrimSpace(s.read("daemon.out")); got != "DB="+daemonSecret+" TOKEN=" {
		t.Errorf("daemon saw %q", got)
	}
	if got := strings.TrimSpace(s.read("main.out")); got != "DB= TOKEN="+mainSecret {
		t.Errorf("main saw %q", got)
	}
	if _, err := os.Stat(s.path("secrets.json")); !os.IsNotExist(err) {
		t.Errorf("the secrets file is still there: %v", err)
	}
	assertNoSecrets(t, s, r)
}

// TestSecretMissing: a referenced key that the secrets file lacks fails the
// start with 125, naming the key and not printing any value.
func TestSecretMissing(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.secrets = map[string]string{"env.OTHER": daemonSecret}
	d := s.daemon("d", sh("exec sleep 100"))
	d.Env = []EnvEntry{{Name: "API_KEY", Secret: "env.API_KEY"}}
	r := s.run()
	if r.code != 125 || !strings.Contains(r.stderr, `airlock: cannot set API_KEY of daemon d: secret "env.API_KEY" is not in the secrets file`) {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	assertNoSecrets(t, s, r)

	s2 := newSandbox(t) // no secrets file at all
	s2.spec.Main.Env = []EnvEntry{{Name: "TOKEN", Secret: "env.TOKEN"}}
	r = s2.run()
	if r.code != 125 || !strings.Contains(r.stderr, `secret "env.TOKEN" is not in the secrets file`) {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
}

func assertNoSecrets(t *testing.T, s *sandbox, r result) {
	t.Helper()
	check := func(where, text string) {
		for _, v := range []string{daemonSecret, mainSecret, "unused-value"} {
			if strings.Contains(text, v) {
				t.Errorf("%s holds a secret value", where)
			}
		}
	}
	check("stderr", r.stderr)
	check("stdout", r.stdout)
	check("the status stream", s.read("status.jsonl"))
	check("the spec", s.read("spec.json"))
	logs, _ := filepath.Glob(filepath.Join(s.spec.LogDir, "*", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		check(l, string(b))
	}
}

func TestResolveEnv(t *testing.T) {
	sec := &Secrets{values: map[string]string{"k": "v"}}
	env, err := resolveEnv("x", []string{"A=1", "B=2", "bogus", "A=3"}, []EnvEntry{literal("B", "b"), {Name: "S", Secret: "k"}, literal("C", ""), literal("B", "last")}, sec)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(env, " "); got != "A=3 B=last S=v C=" {
		t.Errorf("env %q", got)
	}
	if _, err := resolveEnv("daemon d", nil, []EnvEntry{{Name: "S", Secret: "nope"}}, sec); err == nil || !strings.Contains(err.Error(), `secret "nope"`) {
		t.Errorf("err %v", err)
	}
	if got := fmt.Sprint(sec); strings.Contains(got, "v)") || got != "secrets(1 keys)" {
		t.Errorf("Secrets prints %q", got)
	}
}

func TestLoadSecrets(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(`{"a": "hidden-1", "b": 7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadSecrets(p)
	if err == nil || strings.Contains(err.Error(), "hidden-1") {
		t.Errorf("err %v", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("not deleted after a bad decode")
	}
	if err := os.WriteFile(p, []byte(`{"a": "hidden-1"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadSecrets(p); err == nil || strings.Contains(err.Error(), "hidden") {
		t.Errorf("err %v", err)
	}
	if _, _, err := LoadSecrets(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("no error for a missing file")
	}
}

// TestSecretsDeletedOnBadSpec: the secrets file is deleted even when the
// start fails before anything runs.
func TestSecretsDeletedOnBadSpec(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.secrets = map[string]string{"env.TOKEN": mainSecret}
	s.spec.Version = 2
	r := s.run()
	if r.code != 125 {
		t.Fatalf("code %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(s.path("secrets.json")); !os.IsNotExist(err) {
		t.Errorf("the secrets file is still there: %v", err)
	}
}
