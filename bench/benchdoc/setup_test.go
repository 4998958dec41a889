package benchdoc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestProjectDirsAndConfig(t *testing.T) {
	p, err := NewProject("benchdoc-test-", map[string]string{"sandbox.toml": "[sandbox]\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(p.Home)
	dir, err := p.AddDir("warm-project", map[string]string{"sandbox.toml": "a", "Makefile": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(p.Home, "warm-project") {
		t.Errorf("AddDir: %s", dir)
	}
	for name, want := range map[string]string{"sandbox.toml": "a", "Makefile": "b"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}
	if err := p.Configure("[runtime]\n"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(p.Home, "config", "airlock", "config.toml"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("config.toml: %v, %v; want mode 0600", st, err)
	}
	if err := Write("", "Title", "intro", []Row{{Measure: "m", Result: "r"}}, ""); err != nil {
		t.Errorf("Write to no doc: %v", err)
	}
}

// TestAlive runs Alive's commands with a stand-in for airlock that logs its
// arguments and lists as many sandboxes as there are dirs.
func TestAlive(t *testing.T) {
	p, err := NewProject("benchdoc-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(p.Home)
	log := filepath.Join(p.Home, "log")
	fake := filepath.Join(p.Home, "airlock")
	script := "#!/bin/sh\necho \"$PWD $*\" >>" + log + "\n" +
		"if [ \"$1\" = ps ]; then printf 'ID\\n1\\n2\\n3\\n'; fi\n" +
		"if [ \"$1 $2\" = \"-q down\" ] && [ \"${PWD##*/}\" = p1 ]; then echo refused; exit 3; fi\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := p.Alive(fake, "[sandbox]\n", 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := a.Up(); len(errs) != 0 {
		t.Errorf("Up: %v", errs)
	}
	ps, err := a.PS()
	if err != nil || len(ps) != 10 {
		t.Errorf("PS: %d samples, %v", len(ps), err)
	}
	_, errs := a.Down()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), a.Dirs[1]+": down: ") || !strings.Contains(errs[0].Error(), "refused") {
		t.Errorf("Down: %v, want one error naming %s", errs, a.Dirs[1])
	}
	b, _ := os.ReadFile(log)
	for _, d := range a.Dirs {
		for _, want := range []string{d + " -q up -d", d + " -q down"} {
			if !strings.Contains(string(b), want+"\n") {
				t.Errorf("no %q in the log:\n%s", want, b)
			}
		}
	}
}

func TestExitCode(t *testing.T) {
	if c := ExitCode(nil); c != 0 {
		t.Errorf("nil: %d", c)
	}
	if c := ExitCode(exec.Command("sh", "-c", "exit 3").Run()); c != 3 {
		t.Errorf("exit 3: %d", c)
	}
	if c := ExitCode(errors.New("not started")); c != -1 {
		t.Errorf("not an exit: %d", c)
	}
}
