package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/airlock-dev/airlock/supervisor"
)

// What a sandbox may make the daemon record (docs/security.md, docs/egress.md).
const (
	maxEgressDestinations = 100
)

// jsonEvent is a line of `airlock events --json`.
type jsonEvent struct {
	Sequence uint64            `json:"sequence"`
	Kind     string            `json:"kind"`
	State    string            `json:"state"`
	Reason   string            `json:"reason"`
	Extra    map[string]string `json:"extra"`
}

func (e *env) jsonEvents(id string) []jsonEvent {
	e.T.Helper()
	r := e.MustRun("events", id, "--json")
	var out []jsonEvent
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev jsonEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.T.Fatalf("events --json: %v in %q", err, sc.Text())
		}
		out = append(out, ev)
	}
	return out
}

// TestEgressDenialsBounded: a sandbox that asks its egress proxy for many
// distinct denied destinations (through the real proxy) makes the daemon record
// at most maxEgressDestinations of them one by one, then one overflow event
// with counters; the summary of `airlock run` still accounts for every denial.
func TestEgressDenialsBounded(t *testing.T) {
	limit(t)
	skipOnPodman(t, "sandbox.egress is refused there (TestEgressRefusedOnPodman)")
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[sandbox.egress]
allow = ["allowed.example.org"]
`)
	const distinct = 250
	// One destination three times, then `distinct` others once each: 253
	// denials of 251 destinations.
	script := `for j in 1 2 3; do wget -q -O /dev/null http://again.denied.example/ 2>/dev/null; done
i=0; while [ $i -lt ` + strconv.Itoa(distinct) + ` ]; do wget -q -O /dev/null http://d$i.denied.example/ 2>/dev/null; i=$((i+1)); done
echo flood-done`
	id := uniq("egress-flood")
	r := e.Run("run", "--id", id, "--", "sh", "-c", script)
	if r.Code != 0 || !strings.Contains(r.Stdout, "flood-done") {
		t.Fatalf("the flood: %s", r)
	}

	evs := e.jsonEvents(id)
	denied, overflow := 0, 0
	for _, ev := range evs {
		if ev.Kind != "egress.denied" {
			continue
		}
		denied++
		if ev.Extra["overflow"] != "" {
			overflow++
		}
	}
	// The first of each recorded destination, the count of the one denied
	// three times, and the overflow event (recorded when it begins and its
	// totals once at the end).
	if limit := maxEgressDestinations + 1 + 2; denied > limit {
		t.Errorf("%d egress.denied events for %d destinations; want at most %d", denied, distinct+1, limit)
	}
	if overflow == 0 || overflow > 2 {
		t.Errorf("%d overflow events; want 1 or 2", overflow)
	}

	// The summary accounts for every denial: one line a destination for the
	// most denied ones, one for the rest of those recorded, one for the
	// denials past the cap.
	one := regexp.MustCompile(`^airlock: egress denied (\d+)× to (\S+)$`)
	more := regexp.MustCompile(`^airlock: egress denied (\d+)× to (\d+) more destinations\b`)
	other := regexp.MustCompile(`^airlock: egress denied (\d+)× to other destinations \(past the first ` + strconv.Itoa(maxEgressDestinations) + `\b`)
	total, dests, lines, otherLines := 0, 0, 0, 0
	for _, l := range strings.Split(r.Stderr, "\n") {
		switch m, o, x := more.FindStringSubmatch(l), other.FindStringSubmatch(l), one.FindStringSubmatch(l); {
		case m != nil:
			n, _ := strconv.Atoi(m[1])
			d, _ := strconv.Atoi(m[2])
			total, dests = total+n, dests+d
			lines++
		case o != nil:
			n, _ := strconv.Atoi(o[1])
			total += n
			lines++
			otherLines++
		case x != nil:
			n, _ := strconv.Atoi(x[1])
			total, dests = total+n, dests+1
			lines++
		}
	}
	if total != distinct+3 || dests != maxEgressDestinations || otherLines != 1 {
		t.Errorf("the summary counts %d denials, %d destinations one by one and %d lines of others; want %d, %d and 1:\n%s",
			total, dests, otherLines, distinct+3, maxEgressDestinations, r.Stderr)
	}
	if lines > 12 {
		t.Errorf("the summary has %d lines; want a few:\n%s", lines, r.Stderr)
	}
	contains(t, "summary", r.Stderr, "egress denied 3× to again.denied.example:80")
	e.assertClean()
}

// TestForgedStatusLine: a process in a sandbox writes a supervisor.failed line
// whose reason holds terminal escapes into the status stream. Nothing airlock
// prints carries the escapes raw (they are shown as \x1b); `up -d` fails with
// 125 and the sandbox it reported failed is stopped, not left running and
// ready: the daemon's record decides, and ps shows it failed.
func TestForgedStatusLine(t *testing.T) {
	limit(t)
	// The daemon forges the line, then lets its ready check pass: the real
	// supervisor.ready comes after the forged failure in the stream.
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[daemons.forger]
command = ["sh", "-c", '''printf '%s\n' '{"time":"2026-01-01T00:00:00Z","kind":"supervisor.failed","reason":"\u001b]0;PWNED\u0007\u001b[31mFORGED\u009b1m"}' >> `+supervisor.StatusFile+` && touch /tmp/go; exec sleep 1000''']
ready = { cmd = ["test", "-f", "/tmp/go"], timeout = "30s" }
`)
	r := e.Run("up", "-d")
	if r.Code != 125 {
		t.Fatalf("up -d with a forged supervisor.failed: want 125, got %s", r)
	}
	noEscapes := func(what, s string) {
		t.Helper()
		if strings.ContainsRune(s, 0x1b) || strings.ContainsRune(s, 0x07) || strings.ContainsRune(s, 0x9b) {
			t.Errorf("%s prints raw control characters: %q", what, s)
		}
	}
	noEscapes("up -d", r.Stdout+r.Stderr)
	contains(t, "up -d", r.Stderr, `\x1b]0;PWNED\x07\x1b[31mFORGED`)

	ps := e.PS()
	if len(ps) != 1 {
		t.Fatalf("ps -a: want one sandbox, got %+v", ps)
	}
	id := ps[0].ID
	// The sandbox airlock reported failed is not left running, and stays failed.
	ctx := context.Background()
	eventually(t, time.Minute, "the failed sandbox's container to stop", func() bool {
		cs, err := e.Cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "dev.airlock.sandbox="+id), filters.Arg("label", "dev.airlock.role=primary"))})
		if err != nil || len(cs) != 1 {
			t.Fatalf("the primary of %s: %v %+v", id, err, cs)
		}
		return cs[0].State != "running"
	})
	if ps := e.PS(); len(ps) != 1 || ps[0].State != "failed" {
		t.Errorf("ps -a after the forged failure: %+v; want one failed sandbox", ps)
	}
	ev := e.MustRun("events", id)
	noEscapes("events", ev.Stdout)
	contains(t, "events", ev.Stdout, `FORGED`, `\x1b]0;PWNED`)
	if strings.Contains(ev.Stdout, "sandbox.ready") {
		t.Errorf("the sandbox became ready after it was reported failed:\n%s", ev.Stdout)
	}
	js := e.MustRun("events", id, "--json")
	noEscapes("events --json", js.Stdout)
	psj := e.MustRun("ps", "-a", "--json")
	noEscapes("ps --json", psj.Stdout)
	noEscapes("ps", e.MustRun("ps", "-a").Stdout)

	e.MustRun("rm", "-f", id)
	e.assertClean()
}

// TestEgressDenialsApart: two sandboxes of one daemon run at once behind
// egress rules (its one shared proxy serves both, on their own networks);
// each sandbox's egress.denied events name only its own destinations, and the
// proxy is one container.
func TestEgressDenialsApart(t *testing.T) {
	limit(t)
	skipOnPodman(t, "sandbox.egress is refused there (TestEgressRefusedOnPodman)")
	e := newEnv(t, `
[sandbox]
image = "{{image}}"

[sandbox.egress]
allow = ["allowed.example.org"]
`)
	ids := []string{uniq("egress-a"), uniq("egress-b")}
	// Both start at once; each is denied its own destinations, three rounds,
	// interleaved with the other's.
	script := func(me string) string {
		return fmt.Sprintf(`i=0; while [ $i -lt 3 ]; do wget -q -O /dev/null http://%s-$i.denied.example/ 2>/dev/null; sleep 0.3; i=$((i+1)); done; echo done-%s`, me, me)
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, who := range []string{"alpha", "beta"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Run("run", "--id", ids[i], "--", "sh", "-c", "sleep 1; "+script(who))
		}()
	}
	wg.Wait()
	for i, who := range []string{"alpha", "beta"} {
		if r := results[i]; r.Code != 0 || !strings.Contains(r.Stdout, "done-"+who) {
			t.Fatalf("run %s: %s", who, r)
		}
	}
	for i, who := range []string{"alpha", "beta"} {
		other := map[string]string{"alpha": "beta", "beta": "alpha"}[who]
		got := map[string]bool{}
		for _, ev := range e.jsonEvents(ids[i]) {
			if ev.Kind != "egress.denied" {
				continue
			}
			host := ev.Extra["host"]
			if strings.HasPrefix(host, other+"-") || !strings.HasPrefix(host, who+"-") {
				t.Errorf("sandbox %s (%s) recorded a denial of %q", ids[i], who, host)
			}
			got[host] = true
		}
		for j := 0; j < 3; j++ {
			if h := fmt.Sprintf("%s-%d.denied.example", who, j); !got[h] {
				t.Errorf("sandbox %s (%s) did not record its denial of %s; got %v", ids[i], who, h, got)
			}
		}
		contains(t, "summary of "+who, results[i].Stderr, "egress denied 1× to "+who+"-0.denied.example:80")
		if strings.Contains(results[i].Stderr, other+"-") {
			t.Errorf("the summary of %s names the other sandbox's destinations:\n%s", who, results[i].Stderr)
		}
	}
	e.assertClean()
}
