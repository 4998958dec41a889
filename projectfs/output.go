package projectfs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/manifest"
	"github.com/airlock-dev/airlock/paths"
	"github.com/airlock-dev/airlock/userconfig"
)

// Output is one run's copy back of its `--output` paths into the project dir
// on the host (design.md §9: it only writes, never deletes, and is bounded):
//
//   - it never removes a host file or folder: what the sandbox removed stays,
//     a file in the sandbox where the host has a folder (or a folder where the
//     host has a file, or anything where the host has a symbolic link or
//     another kind of file) is skipped with a warning naming it, with all that
//     lies below it;
//   - it never writes the project dir itself, a manifest layer (sandbox.toml,
//     sandbox.local.toml, a preset file), .airlockignore, a .git folder (its
//     hooks and config run on the host) or a path .airlockignore leaves out of
//     the sandbox;
//   - it writes at most Max bytes in all, each file counted by its size (a
//     sparse file by its whole size) rounded up to a 4 KiB block, each folder
//     as one block, and never a file the host's file system has no room for.
//
// Existing host files are overwritten (atomically): that is what output is for.
type Output struct {
	ProjectDir string
	// Max is how many bytes the copies may write in all; MaxFrom says where
	// it came from ("--output-max", "artifacts.output_max").
	Max     int64
	MaxFrom string

	protect []string // project-relative slash paths never written
	ignore  *dockerignore
	written int64
}

// outputBlock is what a folder, and at least what a file, counts against Max.
const outputBlock = 4096

// freeSpace returns the bytes free for the user and the size of the file
// system holding dir (a variable for tests).
var freeSpace = func(dir string) (avail, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}

// NewOutput prepares the copy back of a run's --output paths into r's project
// dir, with at most max bytes written (from names where max came from). It
// reads the project's .airlockignore from the host.
func NewOutput(r *manifest.Resolved, max int64, from string) (*Output, error) {
	ig, err := readIgnoreFile(r.ProjectDir, IgnoreFile)
	if err != nil {
		return nil, err
	}
	o := &Output{ProjectDir: r.ProjectDir, Max: max, MaxFrom: from, ignore: ig}
	files := []string{
		filepath.Join(r.ProjectDir, manifest.FileName), filepath.Join(r.ProjectDir, manifest.LocalFileName),
		filepath.Join(r.ProjectDir, IgnoreFile),
	}
	if r.File != "" {
		files = append(files, r.File, filepath.Join(filepath.Dir(r.File), manifest.LocalFileName))
	}
	for _, l := range r.Layers {
		if !l.Builtin {
			// Layer names are shown relative to the working directory.
			if abs, err := filepath.Abs(l.Name); err == nil {
				files = append(files, abs)
			}
		}
	}
	for _, f := range files {
		if rel, err := filepath.Rel(r.ProjectDir, f); err == nil && rel != "." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != ".." {
			if rel = filepath.ToSlash(rel); !slices.Contains(o.protect, rel) {
				o.protect = append(o.protect, rel)
			}
		}
	}
	return o, nil
}

// Check refuses an --output path airlock would never write: one outside the
// project dir, the project dir itself, or one never written (a manifest layer,
// .airlockignore, a .git folder, a path .airlockignore leaves out). The CLI
// calls it before anything starts (a usage error, exit 2).
func (o *Output) Check(rel string) error {
	clean, err := cleanOutput(rel)
	if err != nil {
		return err
	}
	if clean == "." {
		return fmt.Errorf("cannot copy --output %q back: it is the project dir itself, which airlock never replaces; name a folder or file inside it", rel)
	}
	if p, why := o.guarded(clean); why != "" {
		return fmt.Errorf("cannot copy --output %q back: %s is %s, which airlock never writes", rel, p, why)
	}
	return nil
}

// OutputPath is the path in the sandbox of rel, a --output path relative to the
// project dir (a config error when it leaves the project dir).
func OutputPath(projectDir, rel string) (string, error) {
	clean, err := cleanOutput(rel)
	if err != nil {
		return "", configErr("%v", err)
	}
	return path.Join(filepath.ToSlash(projectDir), clean), nil
}

// cleanOutput is rel, an --output path, as a clean slash path relative to the
// project dir ("." for the project dir itself).
func cleanOutput(rel string) (string, error) {
	clean := path.Clean(filepath.ToSlash(rel))
	if rel == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("invalid --output %q: use a path inside the project dir", rel)
	}
	return clean, nil
}

// guarded says why airlock never writes rel (a clean project-relative slash
// path), naming the part of it that decides; "" when it may.
func (o *Output) guarded(rel string) (string, string) {
	segs := strings.Split(rel, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		// Without case: on macOS .GIT is .git and Sandbox.toml is sandbox.toml.
		switch {
		case strings.EqualFold(segs[i], ".git"):
			return p, "a .git folder (its hooks and config run on the host)"
		case slices.ContainsFunc(o.protect, func(f string) bool { return strings.EqualFold(f, p) }):
			return p, "a manifest file"
		case o.ignore.excluded(p):
			return p, "left out of the sandbox by " + IgnoreFile
		}
	}
	return "", ""
}

// Extract writes a tar archive of rel (an --output path), its entries named
// from rel's base name as the Engine's archive API gives them, into the
// project dir. Only folders and regular files are written; everything the
// rules of Output keep from the host is skipped with a warning. Past Max, or
// when the host's file system lacks room, it stops with an error (exit 125)
// naming the file: what came before it stays written.
func (o *Output) Extract(r io.Reader, rel string) (warnings []string, err error) {
	clean, err := cleanOutput(rel)
	if err != nil {
		return nil, configErr("%v", err)
	}
	if clean == "." {
		return nil, configErr("cannot copy --output %q back: it is the project dir itself", rel)
	}
	base := path.Base(clean)
	var skipped []string // nothing at or below these is written
	broken := func(err error) error { return failed("cannot copy %s out of the sandbox: %v", rel, err) }
	err = eachEntry(r, broken, func(h *tar.Header, body io.Reader) error {
		name := path.Clean(h.Name)
		if name != base && !strings.HasPrefix(name, base+"/") {
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %q (outside the path)", rel, h.Name))
			return nil
		}
		prel := path.Join(clean, strings.TrimPrefix(strings.TrimPrefix(name, base), "/"))
		if slices.ContainsFunc(skipped, func(s string) bool { return prel == s || strings.HasPrefix(prel, s+"/") }) {
			return nil
		}
		skip := func(p, why string) {
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %s: %s", rel, p, why))
			skipped = append(skipped, p)
		}
		if p, why := o.guarded(prel); why != "" {
			skip(p, why+", which airlock never writes")
			return nil
		}
		if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
			warnings = append(warnings, fmt.Sprintf("--output %s: skipped %s (not a regular file or folder)", rel, prel))
			return nil
		}
		if p, why := o.hostConflict(prel, h.Typeflag == tar.TypeDir); why != "" {
			skip(p, why)
			return nil
		}
		dst := filepath.Join(o.ProjectDir, filepath.FromSlash(prel))
		if h.Typeflag == tar.TypeDir {
			if err := o.charge(prel, 0); err != nil {
				return err
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return failed("cannot write %s: %v", dst, err)
			}
			return nil
		}
		if err := o.charge(prel, h.Size); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return failed("cannot write %s: %v", dst, err)
		}
		if err := o.checkRoom(prel, filepath.Dir(dst), h.Size); err != nil {
			return err
		}
		if err := writeRegular(dst, body, fs.FileMode(h.Mode)&0o777); err != nil {
			return failed("cannot write %s: %v", dst, err)
		}
		return nil
	})
	return warnings, err
}

// hostConflict looks at what the host has at rel and its parents: a parent
// that is not a real folder (a symbolic link, a file), or at rel itself a
// symbolic link, a folder where a file goes, a file where a folder goes or
// another kind of file. It returns that path and why it is kept, or "".
func (o *Output) hostConflict(rel string, dir bool) (string, string) {
	segs := strings.Split(rel, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		st, err := os.Lstat(filepath.Join(o.ProjectDir, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			return "", ""
		}
		if err != nil {
			return p, err.Error()
		}
		last := i == len(segs)-1
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			return p, "a symbolic link on the host, never followed or replaced"
		case st.IsDir() && (!last || dir):
			continue
		case st.IsDir():
			return p, "a folder on the host, which a file of the sandbox never replaces"
		case !last || dir:
			return p, "a file on the host, which a folder of the sandbox never replaces"
		case !st.Mode().IsRegular():
			return p, "not a regular file on the host, never replaced"
		}
	}
	return "", ""
}

// charge counts an entry of size bytes (a folder: 0) against Max.
func (o *Output) charge(rel string, size int64) error {
	cost := (max(size, 0) + outputBlock - 1) / outputBlock * outputBlock
	if cost == 0 {
		cost = outputBlock
	}
	if o.written+cost > o.Max {
		what := "it"
		if size > 0 {
			what = "it is " + userconfig.FormatSize(size) + " and"
		}
		return failed("cannot copy %s back: %s would take the --output copies past their limit of %s (%s); it and what follows were not written",
			rel, what, userconfig.FormatSize(o.Max), o.MaxFrom)
	}
	o.written += cost
	return nil
}

// checkRoom refuses a file of size bytes that would fill the file system of
// dir: it must leave 1% of it (at most 64 MiB) free.
func (o *Output) checkRoom(rel, dir string, size int64) error {
	avail, total, err := freeSpace(dir)
	if err != nil {
		return nil // the write says what is wrong, if anything
	}
	reserve := min(total/100, 64<<20)
	if uint64(size)+reserve > avail {
		return failed("cannot copy %s back: it is %s and the host's file system at %s has %s free (airlock leaves %s of it free); make room or copy less",
			rel, userconfig.FormatSize(size), dir, userconfig.FormatSize(int64(min(avail, userconfig.MaxSize))), userconfig.FormatSize(int64(reserve)))
	}
	return nil
}

// writeRegular writes dst from r: a new file, or an existing regular file
// replaced atomically (never a folder: the rename fails).
func writeRegular(dst string, r io.Reader, mode fs.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	f, err := paths.CreateAtomic(dst, mode)
	if err != nil {
		return err
	}
	defer f.Cleanup()
	// An --output tree may be thousands of files, easily copied again: each
	// replaces its file atomically, without the cost of two fsyncs a file.
	f.NoSync = true
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return f.Commit()
}
