//go:build kube

package kube_test

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
)

// The routes a program driving a sandbox uses (exec control, files, lifetimes,
// and the operations the cluster cannot do), through the daemon's API on the
// cluster, as the Go client reaches them.

// clusterAPI starts the env's daemon and returns its client.
func clusterAPI(t *testing.T, e *clitest.Env) *client.Client {
	t.Helper()
	e.MustRun("daemon", "start")
	return client.New(e.Socket())
}

// createOnCluster creates an up sandbox of a busybox manifest on the test
// cluster through the API, with the project dir of e and lifetime life, and
// waits until it is ready.
func createOnCluster(t *testing.T, ctx context.Context, c *client.Client, cs kubernetes.Interface, e *clitest.Env, life client.LifetimeRequest) *client.Sandbox {
	t.Helper()
	// The request names its cluster, and airlock makes a namespace only when
	// the config allows it (create_namespace): on a fresh cluster, before
	// any other test made it, the sandbox would fail for want of it.
	ensureNamespace(t, cs)
	req := &client.CreateRequest{
		Kind:  "up",
		Start: true,
		ManifestSource: client.ManifestSource{
			ManifestTOML: "[sandbox]\nimage = \"" + busybox + "\"\n",
			ProjectDir:   e.Project,
		},
		Engine:          &client.Engine{Kubernetes: &client.Kubernetes{Namespace: namespace, Kubeconfig: kubeconfig, Image: airlockRef}},
		LifetimeRequest: life,
	}
	sb, err := c.Create(ctx, req)
	if err != nil {
		t.Fatalf("create on the cluster: %v", err)
	}
	got, ev, err := c.WaitState(ctx, sb.ID, client.StateReady, client.StateFailed, client.StateStopped)
	if err != nil || got.State != client.StateReady {
		t.Fatalf("sandbox %s: %+v (%s) %v, want ready", sb.ID, got, ev.Reason, err)
	}
	if pods := projectPods(t, cs, e.Project); len(pods) != 1 {
		t.Fatalf("sandbox %s: %d Pods of the project, want its own", sb.ID, len(pods))
	}
	return got
}

// deleteOnCluster deletes sandbox id and waits until its Pod is gone.
func deleteOnCluster(t *testing.T, c *client.Client, cs kubernetes.Interface, e *clitest.Env, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Delete(ctx, id); err != nil {
		t.Errorf("delete %s: %v", id, err)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)
}

// apiError is err as the API's error, nil when it is not one.
func apiError(err error) *client.Error {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

func reasonOf(err error) string {
	if ce := apiError(err); ce != nil {
		return ce.Reason
	}
	return ""
}

// history is sandbox id's whole history.
func history(t *testing.T, ctx context.Context, c *client.Client, id string) []client.Event {
	t.Helper()
	evs, err := c.History(ctx, id, 0)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

// TestAgentRoutesOnCluster: the routes a program drives a sandbox with work on
// the cluster's Pod as on a Docker Engine: exec control (timeout, background
// output, signal, list, a closed stream), the files operations (list, stat,
// mkdir, rename, remove, a directory's tar, a watch), and pause, snapshot and
// fork refused as not supported, naming the cluster.
func TestAgentRoutesOnCluster(t *testing.T) {
	e, cs := newEnv(t, "")
	c := clusterAPI(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := createOnCluster(t, ctx, c, cs, e, client.LifetimeRequest{}).ID
	defer deleteOnCluster(t, c, cs, e, id)

	t.Run("exec", func(t *testing.T) { testExecControlOnCluster(t, ctx, c, id) })
	t.Run("files", func(t *testing.T) { testFilesOnCluster(t, ctx, c, id) })
	t.Run("not_supported", func(t *testing.T) { testNotSupportedOnCluster(t, ctx, c, id) })
}

// running says whether a process whose command line holds marker runs in
// sandbox id (an exec of ps).
func running(t *testing.T, ctx context.Context, c *client.Client, id, marker string) bool {
	t.Helper()
	var out, errOut strings.Builder
	if _, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"ps", "-o", "args"}}, &out, &errOut); err != nil || code != 0 {
		t.Fatalf("ps in the sandbox: exit %d %v: %s", code, err, errOut.String())
	}
	return strings.Contains(out.String(), marker)
}

// waitGone waits until no process holding marker runs in sandbox id.
func waitGone(t *testing.T, ctx context.Context, c *client.Client, id, what, marker string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for running(t, ctx, c, id, marker) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q still runs in the sandbox", what, marker)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testExecControlOnCluster(t *testing.T, ctx context.Context, c *client.Client, id string) {
	// A timeout: 124, the record timed out, exec.timed_out then
	// exec.finished (reason timeout) in the history, the process gone.
	start := time.Now()
	ex, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; sleep 31"}, ExecControl: client.ExecControl{Timeout: 1}}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if code != 124 || time.Since(start) > 20*time.Second {
		t.Errorf("sleep 31 with timeout 1: exit %d after %v, want 124 well before 31 s", code, time.Since(start))
	}
	if rec, err := c.WaitExec(ctx, id, ex.ID); err != nil || rec.ExitCode == nil || *rec.ExitCode != 124 || !rec.TimedOut {
		t.Errorf("the timed-out exec's record: %+v %v, want exit 124, timed_out", rec, err)
	}
	evs := history(t, ctx, c, id)
	to := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.timed_out" && ev.ExecID == ex.ID })
	fin := slices.IndexFunc(evs, func(ev client.Event) bool { return ev.Kind == "exec.finished" && ev.ExecID == ex.ID })
	if to < 0 || fin < to || evs[fin].Reason != "timeout" || evs[fin].ExitCode == nil || *evs[fin].ExitCode != 124 {
		t.Errorf("the timed-out exec's events: exec.timed_out at %d, exec.finished at %d: %+v", to, fin, evs)
	}
	waitGone(t, ctx, c, id, "a timed-out exec", "sleep 31")

	// In the background, ignoring SIGTERM: SIGKILL after the grace, 124.
	tbg, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "trap '' TERM; sleep 34"}, ExecControl: client.ExecControl{Timeout: 0.5, KillGrace: 1, Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := c.WaitExec(ctx, id, tbg.ID); err != nil || rec.ExitCode == nil || *rec.ExitCode != 124 || !rec.TimedOut {
		t.Errorf("a background exec ignoring SIGTERM past its timeout: %+v %v, want exit 124, timed_out", rec, err)
	}
	waitGone(t, ctx, c, id, "a timed-out background exec", "sleep 34")

	// Signalled as soon as the create answered: the signal waits for the
	// exec's process (started later on a cluster than on an Engine).
	for i := range 3 {
		ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sleep", "35"}, ExecControl: client.ExecControl{Background: true}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SignalExec(ctx, id, ex.ID, "KILL"); err != nil {
			t.Fatalf("exec %d signalled at once: %v", i, err)
		}
		if rec, err := c.WaitExec(ctx, id, ex.ID); err != nil || rec.ExitCode == nil || *rec.ExitCode != 128+9 {
			t.Fatalf("exec %d after SIGKILL: %+v %v, want exit 137", i, rec, err)
		}
	}
	waitGone(t, ctx, c, id, "execs killed at once", "sleep 35")

	// A background exec: answered at once, listed running, its output read
	// from a byte offset while it runs; SIGTERM ends it with 143.
	bg, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo first; echo second; exec sleep 32"}, ExecControl: client.ExecControl{Background: true}})
	if err != nil {
		t.Fatal(err)
	}
	if bg.ExitCode != nil {
		t.Fatalf("a background exec's answer: %+v, want it running", bg)
	}
	out, err := c.ExecOutput(ctx, id, bg.ID, client.OutputStdout, int64(len("first\n")), true)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	lines := bufio.NewReader(out)
	if l, err := lines.ReadString('\n'); l != "second\n" {
		t.Fatalf("the background exec's output from byte 6: %q %v, want %q", l, err, "second\n")
	}
	list, err := c.ListExecs(ctx, id, true, 0)
	if err != nil || !slices.ContainsFunc(list, func(x client.Exec) bool { return x.ID == bg.ID && x.ExitCode == nil }) {
		t.Errorf("running execs: %+v %v, want %s among them", list, err, bg.ID)
	}
	if _, err := c.SignalExec(ctx, id, bg.ID, "TERM"); err != nil {
		t.Fatalf("signal TERM: %v", err)
	}
	if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
		t.Errorf("the followed output after the signal: %q %v, want its end and nothing more", rest, err)
	}
	if rec, err := c.WaitExec(ctx, id, bg.ID); err != nil || rec.ExitCode == nil || *rec.ExitCode != 128+15 {
		t.Errorf("the background exec after SIGTERM: %+v %v, want exit 143", rec, err)
	}
	if again, err := c.ExecOutput(ctx, id, bg.ID, client.OutputStdout, 0, false); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(again)
		again.Close()
		if string(b) != "first\nsecond\n" {
			t.Errorf("the ended exec's whole output: %q", b)
		}
	}
	if list, err := c.ListExecs(ctx, id, true, 0); err != nil || slices.ContainsFunc(list, func(x client.Exec) bool { return x.ID == bg.ID }) {
		t.Errorf("running execs after its end: %+v %v", list, err)
	}
	waitGone(t, ctx, c, id, "a signalled exec", "sleep 32")

	// A streamed exec whose client goes away leaves no process.
	sctx, stop := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	started := make(chan *client.Exec, 1)
	go func() {
		ex, _, _ := c.ExecStream(sctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; sleep 33"}}, pw, io.Discard)
		started <- ex
		pw.Close()
	}()
	if l, err := bufio.NewReader(pr).ReadString('\n'); l != "up\n" {
		stop()
		t.Fatalf("the streamed exec: %q %v", l, err)
	}
	if !running(t, ctx, c, id, "sleep 33") {
		t.Error("the streamed exec's sleep 33 does not run")
	}
	stop()
	streamed := <-started
	waitGone(t, ctx, c, id, "a streamed exec whose client went away", "sleep 33")
	if streamed != nil {
		if rec, err := c.WaitExec(ctx, id, streamed.ID); err != nil || rec.ExitCode == nil {
			t.Errorf("the closed stream's exec: %+v %v, want its end recorded", rec, err)
		}
	}

	// An attached exec (a stream upgrade), on a terminal or not, whose
	// session is closed leaves no process either.
	for _, tty := range []bool{false, true} {
		marker := "sleep 36"
		if tty {
			marker = "sleep 37"
		}
		apr, apw := io.Pipe()
		sess, err := c.ExecAttach(ctx, id, &client.ExecRequest{Cmd: []string{"sh", "-c", "echo up; " + marker}, TTY: tty}, nil, apw, io.Discard)
		if err != nil {
			t.Fatalf("attach (tty %v): %v", tty, err)
		}
		if l, err := bufio.NewReader(apr).ReadString('\n'); strings.TrimRight(l, "\r\n") != "up" {
			t.Fatalf("the attached exec (tty %v): %q %v", tty, l, err)
		}
		go func() { _, _ = io.Copy(io.Discard, apr) }()
		if !running(t, ctx, c, id, marker) {
			t.Errorf("the attached exec's %s (tty %v) does not run", marker, tty)
		}
		sess.Close()
		apw.Close()
		waitGone(t, ctx, c, id, "an attached exec whose session was closed", marker)
	}
	if list, err := c.ListExecs(ctx, id, true, 0); err != nil || len(list) != 0 {
		t.Errorf("running execs at the end: %+v %v, want none", list, err)
	}
}

func testFilesOnCluster(t *testing.T, ctx context.Context, c *client.Client, id string) {
	const dir = "/tmp/agent"
	if err := c.MakeDir(ctx, id, dir+"/sub", true); err != nil {
		t.Fatalf("mkdir -p: %v", err)
	}
	if err := c.MakeDir(ctx, id, dir+"/sub", false); reasonOf(err) != client.ReasonAlreadyExists {
		t.Errorf("mkdir of a directory that exists: %v, want already_exists", err)
	}
	before := time.Now().Add(-time.Minute)
	if err := c.WriteFile(ctx, id, dir+"/sub/a.txt", strings.NewReader("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListFiles(ctx, id, dir, 2, 0)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, en := range l.Entries {
		names = append(names, en.Path+":"+en.Type)
	}
	if !slices.Contains(names, dir+"/sub:dir") || !slices.Contains(names, dir+"/sub/a.txt:file") {
		t.Errorf("list of %s, depth 2: %v", dir, names)
	}
	st, err := c.StatFile(ctx, id, dir+"/sub/a.txt")
	if err != nil || st.Type != client.FileTypeFile || st.Size != 5 || st.Mode != 0o640 || st.MTime.Before(before) || st.Name != "a.txt" {
		t.Errorf("stat: %+v %v, want a file of 5 bytes, mode 0640, written now", st, err)
	}
	if err := c.RenameFile(ctx, id, dir+"/sub/a.txt", dir+"/sub/b.txt", false); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := c.StatFile(ctx, id, dir+"/sub/a.txt"); reasonOf(err) != client.ReasonPathNotFound {
		t.Errorf("stat of the renamed file's old path: %v, want path_not_found", err)
	}

	// The directory as a tar (download_dir).
	rc, err := c.ReadArchive(ctx, id, dir)
	if err != nil {
		t.Fatalf("the directory's tar: %v", err)
	}
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the directory's tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		got[strings.TrimSuffix(h.Name, "/")] = string(b)
	}
	rc.Close()
	if v, ok := got["agent/sub/b.txt"]; !ok || v != "hello" {
		t.Errorf("the directory's tar: %v, want agent/sub/b.txt with hello", got)
	}

	if err := c.RemoveFile(ctx, id, dir, false); reasonOf(err) != client.ReasonNotEmpty {
		t.Errorf("remove of a directory with entries, not recursive: %v, want not_empty", err)
	}
	if err := c.RemoveFile(ctx, id, dir+"/sub/b.txt", false); err != nil {
		t.Errorf("remove of a file: %v", err)
	}
	if err := c.RemoveFile(ctx, id, dir, true); err != nil {
		t.Errorf("recursive remove: %v", err)
	}
	if _, err := c.StatFile(ctx, id, dir); reasonOf(err) != client.ReasonPathNotFound {
		t.Errorf("stat of the removed directory: %v, want path_not_found", err)
	}

	// A watch sees a file made in the directory; closed, it leaves no
	// process in the sandbox.
	const wdir = "/tmp/watched"
	if err := c.MakeDir(ctx, id, wdir, true); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	w, err := c.WatchFiles(wctx, id, wdir, client.WatchOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	ev, err := w.Next()
	if err != nil || ev.Type != client.FileEventReady {
		w.Close()
		t.Fatalf("the watch's first event: %+v %v, want ready", ev, err)
	}
	if _, code, err := c.ExecStream(ctx, id, &client.ExecRequest{Cmd: []string{"touch", wdir + "/made"}}, nil, nil); err != nil || code != 0 {
		t.Fatalf("touch: %d %v", code, err)
	}
	for {
		ev, err = w.Next()
		if err != nil {
			w.Close()
			t.Fatalf("the watch ended before the file was made: %v", err)
		}
		if ev.Type == client.FileEventCreated && ev.Path == wdir+"/made" {
			break
		}
	}
	w.Close()
	waitGone(t, ctx, c, id, "a closed watch", "fs watch")
}

func testNotSupportedOnCluster(t *testing.T, ctx context.Context, c *client.Client, id string) {
	check := func(what string, err error) {
		t.Helper()
		ce := apiError(err)
		if ce == nil || ce.Status != http.StatusNotImplemented || ce.Reason != client.ReasonNotSupported || !strings.Contains(ce.Message, "kubernetes") {
			t.Errorf("%s on the cluster: %v, want 501 not_supported naming the cluster", what, err)
		} else {
			t.Logf("%s: %s", what, ce.Message)
		}
	}
	_, err := c.Pause(ctx, id)
	check("pause", err)
	_, err = c.TakeSnapshot(ctx, id, "kube-agents")
	check("snapshot", err)
	_, err = c.Fork(ctx, id, 1)
	check("fork", err)
	// Refused, the sandbox is as it was.
	if sb, err := c.Get(ctx, id); err != nil || sb.State != client.StateReady {
		t.Errorf("after pause, snapshot and fork refused: %+v %v, want it ready", sb, err)
	}
}

// TestLifetimeOnCluster: a sandbox created with a short timeout (on_timeout
// delete) is deleted at its deadline: sandbox.expired (reason timeout), then
// sandbox.deleted, and its Pod is gone.
func TestLifetimeOnCluster(t *testing.T) {
	e, cs := newEnv(t, "")
	c := clusterAPI(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := createOnCluster(t, ctx, c, cs, e, client.LifetimeRequest{Timeout: 4, OnTimeout: client.OnExpiryDelete})
	if sb.ExpiresAt == nil || sb.OnTimeout != client.OnExpiryDelete {
		t.Errorf("the record of a sandbox created with timeout 4: %+v", sb.Lifetime)
	}
	ev, err := c.WaitEvent(ctx, sb.ID, 0, "sandbox.expired", "sandbox.deleted", "sandbox.failed", "sandbox.stopped")
	if err != nil || ev.Kind != "sandbox.expired" || ev.Reason != "timeout" {
		t.Fatalf("at the deadline: %+v %v, want sandbox.expired (timeout)", ev, err)
	}
	if sb.ExpiresAt != nil && ev.Time.Before(sb.ExpiresAt.Add(-time.Second)) {
		t.Errorf("expired at %v, before its deadline %v", ev.Time, sb.ExpiresAt)
	}
	if ev, err := c.WaitEvent(ctx, sb.ID, ev.Sequence, "sandbox.deleted", "sandbox.failed", "sandbox.stopped"); err != nil || ev.Kind != "sandbox.deleted" {
		t.Fatalf("after sandbox.expired: %+v %v, want sandbox.deleted", ev, err)
	}
	waitNoPods(t, cs, e.Project, 30*time.Second)
}
