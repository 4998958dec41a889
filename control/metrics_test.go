package control_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/test/testenv"
)

// parseMetrics parses an answer of GET /metrics with Prometheus' own parser
// of the text format, failing on anything it refuses.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("GET /metrics is not Prometheus' text format: %v\n%s", err, text)
	}
	return fams
}

// family is the family name of fams, checked to be of type typ.
func family(t *testing.T, fams map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("GET /metrics has no %s", name)
	}
	if f.GetType() != typ {
		t.Errorf("%s is a %v, want a %v", name, f.GetType(), typ)
	}
	if f.GetHelp() == "" {
		t.Errorf("%s has no HELP", name)
	}
	return f
}

// sample is the metric of f whose labels are exactly labels ("k=v" each).
func sample(t *testing.T, f *dto.MetricFamily, labels ...string) *dto.Metric {
	t.Helper()
	for _, m := range f.GetMetric() {
		var got []string
		for _, lp := range m.GetLabel() {
			got = append(got, lp.GetName()+"="+lp.GetValue())
		}
		slices.Sort(got)
		want := slices.Clone(labels)
		slices.Sort(want)
		if slices.Equal(got, want) {
			return m
		}
	}
	t.Fatalf("%s has no series %v: %v", f.GetName(), labels, f.GetMetric())
	return nil
}

// value is a gauge's or counter's value.
func value(m *dto.Metric) float64 {
	if m.Gauge != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestMetrics: GET /metrics answers Prometheus' text format (parsed here by
// Prometheus' own parser) on the socket, and on TCP with the token only; a
// cold create, a warm one (claimed from a pool), a miss and an exec move the
// series they should, against the real Engine.
func TestMetrics(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	port := freePort(t)
	const token = "metrics-token-8c2d"
	tokenFile := filepath.Join(e.home, "token")
	writeTokenFile(t, tokenFile, token, 0o600)
	d := e.startDaemon(binA, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--token-file", tokenFile)
	waitTCP(t, port)
	c := d.client
	ctx := ctxT(t, 3*time.Minute)

	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		text, err := c.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return parseMetrics(t, text)
	}

	// Before anything: every family is there, its series at zero.
	before := scrape()
	for _, name := range []string{"airlock_sandbox_create_seconds", "airlock_sandbox_ready_seconds"} {
		f := family(t, before, name, dto.MetricType_HISTOGRAM)
		for _, launch := range []string{"warm", "cold"} {
			for _, be := range []string{"docker", "kubernetes"} {
				if n := sample(t, f, "launch="+launch, "backend="+be).GetHistogram().GetSampleCount(); n != 0 {
					t.Errorf("a new daemon has %d in %s{launch=%s,backend=%s}, want 0", n, name, launch, be)
				}
			}
		}
	}
	for _, state := range []string{"pending", "ready", "stopped", "failed", "deleting", "deleted"} {
		sample(t, family(t, before, "airlock_sandboxes", dto.MetricType_GAUGE), "state="+state, "backend=docker")
	}
	for _, reason := range []string{"empty", "stale", "unhealthy", "disabled", "options"} {
		sample(t, family(t, before, "airlock_pool_misses_total", dto.MetricType_COUNTER), "reason="+reason)
	}
	for name, typ := range map[string]dto.MetricType{
		"airlock_sandbox_create_failures_total": dto.MetricType_COUNTER,
		"airlock_exec_start_seconds":            dto.MetricType_HISTOGRAM,
		"airlock_exec_start_failures_total":     dto.MetricType_COUNTER,
		"airlock_pool_claims_total":             dto.MetricType_COUNTER,
		"airlock_pool_sandboxes":                dto.MetricType_GAUGE,
		"airlock_pool_target":                   dto.MetricType_GAUGE,
		"airlock_pool_max":                      dto.MetricType_GAUGE,
		"airlock_pools":                         dto.MetricType_GAUGE,
		"airlock_event_store_bytes":             dto.MetricType_GAUGE,
		"airlock_events":                        dto.MetricType_GAUGE,
		"airlock_daemon_info":                   dto.MetricType_GAUGE,
		"process_open_fds":                      dto.MetricType_GAUGE,
		"process_max_fds":                       dto.MetricType_GAUGE,
		"process_resident_memory_bytes":         dto.MetricType_GAUGE,
		"process_start_time_seconds":            dto.MetricType_GAUGE,
	} {
		family(t, before, name, typ)
	}
	if v := value(sample(t, before["airlock_pool_max"])); v != 8 {
		t.Errorf("airlock_pool_max %v, want 8 (runtime.pool_max's default)", v)
	}
	if v := value(sample(t, before["process_open_fds"])); v < 3 {
		t.Errorf("process_open_fds %v, want the daemon's open files (its store, socket, listener, …)", v)
	}
	if v := value(sample(t, before["process_resident_memory_bytes"])); v < 1<<20 {
		t.Errorf("process_resident_memory_bytes %v, want the daemon's resident memory", v)
	}
	if v := value(sample(t, before["airlock_event_store_bytes"])); v <= 0 {
		t.Errorf("airlock_event_store_bytes %v, want the size of the store's file", v)
	}
	if start := value(sample(t, before["process_start_time_seconds"])); start < float64(time.Now().Add(-time.Minute).Unix()) || start > float64(time.Now().Unix()+1) {
		t.Errorf("process_start_time_seconds %v, want the daemon's start, just now", start)
	}

	// A cold create (an up sandbox) and an exec in it.
	id := e.createReady(ctx, c, "").ID
	ex, err := c.Exec(ctx, id, &client.ExecRequest{Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitExec(ctx, id, ex.ID); err != nil {
		t.Fatal(err)
	}

	// A warm create: a run claims the pool's parked sandbox; and a run of
	// the same manifest with no_pool, a miss (disabled), cold.
	text := strings.ReplaceAll("[sandbox]\nimage = \"{{image}}\"\nnetwork = \"none\"\n", "{{image}}", e.image)
	src := client.ManifestSource{ManifestTOML: text, ProjectDir: e.project}
	if _, err := c.WarmPool(ctx, &client.WarmRequest{ManifestSource: src, Size: 1}); err != nil {
		t.Fatal(err)
	}
	mid := scrape()
	if v := value(sample(t, mid["airlock_pool_sandboxes"], "state=ready")); v != 1 {
		t.Errorf("airlock_pool_sandboxes{state=ready} %v with a pool of 1 warmed, want 1", v)
	}
	if v := value(sample(t, mid["airlock_pool_target"])); v != 1 {
		t.Errorf("airlock_pool_target %v, want 1", v)
	}
	if v := value(sample(t, mid["airlock_pools"])); v != 1 {
		t.Errorf("airlock_pools %v, want 1", v)
	}
	var runs []string
	for _, noPool := range []bool{false, true} {
		sb, err := c.Create(ctx, &client.CreateRequest{Kind: "run", Start: true, Command: []string{"sleep", "1"}, NoPool: noPool, ManifestSource: src})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, sb.ID)
		if end, ev := waitState(t, c, sb.ID, time.Minute, client.StateStopped, client.StateFailed); end.State != client.StateStopped {
			t.Fatalf("run %s (no_pool %v) is %s (%s)\nevents:\n%s", sb.ID, noPool, end.State, ev.Reason, dumpEvents(c, sb.ID))
		}
	}
	if !slices.Contains(kinds(allEvents(t, c, runs[0])), "pool.claimed") {
		t.Fatalf("the first run took no parked sandbox:\n%s", dumpEvents(c, runs[0]))
	}

	after := scrape()
	for _, name := range []string{"airlock_sandbox_create_seconds", "airlock_sandbox_ready_seconds"} {
		f := family(t, after, name, dto.MetricType_HISTOGRAM)
		cold := sample(t, f, "launch=cold", "backend=docker").GetHistogram()
		warm := sample(t, f, "launch=warm", "backend=docker").GetHistogram()
		if cold.GetSampleCount() != 2 || warm.GetSampleCount() != 1 {
			t.Errorf("%s: %d cold, %d warm; want 2 cold (the up sandbox, the no_pool run) and 1 warm (the claimed run)", name, cold.GetSampleCount(), warm.GetSampleCount())
		}
		if cold.GetSampleSum() <= 0 || warm.GetSampleSum() <= 0 {
			t.Errorf("%s: cold sum %v, warm sum %v; want both > 0", name, cold.GetSampleSum(), warm.GetSampleSum())
		}
		checkBuckets(t, name+"{launch=cold}", cold)
		checkBuckets(t, name+"{launch=warm}", warm)
	}
	started := sample(t, after["airlock_sandbox_create_seconds"], "launch=warm", "backend=docker").GetHistogram().GetSampleSum()
	ready := sample(t, after["airlock_sandbox_ready_seconds"], "launch=warm", "backend=docker").GetHistogram().GetSampleSum()
	if started > ready {
		t.Errorf("the warm create was started after %v s, ready after %v s: started comes first", started, ready)
	}
	if v := value(sample(t, after["airlock_sandbox_create_failures_total"], "launch=cold", "backend=docker")); v != 0 {
		t.Errorf("airlock_sandbox_create_failures_total{launch=cold} %v, want 0", v)
	}
	execs := sample(t, family(t, after, "airlock_exec_start_seconds", dto.MetricType_HISTOGRAM), "backend=docker").GetHistogram()
	if execs.GetSampleCount() != 1 || execs.GetSampleSum() <= 0 {
		t.Errorf("exec starts: %d, %v s; want 1, > 0", execs.GetSampleCount(), execs.GetSampleSum())
	}
	checkBuckets(t, "airlock_exec_start_seconds", execs)
	if v := value(sample(t, after["airlock_pool_claims_total"])); v != 1 {
		t.Errorf("airlock_pool_claims_total %v, want 1", v)
	}
	if v := value(sample(t, after["airlock_pool_misses_total"], "reason=disabled")); v != 1 {
		t.Errorf("airlock_pool_misses_total{reason=disabled} %v, want 1 (the no_pool run)", v)
	}
	states := after["airlock_sandboxes"]
	if v := value(sample(t, states, "state=ready", "backend=docker")); v != 1 {
		t.Errorf("airlock_sandboxes{state=ready} %v, want 1 (the up sandbox)", v)
	}
	if v := value(sample(t, states, "state=stopped", "backend=docker")); v != 2 {
		t.Errorf("airlock_sandboxes{state=stopped} %v, want 2 (the runs)", v)
	}
	if b, a := value(sample(t, before["airlock_events"])), value(sample(t, after["airlock_events"])); a <= b || a < 10 {
		t.Errorf("airlock_events %v, then %v; want more after three sandboxes and an exec", b, a)
	}

	// On TCP: the token is needed, as for every route.
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	if code, body := get(t, url, ""); code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"unauthorized"`) {
		t.Errorf("GET /metrics on TCP without the token: %d %s, want 401 unauthorized", code, body)
	}
	code, body := get(t, url, "Bearer "+token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics on TCP with the token: %d %s", code, body)
	}
	parseMetrics(t, body)
	tc := client.NewTCP("127.0.0.1:"+strconv.Itoa(port), token)
	if _, err := tc.Metrics(ctx); err != nil {
		t.Errorf("client.Metrics on TCP: %v", err)
	}
	if _, err := client.NewTCP("127.0.0.1:"+strconv.Itoa(port), "wrong").Metrics(ctx); apiReason(err) != client.ReasonUnauthorized {
		t.Errorf("client.Metrics on TCP with a wrong token: %v, want unauthorized", err)
	}
	code, ctype := rawGetHeader(t, e.paths.Socket(), "/metrics", "Content-Type")
	if code != http.StatusOK || ctype != client.MetricsContentType {
		t.Errorf("GET /metrics: %d, Content-Type %q; want 200, %q", code, ctype, client.MetricsContentType)
	}

	if _, err := c.DrainPools(ctx, &client.DrainRequest{All: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(runs, id) {
		if _, err := c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitState(t, c, id, time.Minute, client.StateDeleted)
	}
	if v := value(sample(t, scrape()["airlock_sandboxes"], "state=deleted", "backend=docker")); v != 3 {
		t.Errorf("airlock_sandboxes{state=deleted} %v after three deletes, want 3 (their history is kept)", v)
	}
	testenv.AssertNoLeftovers(t, e.docker, labelProject, e.project)
}

// checkBuckets checks a histogram's buckets: cumulative, the last one +Inf
// (implied by the parser: it is the sample count) at least the others.
func checkBuckets(t *testing.T, name string, h *dto.Histogram) {
	t.Helper()
	var last uint64
	if len(h.GetBucket()) < 5 {
		t.Errorf("%s has %d buckets, want several", name, len(h.GetBucket()))
	}
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < last {
			t.Errorf("%s: bucket le=%v holds %d, fewer than the one before (%d)", name, b.GetUpperBound(), b.GetCumulativeCount(), last)
		}
		last = b.GetCumulativeCount()
	}
	if last > h.GetSampleCount() {
		t.Errorf("%s: the last bucket holds %d, more than the count %d", name, last, h.GetSampleCount())
	}
}

// rawGetHeader does a GET on the daemon's socket and returns the status and
// one header of the answer.
func rawGetHeader(t *testing.T, sock, path, header string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t, 10*time.Second), http.MethodGet, "http://airlockd"+path, nil)
	resp, err := socketClient(sock).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(header)
}
