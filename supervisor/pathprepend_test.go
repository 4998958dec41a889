package supervisor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// path_prepend (sandbox.path_prepend and the go tool's toolchain): directories
// in front of the PATH each process has in the sandbox, never the host's.

func TestPrependPath(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		dirs []string
		want string
	}{
		{"in front of the image's", []string{"A=1", "PATH=/usr/bin:/bin"}, []string{"/x/bin", "/y/bin"}, "/x/bin:/y/bin:/usr/bin:/bin"},
		{"a dir given twice", []string{"PATH=/bin"}, []string{"/x", "/y", "/x"}, "/x:/y:/bin"},
		{"no PATH: the Engine's default", []string{"A=1"}, []string{"/x"}, "/x:" + defaultPath},
		{"an empty PATH: the Engine's default", []string{"PATH="}, []string{"/x"}, "/x:" + defaultPath},
		{"nothing to prepend", []string{"PATH=/bin"}, nil, "/bin"},
	} {
		got := prependPath(slices.Clone(c.env), c.dirs)
		var paths []string
		for _, kv := range got {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				paths = append(paths, v)
			}
		}
		if len(paths) != 1 || paths[0] != c.want {
			t.Errorf("%s: PATH entries %q, want one: %q", c.name, paths, c.want)
		}
		if c.env[0] == "A=1" && got[0] != "A=1" {
			t.Errorf("%s: the other variables changed: %q", c.name, got)
		}
	}
}

func TestParseSpecPathPrepend(t *testing.T) {
	for dirs, want := range map[string]string{
		`["/opt/go/bin", "/x"]`: "",
		`["bin"]`:               `cannot use spec: path_prepend: element 0: must be an absolute path, got "bin"`,
		`["/a", "/b:/c"]`:       `cannot use spec: path_prepend: element 1: must not contain ':' (PATH's separator) or a NUL byte, got "/b:/c"`,
	} {
		_, err := ParseSpec([]byte(`{"version":1,"path_prepend":` + dirs + `,"main":{"argv":["true"]}}`))
		if got := errString(err); got != want {
			t.Errorf("%s: got %q, want %q", dirs, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPathPrependReachesEveryProcess: the main command, a daemon (whose env
// sets its own PATH: the dirs go in front of that one) and its ready cmd, which
// finds a program only in a prepended dir.
func TestPathPrependReachesEveryProcess(t *testing.T) {
	s := newSandbox(t)
	bin := s.path("bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "only-here"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"PATH=/usr/bin:/bin"}
	s.spec.PathPrepend = []string{bin, "/nonexistent"}
	d := s.daemon("d", sh(`echo "$PATH" > `+s.path("daemon.path")+`; exec sleep 30`))
	d.Env = []EnvEntry{literal("PATH", "/sbin:/usr/bin:/bin")}
	// Ready once it wrote its PATH (the main command may end at once, and
	// the daemon with it), by a program found only in a prepended dir.
	d.Ready = &Ready{Cmd: []string{"sh", "-c", "only-here && test -s " + s.path("daemon.path")}, Timeout: "10s"}
	s.spec.Main.Argv = sh(`echo "$PATH"; command -v only-here`)
	r := s.run()
	if want := bin + ":/nonexistent:/usr/bin:/bin\n" + bin + "/only-here\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, stdout %q, want 0 and %q; stderr:\n%s", r.code, r.stdout, want, r.stderr)
	}
	if got, want := s.read("daemon.path"), bin+":/nonexistent:/sbin:/usr/bin:/bin\n"; got != want {
		t.Errorf("the daemon's PATH is %q, want %q", got, want)
	}
}
