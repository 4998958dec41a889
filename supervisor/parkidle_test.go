package supervisor

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestParkedIdleClaim: a claim with idle and no argv makes the parked sandbox
// an idle one (an API create of kind up): no main command, supervisor.ready
// once claimed, the claim's env (a literal and a delivered value) and cwd in
// the environment its execs take, and a stop ends it with 0. A claim with
// both argv and idle is refused, and the supervisor goes on waiting.
func TestParkedIdleClaim(t *testing.T) {
	t.Parallel()
	s := newSandbox(t)
	s.parked()
	s.spec.ExecEnvFile = s.path("exec-env.json")
	s.spec.Main.Env = []EnvEntry{literal("FROM_SPEC", "spec")}
	s.daemon("d", sh("exec sleep 100"))
	s.start()
	s.waitParked()
	if err := s.claim(Claim{Argv: []string{"true"}, Idle: true}, nil); err == nil || !strings.Contains(err.Error(), "idle") {
		t.Fatalf("a claim with argv and idle: %v, want a refusal naming idle", err)
	}
	err := s.claim(Claim{Idle: true,
		Env: []EnvEntry{literal("LIT", "lit"), {Name: "SEC", Secret: "run.env.SEC"}}}, map[string]string{"run.env.SEC": mainSecret})
	if err != nil {
		t.Fatal(err)
	}
	s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady })
	raw, err := os.ReadFile(s.spec.ExecEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("exec env file: %v\n%s", err, raw)
	}
	for _, want := range []string{"FROM_SPEC=spec", "LIT=lit", "SEC=" + mainSecret} {
		if !slices.Contains(env, want) {
			t.Errorf("the exec environment lacks %s: %s", want, raw)
		}
	}
	if pid := s.waitEvent("supervisor.ready", func(e StatusEvent) bool { return e.Kind == KindSupervisorReady }).PID; pid != 0 {
		t.Errorf("an idle claim started a main command (pid %d)", pid)
	}
	s.signal(syscall.SIGTERM)
	if r := s.wait(); r.code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
}
