package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/clitest"
	"github.com/airlock-dev/airlock/test/testenv"
)

// poolManifest has a daemon that takes no value (started while parked) and
// one that takes a substituted value (started at the claim, with the run's).
const poolManifest = `
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = 2

[env]
TOKEN = "${POOL_TOKEN}"

[daemons.static]
command = ["sh", "-c", "echo parked > /tmp/static; exec sleep 1000"]
ready = { cmd = ["test", "-e", "/tmp/static"] }

[daemons.valued]
command = ["sh", "-c", "echo $DTOK > /tmp/dtok; exec sleep 1000"]
env = { DTOK = "${POOL_TOKEN}" }
ready = { cmd = ["test", "-s", "/tmp/dtok"] }
`

// pools is `airlock pool ls --json` of e's daemon: this project's pool.
func pools(e *env) client.Pool {
	e.T.Helper()
	var list client.PoolList
	if err := json.Unmarshal([]byte(e.MustRun("pool", "ls", "--json").Stdout), &list); err != nil {
		e.T.Fatalf("pool ls --json: %v", err)
	}
	for _, p := range list.Pools {
		if p.Project == e.Project {
			return p
		}
	}
	return client.Pool{}
}

// parkedIDs are the IDs `ps --pool` shows parked for e's project.
func parkedIDs(e *env) []string {
	e.T.Helper()
	var all []client.Sandbox
	if err := json.Unmarshal([]byte(e.MustRun("ps", "--pool", "--json").Stdout), &all); err != nil {
		e.T.Fatalf("ps --pool --json: %v", err)
	}
	var out []string
	for _, s := range all {
		if s.Kind == "pool" && s.Project == e.Project && s.State == "parked" {
			out = append(out, s.ID)
		}
	}
	return out
}

// TestWarmPool (issue 23): a run of a manifest with [sandbox.pool] takes a
// parked sandbox and is indistinguishable from a cold one (output, exit code,
// env, values, stdin, events plus pool.claimed); the values delivered at the
// claim are the run's; a parked sandbox serves one run; a changed manifest
// makes the pool stale; --no-pool starts cold; a parked container that dies
// is replaced, never handed out; drain leaves nothing.
func TestWarmPool(t *testing.T) {
	limit(t)
	e := newEnv(t, poolManifest)
	one, two := []string{"POOL_TOKEN=one"}, []string{"POOL_TOKEN=two"}
	t.Cleanup(func() { e.Run("pool", "drain") })

	r := e.RunEnv(one, "pool", "warm")
	if r.Code != 0 || !strings.Contains(r.Stdout, "2 ready") {
		t.Fatalf("pool warm: %s", r)
	}
	parked := parkedIDs(e)
	if len(parked) != 2 {
		t.Fatalf("ps --pool shows %d parked sandboxes, want 2: %v", len(parked), parked)
	}
	if ps := e.MustRun("ps", "-a").Stdout; strings.Contains(ps, parked[0]) {
		t.Errorf("ps -a shows a parked sandbox:\n%s", ps)
	}

	// A warm run: the values are the run's (two), not the pool's (one);
	// the static daemon ran while parked; stdin not forwarded reads EOF.
	const main = `echo "$(hostname) $X $TOKEN $(cat /tmp/dtok) $(cat /tmp/static) $(pwd)"; read l || echo eof; echo err >&2; exit 7`
	r = e.RunEnv(append(two, "X=from-host"), "--log-level", "debug", "run", "-e", "X", "--", "sh", "-c", main)
	if r.Code != 7 {
		t.Fatalf("want exit 7: %s", r)
	}
	fields := strings.Fields(strings.SplitN(r.Stdout, "\n", 2)[0])
	if len(fields) != 6 || fields[1] != "from-host" || fields[2] != "two" || fields[3] != "two" || fields[4] != "parked" || fields[5] != e.Project {
		t.Fatalf("warm run printed %q; want its ID, from-host two two parked %s", r.Stdout, e.Project)
	}
	id := fields[0]
	if !slices.Contains(parked, id) {
		t.Errorf("the run's sandbox %s is not one of the parked ones %v", id, parked)
	}
	contains(t, "stdout", r.Stdout, "\neof\n")
	contains(t, "stderr", r.Stderr, "err\n", "warm pool: hit")
	// The command's own steps, in order (docs/benchmarks.md reads them).
	if !regexp.MustCompile(`steps of this command \(since its start\): init [0-9.]+ms, manifest [0-9.]+ms, daemon [0-9.]+ms, prepare [0-9.]+ms, create [0-9.]+ms, created [0-9.]+ms, attach [0-9.]+ms, resume [0-9.]+ms, started [0-9.]+ms, main exited [0-9.]+ms, end [0-9.]+ms\n`).MatchString(r.Stderr) {
		t.Errorf("a debug run did not print its steps in order:\n%s", r.Stderr)
	}
	eventually(t, cmdTimeout, "the claimed run to be removed", func() bool {
		return strings.Contains(e.MustRun("events", id).Stdout, "sandbox.deleted")
	})
	ev := e.MustRun("events", id).Stdout
	contains(t, "events", ev, "pool.claimed", "daemon.ready", "daemon=static", "daemon=valued", "sandbox.ready", "main.exited", "exit_code=7")

	// Stdin forwarded reaches the main command; the pool was refilled.
	eventually(t, cmdTimeout, "the pool to be refilled", func() bool { return pools(e).Ready == 2 })
	cmd := e.Command(context.Background(), "run", "--", "sh", "-c", "hostname; cat")
	cmd.Env = append(cmd.Env, two...)
	cmd.Stdin = strings.NewReader("through stdin\n")
	r = clitest.RunCmd(t, cmd)
	if r.Code != 0 || !strings.HasSuffix(r.Stdout, "through stdin\n") {
		t.Fatalf("warm run with stdin: %s", r)
	}
	second := strings.SplitN(r.Stdout, "\n", 2)[0]
	if second == id {
		t.Errorf("two runs got the same sandbox %s", id)
	}
	if p := pools(e); p.Hits != 2 {
		t.Errorf("pool ls: %d hits, want 2: %+v", p.Hits, p)
	}

	// --no-pool starts cold; so does a run of a changed manifest (stale).
	r = e.RunEnv(two, "--log-level", "debug", "run", "--no-pool", "--", "true")
	if r.Code != 0 || !strings.Contains(r.Stderr, "warm pool: miss (disabled)") {
		t.Errorf("run --no-pool: %s", r)
	}
	eventually(t, cmdTimeout, "the pool to be refilled", func() bool { return pools(e).Ready == 2 })
	before := parkedIDs(e)
	// A parked container that dies is removed and replaced, never handed out.
	victim := before[0]
	killParked(t, e, victim)
	eventually(t, cmdTimeout, "the dead parked sandbox to be replaced", func() bool {
		p := pools(e)
		return p.Ready == 2 && p.Failures >= 1 && !slices.Contains(parkedIDs(e), victim)
	})
	r = e.RunEnv(two, "run", "--", "hostname")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) == victim {
		t.Errorf("run after a parked sandbox died: %s", r)
	}

	e.WriteFile("sandbox.local.toml", "[env]\nEXTRA = \"1\"\n")
	r = e.RunEnv(two, "--log-level", "debug", "run", "--", "sh", "-c", "echo $EXTRA")
	if r.Code != 0 || r.Stdout != "1\n" || !strings.Contains(r.Stderr, "warm pool: miss (stale)") {
		t.Errorf("run of a changed manifest: %s", r)
	}
	p := pools(e)
	if p.Misses["stale"] != 1 || p.Misses["disabled"] != 1 || p.Stale < 1 {
		t.Errorf("pool ls after a stale and a --no-pool run: %+v", p)
	}

	r = e.MustRun("pool", "drain")
	contains(t, "pool drain", r.Stdout, "removed")
	for _, c := range e.Containers() {
		if c.Labels["dev.airlock.pool"] != "" {
			t.Errorf("after pool drain a pooled container remains: %s %s", c.Names, c.State)
		}
	}
}

// killParked kills the primary container of a parked sandbox.
func killParked(t *testing.T, e *env, id string) {
	t.Helper()
	for _, c := range e.Containers() {
		if c.Labels["dev.airlock.sandbox"] == id && c.Labels["dev.airlock.role"] == "primary" {
			if err := e.Cli.ContainerKill(context.Background(), c.ID, "SIGKILL"); err != nil {
				t.Fatalf("cannot kill %s: %v", id, err)
			}
			return
		}
	}
	t.Fatalf("no primary container for parked sandbox %s", id)
}

// TestWarmPoolConcurrentClaims (issue 23): concurrent runs against a pool
// never share a sandbox, all get the right result, and the parked ones
// serve some of them.
func TestWarmPoolConcurrentClaims(t *testing.T) {
	limit(t)
	e := newEnv(t, `
[sandbox]
image = "{{image}}"
network = "none"
[sandbox.pool]
size = 3
`)
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.MustRun("pool", "warm")
	parked := parkedIDs(e)
	const n = 6
	var wg sync.WaitGroup
	results := make([]clitest.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Run("run", "--", "sh", "-c", fmt.Sprintf("hostname; exit %d", i+1))
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	warm := 0
	for i, r := range results {
		if r.Code != i+1 {
			t.Errorf("run %d: want exit %d: %s", i, i+1, r)
			continue
		}
		host := strings.TrimSpace(r.Stdout)
		if seen[host] {
			t.Errorf("two runs got sandbox %s", host)
		}
		seen[host] = true
		if slices.Contains(parked, host) {
			warm++
		}
	}
	if warm != len(parked) {
		t.Errorf("%d runs got one of the %d parked sandboxes %v; want each parked one used once", warm, len(parked), parked)
	}
	if p := pools(e); p.Hits+p.Misses["empty"] != n || p.Hits < len(parked) {
		t.Errorf("pool ls: %+v; want %d claims, at least %d hits", p, n, len(parked))
	}
}

// TestWarmPoolImageRetagged: the image a manifest names is moved to another
// between two runs (moments apart): the second run finds its pool stale and
// runs the new image, though the daemon keeps what its last prepare found of
// an image for the create that follows.
func TestWarmPoolImageRetagged(t *testing.T) {
	limit(t)
	cli := testenv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := testenv.BusyboxImage(t)
	tag := "airlock-test/retagged:" + strings.ToLower(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	commit := func(marker string) {
		t.Helper()
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: base, Cmd: []string{"sh", "-c", "echo " + marker + " > /marker"}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) }()
		if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
		select {
		case <-waitC:
		case err := <-errC:
			t.Fatal(err)
		}
		if _, err := cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: tag}); err != nil {
			t.Fatal(err)
		}
	}
	commit("first")
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	e := newEnv(t, "[sandbox]\nimage = \""+tag+"\"\n[sandbox.pool]\nsize = 1\n")
	if r := e.Run("run", "--", "cat", "/marker"); r.Code != 0 || r.Stdout != "first\n" {
		t.Fatalf("run of the first image: %s", r)
	}
	eventually(t, time.Minute, "a sandbox parked", func() bool { return pools(e).Ready == 1 })
	if r := e.Run("--log-level", "debug", "run", "--", "cat", "/marker"); r.Code != 0 || r.Stdout != "first\n" || !strings.Contains(r.Stderr, "warm pool: hit") {
		t.Fatalf("warm run of the first image: %s", r)
	}
	commit("second")
	if r := e.Run("--log-level", "debug", "run", "--", "cat", "/marker"); r.Code != 0 || r.Stdout != "second\n" || !strings.Contains(r.Stderr, "warm pool: miss (stale)") {
		t.Fatalf("run right after the image's tag moved: want the new image, cold (stale pool), got %s", r)
	}
	_ = e.MustRun("pool", "drain")
}
