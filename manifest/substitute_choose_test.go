package manifest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestChooseAgreesWithTheShell: for each form and each state of the variable
// (unset, empty, set), the choice between value and default that substitution
// makes through envsubst is the one a POSIX shell makes for the same operator.
func TestChooseAgreesWithTheShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh to compare with: %v", err)
	}
	forms := map[string]string{"${V:default}": "-", "${V:-default}": ":-"}
	states := map[string]struct {
		found bool
		val   string
	}{"unset": {false, ""}, "empty": {true, ""}, "set": {true, "x"}}
	for form, op := range forms {
		_, gotOp, _ := splitExpr(strings.TrimSuffix(strings.TrimPrefix(form, "${"), "}"))
		if gotOp != op {
			t.Errorf("%s: operator %q, want %q", form, gotOp, op)
		}
		for state, st := range states {
			useDefault, err := choose("V", op, st.found, st.val)
			if err != nil {
				t.Fatalf("%s, %s: %v", form, state, err)
			}
			script := `printf %s "${V` + op + `DEFAULT}"`
			if !st.found {
				script = "unset V; " + script
			}
			cmd := exec.Command(sh, "-c", script)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			if st.found {
				cmd.Env = append(cmd.Env, "V="+st.val)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sh: %v", err)
			}
			if shellDefault := string(out) == "DEFAULT"; useDefault != shellDefault {
				t.Errorf("%s with V %s: default used = %v, the shell's ${V%sDEFAULT} says %v", form, state, useDefault, op, shellDefault)
			}
		}
	}
	// Without a default, a variable set nowhere is an error naming it (never a value).
	if _, err := choose("TOKEN", "", false, ""); err == nil || err.Error() != "TOKEN is not set and not in the vault" {
		t.Errorf("unset without default: %v", err)
	}
	for _, val := range []string{"", "secret-value"} {
		if d, err := choose("TOKEN", "", true, val); err != nil || d {
			t.Errorf("set (%q) without default: default %v, err %v", val, d, err)
		}
	}
}
