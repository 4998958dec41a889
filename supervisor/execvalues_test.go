package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExecEnvStashedOnce: an exec's values go from stdin to a new 0600 file and
// back once; the file is gone after they were taken; a file that exists (or a
// link planted at the path) is refused; errors never show a value.
func TestExecEnvStashedOnce(t *testing.T) {
	dir := t.TempDir()
	const secret = "stash-s3cret-value"
	p := filepath.Join(dir, "exec-1.json")
	if err := StashExecEnv(p, strings.NewReader(`["A=`+secret+`","B=x=y","C="]`)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
		t.Fatalf("stashed file: %v, %v", st, err)
	}
	got, err := takeExecEnv(p)
	if err != nil || !slices.Equal(got, []string{"A=" + secret, "B=x=y", "C="}) {
		t.Fatalf("takeExecEnv = %q, %v", got, err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("the values file is still there after it was taken: %v", err)
	}
	if _, err := takeExecEnv(p); err == nil {
		t.Error("the values were taken twice")
	}

	// No overwrite, no link followed.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "exec-2.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{target, link} {
		if err := StashExecEnv(path, strings.NewReader(`["A=`+secret+`"]`)); err == nil {
			t.Errorf("StashExecEnv over %s: want an error", path)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the target was written: %q", b)
	}
	if _, err := takeExecEnv(link); err == nil {
		t.Error("takeExecEnv followed a link")
	}

	// Bad input: refused, without quoting it.
	for _, in := range []string{`{"A":"` + secret + `"}`, `["` + secret + `"]`, `["=` + secret + `"]`, `["A=` + secret, `["A=\u0000` + secret + `"]`} {
		err := StashExecEnv(filepath.Join(dir, "exec-bad.json"), strings.NewReader(in))
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("StashExecEnv(%s) = %v", in, err)
		}
		if _, serr := os.Lstat(filepath.Join(dir, "exec-bad.json")); serr == nil {
			t.Errorf("StashExecEnv(%s) left a file", in)
		}
	}
}
