package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/backend/docker"
	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/control"
)

// fsExec runs a shell script in sandbox id and returns its stdout.
func fsExec(t *testing.T, ctx context.Context, c *client.Client, id, script string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	_, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", script}, Workdir: "/"}, &out, &errOut)
	if err != nil || code != 0 {
		t.Fatalf("exec %q: code %d, %v: %s", script, code, err, errOut.String())
	}
	return out.String()
}

// TestFileOps: list, stat, remove, mkdir and rename on a sandbox whose user is
// nobody (65534), with names holding a space, a newline and a byte that is not
// UTF-8; every error the routes give.
func TestFileOps(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(filesManifest)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	const nl, bad = "/tmp/t/n\nl", "/tmp/t/b\xffad"

	// mkdir: with parents, as the sandbox's user.
	if err := c.MakeDir(ctx, id, "/tmp/t/a/b", true); err != nil {
		t.Fatal(err)
	}
	if err := c.MakeDir(ctx, id, "/tmp/t/a/b", true); err != nil {
		t.Errorf("mkdir with parents of an existing directory: %v", err)
	}
	wantErr(t, "mkdir of an existing directory", c.MakeDir(ctx, id, "/tmp/t/a", false), http.StatusConflict, client.ReasonAlreadyExists, "/tmp/t/a")
	wantErr(t, "mkdir below a missing directory", c.MakeDir(ctx, id, "/tmp/none/x", false), http.StatusNotFound, client.ReasonPathNotFound, "/tmp/none/x")
	st, err := c.StatFile(ctx, id, "/tmp/t/a/b")
	if err != nil {
		t.Fatal(err)
	}
	if st.Type != client.FileTypeDir || st.UID != 65534 || st.Name != "b" || st.Path != "/tmp/t/a/b" || st.Mode&0o700 != 0o700 {
		t.Errorf("stat of a new directory: %+v", st)
	}

	if err := c.WriteFile(ctx, id, "/tmp/t/hello.txt", strings.NewReader("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	fsExec(t, ctx, c, id, `cd /tmp/t && printf x > "sp ace" && printf yy > "$(printf 'n\nl')" && printf zzz > "$(printf 'b\377ad')" && ln -s hello.txt link`)

	t.Run("list", func(t *testing.T) {
		start := time.Now().Add(-time.Minute)
		l, err := c.ListFiles(ctx, id, "/tmp/t/", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range l.Entries {
			names = append(names, e.Name)
			if e.MTime.Before(start) || e.UID != 65534 {
				t.Errorf("entry %q: mtime %v, uid %d", e.Name, e.MTime, e.UID)
			}
		}
		if want := []string{"a", "b\xffad", "hello.txt", "link", "n\nl", "sp ace"}; !slices.Equal(names, want) || l.Path != "/tmp/t" || l.Truncated {
			t.Fatalf("list /tmp/t: %q (path %q, truncated %v), want %q", names, l.Path, l.Truncated, want)
		}
		byName := map[string]client.FileEntry{}
		for _, e := range l.Entries {
			byName[e.Name] = e
		}
		if h := byName["hello.txt"]; h.Type != client.FileTypeFile || h.Size != 5 || h.Mode != 0o640 || h.Path != "/tmp/t/hello.txt" {
			t.Errorf("hello.txt: %+v", h)
		}
		if l := byName["link"]; l.Type != client.FileTypeSymlink || l.Target != "hello.txt" {
			t.Errorf("link: %+v", l)
		}
		if b := byName["b\xffad"]; b.Size != 3 || b.Path != bad {
			t.Errorf("the name that is not UTF-8: %+v", b)
		}
		if n := byName["n\nl"]; n.Size != 2 || n.Path != nl {
			t.Errorf("the name with a newline: %+v", n)
		}

		// On the wire: a name that is not UTF-8 has its bytes in base64
		// beside a readable form; a newline is JSON's \n.
		resp, err := socketClient(e.paths.Socket()).Get("http://airlockd/v1/sandboxes/" + id + "/files/list?path=/tmp/t")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range []string{"\"name\":\"b\ufffdad\",\"name_base64\":\"Yv9hZA==\",\"path\":\"/tmp/t/b\ufffdad\",\"path_base64\":\"L3RtcC90L2L/YWQ=\"", `"name":"n\nl"`, `"name":"sp ace"`, `"mode":"0640"`, `"link_target":"hello.txt"`, `"type":"symlink"`} {
			if !bytes.Contains(raw, []byte(w)) {
				t.Errorf("the listing's JSON has no %s: %s", w, raw)
			}
		}
		if !json.Valid(raw) {
			t.Errorf("the listing is not valid JSON: %s", raw)
		}

		deep, err := c.ListFiles(ctx, id, "/tmp/t", 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(deep.Entries) != 7 || deep.Entries[1].Path != "/tmp/t/a/b" {
			t.Errorf("list to depth 3: %+v", deep.Entries)
		}
		cut, err := c.ListFiles(ctx, id, "/tmp/t", 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(cut.Entries) != 2 || !cut.Truncated {
			t.Errorf("list with limit 2: %d entries, truncated %v", len(cut.Entries), cut.Truncated)
		}
		_, err = c.ListFiles(ctx, id, "/tmp/t/hello.txt", 0, 0)
		wantErr(t, "list of a file", err, http.StatusConflict, client.ReasonNotDirectory, "/tmp/t/hello.txt")
		_, err = c.ListFiles(ctx, id, "/tmp/missing", 0, 0)
		wantErr(t, "list of a missing path", err, http.StatusNotFound, client.ReasonPathNotFound, "/tmp/missing")
		_, err = c.ListFiles(ctx, id, "tmp", 0, 0)
		wantErr(t, "a relative path", err, http.StatusBadRequest, client.ReasonInvalidRequest, "not absolute")
		_, err = c.ListFiles(ctx, id, "/tmp", 65, 0)
		wantErr(t, "a depth too deep", err, http.StatusBadRequest, client.ReasonInvalidRequest, "depth 65")
		_, err = c.ListFiles(ctx, "no-such-sandbox", "/tmp", 0, 0)
		wantErr(t, "an unknown sandbox", err, http.StatusNotFound, client.ReasonSandboxNotFound)
	})

	t.Run("stat", func(t *testing.T) {
		st, err := c.StatFile(ctx, id, bad)
		if err != nil {
			t.Fatal(err)
		}
		if st.Name != "b\xffad" || st.Type != client.FileTypeFile || st.Size != 3 {
			t.Errorf("stat of %q: %+v", bad, st)
		}
		st, err = c.StatFile(ctx, id, "/tmp/t/link")
		if err != nil || st.Type != client.FileTypeSymlink || st.Target != "hello.txt" {
			t.Errorf("stat of a link (not followed): %+v, %v", st, err)
		}
		_, err = c.StatFile(ctx, id, "/tmp/t/missing")
		wantErr(t, "stat of a missing path", err, http.StatusNotFound, client.ReasonPathNotFound, "/tmp/t/missing")
		_, err = c.StatFile(ctx, id, "/tmp/t/\x00")
		wantErr(t, "a NUL byte", err, http.StatusBadRequest, client.ReasonInvalidRequest, "NUL")
	})

	t.Run("rename", func(t *testing.T) {
		wantErr(t, "rename over a file", c.RenameFile(ctx, id, "/tmp/t/sp ace", nl, false), http.StatusConflict, client.ReasonAlreadyExists, "exists")
		if err := c.RenameFile(ctx, id, "/tmp/t/sp ace", nl, true); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, c, id, nl); string(got) != "x" {
			t.Errorf("after the rename %q holds %q", nl, got)
		}
		if err := c.RenameFile(ctx, id, bad, "/tmp/t/a/good", false); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, c, id, "/tmp/t/a/good"); string(got) != "zzz" {
			t.Errorf("renamed from a name that is not UTF-8: %q", got)
		}
		_, err := c.StatFile(ctx, id, "/tmp/t/sp ace")
		wantErr(t, "the old name", err, http.StatusNotFound, client.ReasonPathNotFound)
		wantErr(t, "rename of a missing path", c.RenameFile(ctx, id, "/tmp/t/gone", "/tmp/t/x", false), http.StatusNotFound, client.ReasonPathNotFound, "/tmp/t/gone")
		wantErr(t, "rename without to", c.RenameFile(ctx, id, "/tmp/t/a", "", false), http.StatusBadRequest, client.ReasonInvalidRequest, "to is required")
		wantErr(t, "rename of a directory into itself", c.RenameFile(ctx, id, "/tmp/t/a", "/tmp/t/a/b/c", false), http.StatusBadRequest, client.ReasonInvalidRequest, "/tmp/t/a")
	})

	t.Run("remove", func(t *testing.T) {
		wantErr(t, "remove of a directory that holds files", c.RemoveFile(ctx, id, "/tmp/t/a", false), http.StatusConflict, client.ReasonNotEmpty, "/tmp/t/a")
		if err := c.RemoveFile(ctx, id, "/tmp/t/a", true); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveFile(ctx, id, "/tmp/t/link", false); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveFile(ctx, id, nl, false); err != nil {
			t.Fatal(err)
		}
		l, err := c.ListFiles(ctx, id, "/tmp/t", 0, 0)
		if err != nil || len(l.Entries) != 1 || l.Entries[0].Name != "hello.txt" {
			t.Errorf("after the removals: %+v, %v", l, err)
		}
		wantErr(t, "remove of a missing path", c.RemoveFile(ctx, id, "/tmp/t/a", true), http.StatusNotFound, client.ReasonPathNotFound, "/tmp/t/a")
		wantErr(t, "remove of /", c.RemoveFile(ctx, id, "/", true), http.StatusBadRequest, client.ReasonInvalidRequest, "/")
		wantErr(t, "remove of root's file", c.RemoveFile(ctx, id, "/etc/group", false), http.StatusForbidden, client.ReasonPermissionDenied, "/etc/group")
		wantErr(t, "a bad boolean", rawStatus(t, e, http.MethodDelete, "/v1/sandboxes/"+id+"/files?path=/tmp/t&recursive=yes"), http.StatusBadRequest, client.ReasonInvalidRequest, "recursive")
	})
}

// rawStatus sends a request with no body and returns its API error (nil for
// a 2xx).
func rawStatus(t *testing.T, e *env, method, path string) error {
	t.Helper()
	req, _ := http.NewRequest(method, "http://airlockd"+path, nil)
	resp, err := socketClient(e.paths.Socket()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		return nil
	}
	ce := &client.Error{Status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(ce)
	return ce
}

// TestFilesRootPID1Ops: in a sandbox whose container runs as root for a
// daemon, the files operations still act as the sandbox's user.
func TestFilesRootPID1Ops(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(strings.Replace(filesManifest, "[daemons.idle]\n", "[daemons.idle]\nuser = \"root\"\n", 1))
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	if err := c.MakeDir(ctx, id, "/tmp/mine", false); err != nil {
		t.Fatal(err)
	}
	if st, err := c.StatFile(ctx, id, "/tmp/mine"); err != nil || st.UID != 65534 {
		t.Errorf("a directory made in a sandbox with a root PID 1: %+v, %v", st, err)
	}
	wantErr(t, "remove of root's file", c.RemoveFile(ctx, id, "/etc/group", false), http.StatusForbidden, client.ReasonPermissionDenied)
}

// nextEvent is the watch's next event that is not an overflow, within d.
func nextEvents(t *testing.T, w *client.FileWatch, n int, d time.Duration) []client.FileEvent {
	t.Helper()
	var got []client.FileEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(got) < n {
			ev, err := w.Next()
			if err != nil {
				return
			}
			got = append(got, ev)
		}
	}()
	select {
	case <-done:
	case <-time.After(d):
		w.Close()
		<-done
		t.Fatalf("%d events of %d within %v: %+v", len(got), n, d, got)
	}
	return got
}

// watchers is what runs `supervise fs watch` in sandbox id.
func watchers(t *testing.T, ctx context.Context, c *client.Client, id string) string {
	out := fsExec(t, ctx, c, id, `for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done`)
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "fs watch") {
			found = append(found, l)
		}
	}
	return strings.Join(found, "; ")
}

// TestFileWatch: GET …/files/watch reports what is created, modified and
// removed under a directory (and in a directory made meanwhile), ends with
// the directory, bounds its events per second and its directories, and leaves
// nothing running in the sandbox once the client went away.
func TestFileWatch(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.writeManifest(filesManifest)
	rt := &docker.Runtime{Engine: e.docker, Paths: e.paths, Quiet: true, Binary: binA, BuildID: buildA, Getenv: e.getenv, Owner: randHex(16)}
	c := startInProcessConfig(t, e, rt, control.Config{IdleTTL: time.Hour, ReapInterval: 100 * time.Millisecond, OutputMax: filesMax})
	ctx := ctxT(t, 2*time.Minute)
	id := e.createReady(ctx, c, "").ID
	fsExec(t, ctx, c, id, "mkdir -p /tmp/w/old /tmp/m/1/x /tmp/m/2 /tmp/m/3 /tmp/m/4")

	t.Run("events", func(t *testing.T) {
		w, err := c.WatchFiles(ctx, id, "/tmp/w", client.WatchOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if ready := nextEvents(t, w, 1, 10*time.Second)[0]; ready.Type != client.FileEventReady || ready.Watched != 2 {
			t.Fatalf("first event %+v, want ready with 2 directories watched", ready)
		}
		fsExec(t, ctx, c, id, `cd /tmp/w && echo a > f1 && echo b > "$(printf 's p\nc')" && echo c >> f1 && rm "$(printf 's p\nc')" && mkdir d && echo x > d/g && rmdir old`)
		want := []client.FileEvent{
			{Type: client.FileEventCreated, Path: "/tmp/w/f1"},
			{Type: client.FileEventCreated, Path: "/tmp/w/s p\nc"},
			{Type: client.FileEventModified, Path: "/tmp/w/f1"},
			{Type: client.FileEventRemoved, Path: "/tmp/w/s p\nc"},
			{Type: client.FileEventCreated, Path: "/tmp/w/d", Dir: true},
			{Type: client.FileEventCreated, Path: "/tmp/w/d/g"},
			{Type: client.FileEventRemoved, Path: "/tmp/w/old", Dir: true},
		}
		// A file written twice in a row is one event; d/g may be seen
		// twice (by d's scan and by its watch): read on until as many
		// distinct events as wanted came (a fixed count ended before
		// old's removal when the second d/g took its place).
		var got, kept []client.FileEvent
		for len(kept) < len(want) {
			ev := nextEvents(t, w, 1, 10*time.Second)[0]
			got = append(got, ev)
			if len(kept) == 0 || kept[len(kept)-1] != ev {
				kept = append(kept, ev)
			}
		}
		if !slices.Equal(kept[:min(len(kept), len(want))], want) {
			t.Errorf("events:\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("the directory removed", func(t *testing.T) {
		fsExec(t, ctx, c, id, "mkdir -p /tmp/gone")
		w, err := c.WatchFiles(ctx, id, "/tmp/gone", client.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		nextEvents(t, w, 1, 10*time.Second)
		fsExec(t, ctx, c, id, "rmdir /tmp/gone")
		if ev := nextEvents(t, w, 1, 10*time.Second)[0]; ev.Type != client.FileEventRemoved || ev.Path != "/tmp/gone" {
			t.Errorf("event %+v, want the directory removed", ev)
		}
		if ev, err := w.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("after the directory's end: %+v, %v, want EOF", ev, err)
		}
	})

	t.Run("bounds", func(t *testing.T) {
		w, err := c.WatchFiles(ctx, id, "/tmp/m", client.WatchOptions{Recursive: true, MaxDirs: 3, Rate: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		evs := nextEvents(t, w, 2, 10*time.Second)
		if evs[0].Type != client.FileEventReady || evs[0].Watched != 3 || evs[1].Type != client.FileEventOverflow || !strings.Contains(evs[1].Reason, "max_dirs") {
			t.Fatalf("first events %+v, want ready with 3 directories, then an overflow naming max_dirs", evs)
		}
		fsExec(t, ctx, c, id, "cd /tmp/m && for i in $(seq 40); do : > f$i; done")
		created := 0
		for created <= 40 {
			ev := nextEvents(t, w, 1, 10*time.Second)[0]
			if ev.Type == client.FileEventOverflow {
				if ev.Dropped < 1 || !strings.Contains(ev.Reason, "rate") {
					t.Errorf("overflow %+v", ev)
				}
				break
			}
			created++
		}
		if created > 5 {
			t.Errorf("%d events before the overflow, over the rate of 5", created)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := c.WatchFiles(ctx, id, "/tmp/none", client.WatchOptions{})
		wantErr(t, "a missing path", err, http.StatusNotFound, client.ReasonPathNotFound, "/tmp/none")
		fsExec(t, ctx, c, id, "touch /tmp/afile")
		_, err = c.WatchFiles(ctx, id, "/tmp/afile", client.WatchOptions{})
		wantErr(t, "a file", err, http.StatusConflict, client.ReasonNotDirectory, "/tmp/afile")
		_, err = c.WatchFiles(ctx, id, "/tmp", client.WatchOptions{Rate: -1})
		wantErr(t, "a bad rate", err, http.StatusBadRequest, client.ReasonInvalidRequest, "rate")
	})

	// Whatever ended them, no watcher is left in the sandbox.
	deadline := time.Now().Add(10 * time.Second)
	for left := watchers(t, ctx, c, id); left != ""; left = watchers(t, ctx, c, id) {
		if time.Now().After(deadline) {
			t.Fatalf("watchers left in the sandbox after their clients went away: %s", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
