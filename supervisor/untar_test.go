package supervisor

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// projectTar writes src as package projectfs writes a project copy for a
// backend (Project.WriteArchive, with writeTreeTo unexported there): the target's
// parents as folders, then every entry of src under target, owned by uid:gid.
func projectTar(t *testing.T, src, target string, uid, gid int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	parts := strings.Split(target, "/")
	for i := 1; i < len(parts); i++ {
		if err := tw.WriteHeader(&tar.Header{Name: strings.Join(parts[:i], "/") + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = target
		if rel != "." {
			hdr.Name = path.Join(target, rel)
		}
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// entry is one file of a tree, as the tests compare them.
type entry struct {
	Kind  string // dir, file, link
	Mode  fs.FileMode
	MTime time.Time
	Data  string // a file's content, a link's target
	UID   int
	GID   int
}

// readTree lists root's entries by slash path ("." for root itself).
func readTree(t *testing.T, root string) map[string]entry {
	t.Helper()
	tree := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		e := entry{Mode: info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), MTime: info.ModTime(), UID: int(st.Uid), GID: int(st.Gid)}
		switch {
		case info.IsDir():
			e.Kind = "dir"
		case info.Mode().IsRegular():
			e.Kind = "file"
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Data = string(b)
		case info.Mode()&fs.ModeSymlink != 0:
			e.Kind, e.Mode = "link", 0
			if e.Data, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			e.Kind = info.Mode().Type().String()
		}
		rel, _ := filepath.Rel(root, p)
		tree[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// sampleTree makes a project with folders of several modes (one read-only,
// with a file in it), files of several modes, links (relative, absolute,
// dangling) and distinct times.
func sampleTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	write := func(rel, data string, mode fs.FileMode) {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README", "hello\n", 0o644)
	write("bin/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	write("secret/key", "private", 0o600)
	write("ro/locked.txt", "read only", 0o444)
	write("deep/a/b/c/d.txt", strings.Repeat("x", 100_000), 0o640)
	write("empty", "", 0o644)
	if err := os.MkdirAll(filepath.Join(src, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link-rel": "bin/run.sh", "deep/up": "../README", "abs": "/etc/passwd", "dangling": "nowhere/at/all"} {
		if err := os.Symlink(target, filepath.Join(src, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "secret"), 0o750); err != nil {
		t.Fatal(err)
	}
	// Times last, the deepest first, so that no later change moves them.
	var all []string
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		all = append(all, p)
		return err
	})
	slices.Reverse(all)
	base := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for i, p := range all {
		mt := base.Add(time.Duration(i) * time.Hour)
		ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(src, "ro"), 0o755) })
	return src
}

// compareTrees reports every difference of got from want; with checkOwner,
// every entry of got must be owned by uid:gid.
func compareTrees(t *testing.T, want, got map[string]entry, uid, gid int, checkOwner bool) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		if checkOwner {
			w.UID, w.GID = uid, gid
		} else {
			w.UID, w.GID = g.UID, g.GID
		}
		if !g.MTime.Equal(w.MTime) {
			t.Errorf("%s: mtime %v, want %v", name, g.MTime, w.MTime)
		}
		g.MTime, w.MTime = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("%s: got %+v, want %+v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: extracted, not in the source", name)
		}
	}
}

// TestUntarProjectCopyRoundTrip: a project archived as the sandbox package
// archives it extracts to the same tree (kinds, content, link targets, modes,
// times), owned by the archive's owner when run as root, or by --owner; and
// `supervise tar` of it extracts to the same tree again.
func TestUntarProjectCopyRoundTrip(t *testing.T) {
	src := sampleTree(t)
	want := readTree(t, src)
	asRoot := os.Geteuid() == 0
	uid, gid := 1234, 2345
	if !asRoot {
		uid, gid = os.Getuid(), os.Getgid()
	}
	archive := projectTar(t, src, "home/u/proj", uid, gid)

	t.Run("archive owners", func(t *testing.T) {
		dst := t.TempDir()
		var warnings []string
		if err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(archive), Warn: func(w string) { warnings = append(warnings, w) }}); err != nil {
			t.Fatal(err)
		}
		if len(warnings) > 0 {
			t.Errorf("warnings: %q", warnings)
		}
		compareTrees(t, want, readTree(t, filepath.Join(dst, "home/u/proj")), uid, gid, asRoot)
		st, err := os.Stat(filepath.Join(dst, "home"))
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("the parent folder home: %v, %v; want mode 0755", st, err)
		}
		defer chmodTree(t, dst)

		// Back out through Tar: the Engine's layout, named from the base name.
		var out bytes.Buffer
		if err := Tar(TarOptions{Dir: filepath.Join(dst, "home/u"), Paths: []string{"proj"}, Out: &out}); err != nil {
			t.Fatal(err)
		}
		names := tarNames(t, out.Bytes())
		if len(names) == 0 || names[0] != "proj/" {
			t.Fatalf("Tar's first entry %q, want proj/", names)
		}
		for _, n := range names {
			if n != "proj/" && !strings.HasPrefix(n, "proj/") {
				t.Errorf("Tar's entry %q is not below proj/", n)
			}
		}
		again := t.TempDir()
		if err := Untar(UntarOptions{Dir: again, In: &out}); err != nil {
			t.Fatal(err)
		}
		compareTrees(t, want, readTree(t, filepath.Join(again, "proj")), uid, gid, asRoot)
		chmodTree(t, again)
	})

	t.Run("owner", func(t *testing.T) {
		dst := t.TempDir()
		own := Owner{UID: os.Getuid(), GID: os.Getgid()}
		if asRoot {
			own = Owner{UID: 4321, GID: 5432}
		}
		if err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(archive), Owner: &own}); err != nil {
			t.Fatal(err)
		}
		compareTrees(t, want, readTree(t, filepath.Join(dst, "home/u/proj")), own.UID, own.GID, true)
		chmodTree(t, dst)

		// The folders made on the way to a missing DIR are the owner's
		// too (the files API of a root container writing as the sandbox
		// user); the folder that was there keeps its own.
		base := t.TempDir()
		deep := filepath.Join(base, "a", "b")
		if err := Untar(UntarOptions{Dir: deep, In: bytes.NewReader(archive), Owner: &own}); err != nil {
			t.Fatal(err)
		}
		for p, wantUID := range map[string]int{base: os.Getuid(), filepath.Join(base, "a"): own.UID, deep: own.UID} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if s := st.Sys().(*syscall.Stat_t); int(s.Uid) != wantUID || st.Mode().Perm() != 0o755 && p != base {
				t.Errorf("%s: owner %d, mode %v; want owner %d, mode 0755", p, s.Uid, st.Mode().Perm(), wantUID)
			}
		}
		chmodTree(t, base)
	})
}

// chmodTree makes the read-only folders of an extracted tree writable again,
// so that t.TempDir can remove it when not run as root.
func chmodTree(t *testing.T, root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// tarOf builds an archive of the given headers; a regular file's content is
// its Linkname field's text (moved to the body).
func tarOf(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name, content string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeReg, Linkname: content, ModTime: time.Unix(1e9, 0)}
}

func symlink(name, target string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, ModTime: time.Unix(1e9, 0)}
}

func dir(name string) *tar.Header {
	return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(1e9, 0)}
}

// TestUntarRefusesEscapes: an absolute name, or one with .., is refused with an
// error naming the entry, and nothing is written outside the folder.
func TestUntarRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../evil", "/evil", "a/../../evil", "ok/../evil", ".."} {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			dst := filepath.Join(outside, "dst")
			err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(tarOf(t, dir("a/"), file(name, "pwned")))})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("cannot extract %q", name)) {
				t.Fatalf("want a refusal naming %q, got %v", name, err)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 1 {
				t.Errorf("the folder above holds %v, want only dst", entries)
			}
			if _, err := os.Lstat("/evil"); err == nil {
				t.Error("/evil was written")
			}
		})
	}
}

// TestUntarNeverFollowsLinks: a link on the way to an entry, from the archive
// or already in the folder, is refused; a link, or a hard link, where an
// entry goes is replaced, never written through.
func TestUntarNeverFollowsLinks(t *testing.T) {
	t.Run("link in the archive", func(t *testing.T) {
		outside, dst := t.TempDir(), t.TempDir()
		err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(tarOf(t, symlink("esc", outside), file("esc/planted", "pwned")))})
		if err == nil || !strings.Contains(err.Error(), `cannot extract "esc/planted"`) || !strings.Contains(err.Error(), "esc is a symbolic link") {
			t.Fatalf("want a refusal naming the entry and the link, got %v", err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("written through the link: %v", entries)
		}
	})
	t.Run("link already there on the way", func(t *testing.T) {
		outside, dst := t.TempDir(), t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dst, "home")); err != nil {
			t.Fatal(err)
		}
		err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(tarOf(t, file("home/u/f", "pwned")))})
		if err == nil || !strings.Contains(err.Error(), "home is a symbolic link") {
			t.Fatalf("want a refusal, got %v", err)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("written through the link: %v", entries)
		}
	})
	t.Run("links already there where entries go", func(t *testing.T) {
		outside, dst := t.TempDir(), t.TempDir()
		target := filepath.Join(outside, "target")
		if err := os.WriteFile(target, []byte("original"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{"file", "dir"} {
			if err := os.Symlink(target, filepath.Join(dst, l)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Link(target, filepath.Join(dst, "hard")); err != nil {
			t.Fatal(err)
		}
		err := Untar(UntarOptions{Dir: dst, In: bytes.NewReader(tarOf(t, file("file", "new"), dir("dir/"), file("dir/in", "new"), file("hard", "new")))})
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(target); string(b) != "original" {
			t.Errorf("the file outside now holds %q", b)
		}
		got := readTree(t, dst)
		for name, kind := range map[string]string{"file": "file", "dir": "dir", "dir/in": "file", "hard": "file"} {
			if got[name].Kind != kind {
				t.Errorf("%s: %+v, want a %s", name, got[name], kind)
			}
		}
	})
}

// TestUntarReplaces: a file replaces a folder (and what it holds) and a folder
// a file; a folder over a folder is merged. Other kinds are skipped with a
// warning.
func TestUntarReplaces(t *testing.T) {
	dst := t.TempDir()
	for _, p := range []string{"was-dir/sub/x", "merged/old"} {
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, p), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "was-file"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	err := Untar(UntarOptions{Dir: dst, Warn: func(w string) { warnings = append(warnings, w) }, In: bytes.NewReader(tarOf(t,
		file("was-dir", "now a file"), dir("was-file/"), dir("merged/"), file("merged/new", "new"),
		&tar.Header{Name: "fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
		&tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "merged/new"},
	))})
	if err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dst)
	for name, kind := range map[string]string{"was-dir": "file", "was-file": "dir", "merged/old": "file", "merged/new": "file"} {
		if got[name].Kind != kind {
			t.Errorf("%s: %+v, want a %s", name, got[name], kind)
		}
	}
	for _, name := range []string{"was-dir/sub", "fifo", "hard"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s is there", name)
		}
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], `skipped "fifo": FIFO`) || !strings.Contains(warnings[1], `skipped "hard": hard link`) {
		t.Errorf("warnings %q, want the FIFO and the hard link skipped", warnings)
	}
}

// TestTarLayout: Tar names each path's entries from its base name, whether the
// path is relative to the folder or absolute, and refuses a missing path.
func TestTarLayout(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "out/dist/app.js"), "js")
	writeTestFile(t, filepath.Join(dir, "report.txt"), "report")
	var out bytes.Buffer
	if err := Tar(TarOptions{Dir: dir, Paths: []string{"out/dist", filepath.Join(dir, "report.txt")}, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if got, want := tarNames(t, out.Bytes()), []string{"dist/", "dist/app.js", "report.txt"}; !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	err := Tar(TarOptions{Dir: dir, Paths: []string{"missing"}, Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "cannot archive "+filepath.Join(dir, "missing")) {
		t.Errorf("a missing path: %v, want an error naming it", err)
	}
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUntarAsSandboxUser: run as a user that is not root (a Kubernetes sandbox
// with a numeric user extracts the project into / as that user), the archive's
// parent folders the user does not own keep their owner and mode, and the
// project is extracted, the user's.
func TestUntarAsSandboxUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the supervisor as another user")
	}
	const user = 65534
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(base, "airlock")
	if err := installFrom(airlockBin, bin); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "home", "u"), 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "home", "u"), user, user); err != nil {
		t.Fatal(err)
	}
	src := sampleTree(t)
	cmd := exec.Command(bin, "supervise", "untar", root)
	cmd.Stdin = bytes.NewReader(projectTar(t, src, "home/u/proj", user, user))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: user, Gid: user}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("untar as user %d: %v\n%s", user, err, out)
	}
	defer chmodTree(t, root)
	compareTrees(t, readTree(t, src), readTree(t, filepath.Join(root, "home/u/proj")), user, user, true)
	st, err := os.Stat(filepath.Join(root, "home"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o711 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("home, root's: mode %v, owner %d; want them unchanged", st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Uid)
	}
}
