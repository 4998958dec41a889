package control_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
)

// filesManifest is a sandbox whose user is not root (nobody, 65534:65534 in
// the test image), so that who owns a written file says something.
const filesManifest = `
[sandbox]
image = "{{image}}"
network = "none"
user = "nobody"

[daemons.idle]
command = ["sh", "-c", "echo idle-up; exec sleep 300"]
timeout = 1
ready = { log = "idle-up", timeout = "20s" }
`

// filesMax is the daemon's artifacts.output_max in TestFiles.
const filesMax = 64 << 10

// TestFiles: GET and PUT /v1/sandboxes/{id}/files on one sandbox of a daemon
// in the test process, with a small output_max: one file and a tar of a
// folder written and read back, owned by the sandbox user; a folder asked for
// as one file, a missing path, bad input, bodies and files over the bound; a
// stopped sandbox is read, not written.
func TestFiles(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(filesManifest)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID

	t.Run("file", func(t *testing.T) {
		data := []byte("hello\x00from the host\n")
		if err := c.WriteFile(ctx, id, "/tmp/files/new/hello.bin", bytes.NewReader(data), 0o640); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, c, id, "/tmp/files/new/hello.bin"); !bytes.Equal(got, data) {
			t.Errorf("read back %q, want %q", got, data)
		}
		ents := readArchive(t, c, id, "/tmp/files")
		want := []entry{
			{name: "files/", dir: true, mode: -1},
			{name: "files/new/", dir: true, mode: 0o755},
			{name: "files/new/hello.bin", mode: 0o640, data: string(data)},
		}
		checkEntries(t, ents, want)

		// A body of unknown length (chunked) is taken too; the default mode
		// is 0644, and a second write replaces the file.
		if err := c.WriteFile(ctx, id, "/tmp/files/new/hello.bin", struct{ io.Reader }{strings.NewReader("again")}, 0); err != nil {
			t.Fatal(err)
		}
		checkEntries(t, readArchive(t, c, id, "/tmp/files/new/hello.bin"), []entry{{name: "hello.bin", mode: 0o644, data: "again"}})

		// Over HTTP: the bytes with their length.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://airlockd/v1/sandboxes/"+id+"/files?path=/tmp/files/new/hello.bin", nil)
		resp, err := socketClient(e.paths.Socket()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" || resp.ContentLength != 5 || string(b) != "again" {
			t.Errorf("GET a file: %d %q length %d %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength, b)
		}
	})

	t.Run("archive", func(t *testing.T) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range []*tar.Header{
			{Typeflag: tar.TypeDir, Name: "site/", Mode: 0o750, Uid: 1234, Gid: 1234},
			{Typeflag: tar.TypeDir, Name: "site/css/", Mode: 0o755},
			{Typeflag: tar.TypeReg, Name: "site/css/main.css", Mode: 0o600, Size: 7, Uid: 1234},
			{Typeflag: tar.TypeReg, Name: "site/index.html", Mode: 0o644, Size: 5},
			{Typeflag: tar.TypeSymlink, Name: "site/home", Linkname: "index.html"},
		} {
			h.ModTime = time.Now()
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			_, _ = tw.Write([]byte(map[string]string{"site/css/main.css": "p { } \n", "site/index.html": "<h1/>"}[h.Name]))
		}
		_ = tw.Close()
		if err := c.WriteArchive(ctx, id, "/tmp/up/load", &buf); err != nil {
			t.Fatal(err)
		}
		checkEntries(t, readArchive(t, c, id, "/tmp/up/load/site"), []entry{
			{name: "site/", dir: true, mode: 0o750},
			{name: "site/css/", dir: true, mode: 0o755},
			{name: "site/css/main.css", mode: 0o600, data: "p { } \n"},
			{name: "site/home", link: "index.html", mode: -1},
			{name: "site/index.html", mode: 0o644, data: "<h1/>"},
		})
		// The link is archived, not followed, and is not one file.
		checkEntries(t, readArchive(t, c, id, "/tmp/up/load/site/home"), []entry{{name: "home", link: "index.html", mode: -1}})
		_, err := c.ReadFile(ctx, id, "/tmp/up/load/site/home")
		wantErr(t, "a link read as a file", err, http.StatusNotAcceptable, client.ReasonNotRegular, "symbolic link")
	})

	t.Run("refused", func(t *testing.T) {
		_, err := c.ReadFile(ctx, id, "/tmp")
		wantErr(t, "a folder read as a file", err, http.StatusNotAcceptable, client.ReasonNotRegular, "/tmp", "application/x-tar")
		if code, body := rawGet(t, e.paths.Socket(), "/v1/sandboxes/"+id+"/files?path=/tmp"); code != http.StatusNotAcceptable {
			t.Errorf("GET a folder with curl's Accept: */*: %d %s, want 406", code, body)
		}
		_, err = c.ReadFile(ctx, id, "/tmp/no-such-file")
		wantErr(t, "a missing file", err, http.StatusNotFound, client.ReasonPathNotFound, "/tmp/no-such-file")
		_, err = c.ReadArchive(ctx, id, "/no/such/dir")
		wantErr(t, "a missing folder", err, http.StatusNotFound, client.ReasonPathNotFound, "/no/such/dir")
		_, err = c.ReadFile(ctx, id, "tmp/x")
		wantErr(t, "a relative path", err, http.StatusBadRequest, client.ReasonInvalidRequest, `"tmp/x"`, "absolute")
		for _, m := range []string{"9", "10000", "rw"} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://airlockd/v1/sandboxes/"+id+"/files?path=/tmp/x&mode="+m, strings.NewReader("x"))
			resp, err := socketClient(e.paths.Socket()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var ce client.Error
			_ = json.Unmarshal(b, &ce)
			if resp.StatusCode != http.StatusBadRequest || ce.Reason != client.ReasonInvalidRequest || !strings.Contains(ce.Message, strconv.Quote(m)) {
				t.Errorf("PUT with mode=%s: %d %s, want 400 invalid_request naming it", m, resp.StatusCode, b)
			}
		}
		for name, hs := range map[string][]*tar.Header{
			"..":     {{Typeflag: tar.TypeReg, Name: "../escape", Mode: 0o644}},
			"/":      {{Typeflag: tar.TypeReg, Name: "/etc/x", Mode: 0o644}},
			"link":   {{Typeflag: tar.TypeSymlink, Name: "out", Linkname: "/etc"}, {Typeflag: tar.TypeReg, Name: "out/x", Mode: 0o644}},
			"device": {{Typeflag: tar.TypeChar, Name: "null", Mode: 0o644}},
		} {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range hs {
				_ = tw.WriteHeader(h)
			}
			_ = tw.Close()
			err := c.WriteArchive(ctx, id, "/tmp/refused", &buf)
			wantErr(t, "an archive with a bad entry ("+name+")", err, http.StatusBadRequest, client.ReasonInvalidRequest, "entry")
		}
		// A caller's mistakes about what is in the sandbox are 4xx with a
		// reason of their own, never internal: a file below a file, a file
		// over a folder, an archive into a file or replacing a folder.
		err = c.WriteFile(ctx, id, "/etc/passwd/x", strings.NewReader("x"), 0)
		wantErr(t, "a file below a file", err, http.StatusConflict, "not_a_directory", "/etc/passwd")
		err = c.WriteFile(ctx, id, "/tmp", strings.NewReader("x"), 0)
		wantErr(t, "a file over a folder", err, http.StatusConflict, "is_a_directory", "/tmp")
		var one bytes.Buffer
		tw := tar.NewWriter(&one)
		_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "tmp", Mode: 0o644, Size: 1})
		_, _ = tw.Write([]byte("x"))
		_ = tw.Close()
		err = c.WriteArchive(ctx, id, "/etc/passwd", bytes.NewReader(one.Bytes()))
		wantErr(t, "an archive into a file", err, http.StatusConflict, "not_a_directory", "/etc/passwd")
		err = c.WriteArchive(ctx, id, "/", bytes.NewReader(one.Bytes()))
		wantErr(t, "an archive's file over a folder", err, http.StatusConflict, "is_a_directory", "/tmp")
		// What came before a bad entry may be extracted; the bad ones are not.
		for _, p := range []string{"/tmp/escape", "/etc/x"} {
			if _, err := c.ReadArchive(ctx, id, p); apiReason(err) != client.ReasonPathNotFound {
				t.Errorf("a refused archive wrote %s: %v", p, err)
			}
		}
	})

	t.Run("bounded", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), filesMax+1)
		err := c.WriteFile(ctx, id, "/tmp/big-put", bytes.NewReader(big), 0)
		wantErr(t, "a body over the bound", err, http.StatusRequestEntityTooLarge, client.ReasonTooLarge, "artifacts.output_max")
		err = c.WriteFile(ctx, id, "/tmp/big-put", struct{ io.Reader }{bytes.NewReader(big)}, 0)
		wantErr(t, "a chunked body over the bound", err, http.StatusRequestEntityTooLarge, client.ReasonTooLarge, "artifacts.output_max")
		if _, err := c.ReadFile(ctx, id, "/tmp/big-put"); apiReason(err) != client.ReasonPathNotFound {
			t.Errorf("a refused body left /tmp/big-put: %v", err)
		}
		// Files the sandbox made: one over the bound, two under it whose
		// archive is over it.
		ex, err := c.Exec(ctx, id, &client.ExecRequest{Workdir: "/tmp", Cmd: []string{"sh", "-c",
			"head -c 70000 /dev/zero > /tmp/big && mkdir /tmp/two && head -c 40000 /dev/zero > /tmp/two/a && head -c 40000 /dev/zero > /tmp/two/b"}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.WaitExec(ctx, id, ex.ID); err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
			b, _ := os.ReadFile(got.Stderr)
			t.Fatalf("exec: %+v %v\n%s", got, err, b)
		}
		_, err = c.ReadFile(ctx, id, "/tmp/big")
		wantErr(t, "a file over the bound", err, http.StatusRequestEntityTooLarge, client.ReasonTooLarge, "/tmp/big")
		_, err = c.ReadArchive(ctx, id, "/tmp/big")
		wantErr(t, "an archive of a file over the bound", err, http.StatusRequestEntityTooLarge, client.ReasonTooLarge, "/tmp/big")
		rc, err := c.ReadArchive(ctx, id, "/tmp/two")
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err == nil || n > filesMax {
			t.Errorf("an archive over the bound: read %d bytes, err %v; want at most %d and an error", n, err, filesMax)
		}
	})

	t.Run("stopped", func(t *testing.T) {
		if _, err := c.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, 30*time.Second, client.StateStopped)
		err := c.WriteFile(ctx, id, "/tmp/late", strings.NewReader("x"), 0)
		wantErr(t, "a write into a stopped sandbox", err, http.StatusConflict, client.ReasonInvalidState, "stopped")
		// The Engine reads a stopped container.
		if got := readFile(t, c, id, "/tmp/files/new/hello.bin"); string(got) != "again" {
			t.Errorf("read from the stopped sandbox: %q", got)
		}
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, 30*time.Second, client.StateDeleted)
		_, err = c.ReadFile(ctx, id, "/tmp/files/new/hello.bin")
		wantErr(t, "a read of a deleted sandbox", err, http.StatusConflict, client.ReasonInvalidState, "deleted")
	})
}

func readFile(t *testing.T, c *client.Client, id, p string) []byte {
	t.Helper()
	rc, err := c.ReadFile(context.Background(), id, p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}

// entry is an archive's entry as the test checks it (mode -1: any).
type entry struct {
	name, link, data string
	dir              bool
	mode             int64
	uid, gid         int
}

func readArchive(t *testing.T, c *client.Client, id, p string) []entry {
	t.Helper()
	rc, err := c.ReadArchive(context.Background(), id, p)
	if err != nil {
		t.Fatalf("read the archive of %s: %v", p, err)
	}
	defer rc.Close()
	var out []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read the archive of %s: %v", p, err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, entry{name: h.Name, link: h.Linkname, data: string(b), dir: h.Typeflag == tar.TypeDir, mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid})
	}
}

// checkEntries compares an archive with want, in order; every entry is owned
// by nobody (65534:65534), the sandbox's user.
func checkEntries(t *testing.T, got, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("the archive has %d entries %+v, want %d %+v", len(got), got, len(want), want)
		return
	}
	for i, w := range want {
		g := got[i]
		if w.mode == -1 {
			w.mode = g.mode
		}
		w.uid, w.gid = 65534, 65534
		if g != w {
			t.Errorf("entry %d: %+v, want %+v", i, g, w)
		}
	}
}

// wantErr fails unless err is the API error of status and reason whose
// message holds every one of words.
func wantErr(t *testing.T, what string, err error, status int, reason string, words ...string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status || ce.Reason != reason {
		t.Errorf("%s: %v, want %d %s", what, err, status, reason)
		return
	}
	for _, w := range words {
		if !strings.Contains(ce.Message, w) {
			t.Errorf("%s: message %q does not name %q", what, ce.Message, w)
		}
	}
}

// TestFilesRootPID1: a sandbox whose user is nobody but whose daemon runs as
// root has a root PID 1 (the container runs as root); what PUT writes is still
// the sandbox user's, not the container's.
func TestFilesRootPID1(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(strings.Replace(filesManifest, "[daemons.idle]\n", "[daemons.idle]\nuser = \"root\"\n", 1))
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	if err := c.WriteFile(ctx, id, "/tmp/root-pid1/hello.txt", strings.NewReader("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, readArchive(t, c, id, "/tmp/root-pid1"), []entry{
		{name: "root-pid1/", dir: true, mode: 0o755},
		{name: "root-pid1/hello.txt", mode: 0o600, data: "hello"},
	})
}
