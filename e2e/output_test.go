package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// outputManifest copies the project in, so that `run --output` copies results
// back (what a remote Engine does too).
const outputManifest = `
[sandbox]
image = "{{image}}"
network = "none"
project = "copy"
`

// hostTree is every file and folder below dir with its content ("" for a
// folder), to compare a project before and after a run.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		default:
			out[rel] = "(" + d.Type().String() + ")"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test unless the project holds exactly what it held.
func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if got, ok := after[k]; !ok {
			t.Errorf("%s: %s was removed from the host", what, k)
		} else if got != v {
			t.Errorf("%s: %s changed on the host: %q, was %q", what, k, got, v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared on the host", what, k)
		}
	}
}

// TestOutputRefusesProjectRoot: `--output .` (however it is spelled) and an
// --output path that is a manifest layer, .airlockignore or .git are refused
// with exit 2 before anything starts, so the attack of issue 21 (the sandbox
// replacing its copy of the project by a file, copied back over the project
// dir) changes nothing on the host.
func TestOutputRefusesProjectRoot(t *testing.T) {
	limit(t)
	e := newEnv(t, "")
	e.WriteManifest("presets = [\"./team/base.toml\"]\n" + outputManifest)
	e.WriteFile("team/base.toml", "[env]\nFROM_PRESET = \"1\"\n")
	e.WriteFile(".env", "TOKEN=host-only\n")
	e.WriteFile(".git/HEAD", "ref: refs/heads/main\n")
	e.WriteFile("sandbox.local.toml", "[env]\nLOCAL = \"1\"\n")
	e.WriteFile(".airlockignore", ".env\nsecrets/\n")
	e.WriteFile("secrets/key", "k\n")
	before := hostTree(t, e.Project)

	attack := `P=$PWD; cd /; rm -rf "$P"; echo gone > "$P"; echo main-ran`
	for _, out := range []string{".", "./", "out/..", "sandbox.toml", "./sandbox.local.toml", ".airlockignore",
		"team/base.toml", ".git", ".git/hooks", ".env", "secrets", "secrets/key"} {
		r := e.Run("run", "--output", out, "--", "sh", "-c", attack)
		if r.Code != 2 || strings.Contains(r.Stdout, "main-ran") {
			t.Errorf("--output %s: want exit 2 before the command runs, got %s", out, r)
		}
		contains(t, "stderr of --output "+out, r.Stderr, "--output")
		if len(e.Containers()) != 0 {
			t.Errorf("--output %s: a container was made", out)
		}
	}
	sameTree(t, "after the refused runs", before, hostTree(t, e.Project))
	e.assertClean()
}

// TestOutputNeverRemoves: what the sandbox removed or turned into something
// else is not removed on the host: a file in the sandbox where the host has a
// folder (at any depth, the copied path itself included) and a folder where
// the host has a file are skipped with a warning naming them; the rest is
// written, and the run exits with the command's code.
func TestOutputNeverRemoves(t *testing.T) {
	limit(t)
	e := newEnv(t, outputManifest)
	e.WriteFile(".airlockignore", "out/keep/notes.txt\n")
	e.WriteFile("out/keep/notes.txt", "host notes\n")
	e.WriteFile("out/deep/a/b/c.txt", "host c\n")
	e.WriteFile("out/file.txt", "host file\n")
	e.WriteFile("out/old.txt", "host old\n")
	e.WriteFile("out/over.txt", "host over\n")
	e.WriteFile("plain/sub/x.txt", "host x\n")

	r := e.Run("run", "--output", "out", "--output", "plain", "--", "sh", "-c", `set -e
rm -rf out/keep && echo sandbox > out/keep
rm -rf out/deep/a && echo sandbox > out/deep/a
rm out/file.txt && mkdir out/file.txt && echo inner > out/file.txt/inner
rm out/old.txt
echo sandbox-over > out/over.txt
echo new > out/new.txt
rm -rf plain && echo sandbox > plain
exit 3`)
	if r.Code != 3 {
		t.Fatalf("want the command's exit code 3, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "out/keep", "out/deep/a", "out/file.txt", "plain")
	after := hostTree(t, e.Project)
	for rel, want := range map[string]string{
		"out/keep/notes.txt": "host notes\n",
		"out/deep/a/b/c.txt": "host c\n",
		"out/file.txt":       "host file\n",
		"out/old.txt":        "host old\n",     // removed in the sandbox: left alone
		"out/over.txt":       "sandbox-over\n", // overwritten: what output is for
		"out/new.txt":        "new\n",          // written
		"plain/sub/x.txt":    "host x\n",       // the copied path itself turned into a file
	} {
		if got, ok := after[rel]; !ok || got != want {
			t.Errorf("%s on the host = %q (present %v), want %q", rel, got, ok, want)
		}
	}
	if _, ok := after["out/file.txt/inner"]; ok {
		t.Errorf("a folder of the sandbox replaced the host's file out/file.txt")
	}
	e.assertClean()
}

// TestOutputNeverWritesIgnoredOrLayerFiles: paths .airlockignore leaves out of
// the sandbox, manifest layers and .git folders are never written by --output,
// even below a path it copies; the rest is.
func TestOutputNeverWritesIgnoredOrLayerFiles(t *testing.T) {
	limit(t)
	e := newEnv(t, "")
	e.WriteManifest("presets = [\"./out/team.toml\"]\n" + outputManifest)
	e.WriteFile("out/team.toml", "[env]\nTEAM = \"1\"\n")
	e.WriteFile(".airlockignore", "out/*.env\nout/private/\n")
	e.WriteFile("out/host.env", "host env\n")

	r := e.Run("run", "--output", "out", "--", "sh", "-c", `set -e
echo sandbox > out/host.env
echo sandbox > out/new.env
mkdir -p out/private out/vendored/.git/hooks
echo sandbox > out/private/p.txt
echo 'echo pwned' > out/vendored/.git/hooks/pre-commit
printf '[sandbox.egress]\nallow = []\n' > out/team.toml
echo report > out/report.txt`)
	if r.Code != 0 {
		t.Fatalf("run: %s", r)
	}
	contains(t, "stderr", r.Stderr, "out/host.env", "out/new.env", "out/private", "out/vendored/.git", "out/team.toml")
	after := hostTree(t, e.Project)
	for rel, want := range map[string]string{
		"out/host.env":   "host env\n",
		"out/team.toml":  "[env]\nTEAM = \"1\"\n",
		"out/report.txt": "report\n",
	} {
		if after[rel] != want {
			t.Errorf("%s on the host = %q, want %q", rel, after[rel], want)
		}
	}
	for _, rel := range []string{"out/new.env", "out/private/", "out/private/p.txt", "out/vendored/.git/", "out/vendored/.git/hooks/pre-commit"} {
		if _, ok := after[rel]; ok {
			t.Errorf("--output wrote %s on the host", rel)
		}
	}
	e.assertClean()
}

// TestOutputMax: what --output may write is bounded, counting each file by its
// size (a sparse file by its whole size): past --output-max (or
// artifacts.output_max of config.toml) the copy stops with a message naming
// the file and the limit, exit 125, and the file is not written; a larger
// --output-max lets it through.
func TestOutputMax(t *testing.T) {
	limit(t)
	e := newEnv(t, outputManifest)
	// A sparse 64 MiB file takes no room in the sandbox.
	cmd := `mkdir -p out && echo small > out/a.txt && dd if=/dev/zero of=out/sparse.bin bs=1 count=0 seek=67108864 2>/dev/null && echo main-ran`
	usage := func() int64 {
		var st syscall.Stat_t
		var n int64
		_ = filepath.WalkDir(e.Project, func(p string, d fs.DirEntry, err error) error {
			if err == nil && syscall.Lstat(p, &st) == nil {
				n += st.Blocks * 512
			}
			return nil
		})
		return n
	}
	base := usage()

	r := e.Run("run", "--output-max", "1MiB", "--output", "out", "--", "sh", "-c", cmd)
	if r.Code != 125 || !strings.Contains(r.Stdout, "main-ran") {
		t.Errorf("--output-max 1MiB: want exit 125 after the command ran, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "out/sparse.bin", "--output-max", "1.0 MiB")
	if _, err := os.Lstat(filepath.Join(e.Project, "out", "sparse.bin")); err == nil {
		t.Errorf("the file past --output-max was written")
	}
	if grew := usage() - base; grew > 1<<20 {
		t.Errorf("the project grew by %d bytes on the host", grew)
	}

	// The default of config.toml, and the flag over it.
	if err := os.MkdirAll(filepath.Join(e.Config, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "airlock", "config.toml"), []byte("[artifacts]\noutput_max = \"2MiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.Run("run", "--output", "out", "--", "sh", "-c", cmd)
	if r.Code != 125 {
		t.Errorf("artifacts.output_max 2MiB: want exit 125, got %s", r)
	}
	contains(t, "stderr", r.Stderr, "out/sparse.bin", "artifacts.output_max", "2.0 MiB")
	r = e.Run("run", "--output-max", "65MiB", "--output", "out", "--", "sh", "-c", cmd)
	if r.Code != 0 {
		t.Errorf("--output-max 65MiB over artifacts.output_max: %s", r)
	}
	if st, err := os.Stat(filepath.Join(e.Project, "out", "sparse.bin")); err != nil || st.Size() != 64<<20 {
		t.Errorf("under the limit the file is written: %v %v", st, err)
	}
	if r := e.Run("run", "--output-max", "lots", "--output", "out", "--", "true"); r.Code != 2 || !strings.Contains(r.Stderr, "--output-max") {
		t.Errorf("--output-max lots: want exit 2 naming the flag, got %s", r)
	}
	e.assertClean()
}
