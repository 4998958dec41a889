package control

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/airlock-dev/airlock/control/store"
)

// parseText parses the text format with Prometheus' own parser.
func parseText(t *testing.T, fams []MetricFamily) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	writeMetrics(&buf, fams)
	var p expfmt.TextParser
	out, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("not Prometheus' text format: %v\n%s", err, buf.String())
	}
	return out
}

// seriesOf is the series of f with labels (name=value each, in f's order).
func seriesOf(t *testing.T, f *dto.MetricFamily, labels ...string) *dto.Metric {
	t.Helper()
	for _, m := range f.GetMetric() {
		var got []string
		for _, lp := range m.GetLabel() {
			got = append(got, lp.GetName()+"="+lp.GetValue())
		}
		if strings.Join(got, ",") == strings.Join(labels, ",") {
			return m
		}
	}
	t.Fatalf("%s has no series %v", f.GetName(), labels)
	return nil
}

// TestMetricsObserve: the create timers follow the events a sandbox's life
// records: a create is timed to its start and its ready, without the wait
// for a resume; a claim makes it warm; a failure before ready is counted; a
// stop or delete before ready drops it; misses count by reason, bounded.
func TestMetricsObserve(t *testing.T) {
	m := newMetrics(func(id string) string {
		if strings.HasPrefix(id, "k") {
			return backendKubernetes
		}
		return backendDocker
	})
	ev := func(id, kind string) { m.observe(store.Event{SandboxID: id, Kind: kind}) }

	// Cold, created without start: the wait for its resume is not timed.
	ev("cold", "sandbox.preparing")
	ev("cold", "sandbox.created")
	time.Sleep(300 * time.Millisecond) // the client's wait before its resume
	m.starting("cold")
	ev("cold", "sandbox.started")
	ev("cold", "sandbox.ready")
	// Warm, on Kubernetes.
	ev("kwarm", "sandbox.preparing")
	ev("kwarm", "sandbox.created")
	ev("kwarm", "pool.claimed")
	m.starting("kwarm")
	ev("kwarm", "sandbox.started")
	ev("kwarm", "sandbox.ready")
	// A resume of a ready sandbox is no create.
	m.starting("cold")
	ev("cold", "sandbox.started")
	ev("cold", "sandbox.ready")
	// Failed after its start; stopped before ready; deleted while pending.
	for _, id := range []string{"failed", "stopped", "deleted"} {
		ev(id, "sandbox.preparing")
		ev(id, "sandbox.created")
	}
	m.starting("failed")
	ev("failed", "sandbox.started")
	ev("failed", "sandbox.failed")
	m.starting("stopped")
	ev("stopped", "sandbox.stopped")
	ev("deleted", "sandbox.deleting")
	ev("deleted", "sandbox.deleted")
	if len(m.creating) != 0 {
		t.Errorf("creates still timed: %v", m.creating)
	}
	// Misses: the known reasons, and others up to a bound.
	m.observe(store.Event{SandboxID: "x", Kind: "pool.missed", Reason: "empty"})
	for i := range 40 {
		m.observe(store.Event{SandboxID: "x", Kind: "pool.missed", Reason: "new-" + string(rune('a'+i))})
	}
	m.observe(store.Event{SandboxID: "x", Kind: "pool.missed"})

	fams := parseText(t, m.families())
	hist := func(name, launch, be string) *dto.Histogram {
		return seriesOf(t, fams[name], "launch="+launch, "backend="+be).GetHistogram()
	}
	// To its start: "cold" and "failed" (started, then failed); to ready: "cold".
	for name, want := range map[string]uint64{"airlock_sandbox_create_seconds": 2, "airlock_sandbox_ready_seconds": 1} {
		cold := hist(name, "cold", backendDocker)
		if cold.GetSampleCount() != want || cold.GetSampleSum() >= 0.25 {
			t.Errorf("%s{cold,docker}: %d, %v s; want %d, the wait for the resume (0.3 s) left out", name, cold.GetSampleCount(), cold.GetSampleSum(), want)
		}
		if n := hist(name, "warm", backendKubernetes).GetSampleCount(); n != 1 {
			t.Errorf("%s{warm,kubernetes}: %d, want 1", name, n)
		}
		if n := hist(name, "warm", backendDocker).GetSampleCount(); n != 0 {
			t.Errorf("%s{warm,docker}: %d, want 0", name, n)
		}
	}
	if v := seriesOf(t, fams["airlock_sandbox_create_failures_total"], "launch=cold", "backend=docker").GetCounter().GetValue(); v != 1 {
		t.Errorf("create failures %v, want 1", v)
	}
	if v := fams["airlock_pool_claims_total"].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("claims %v, want 1", v)
	}
	misses := fams["airlock_pool_misses_total"]
	if n := len(misses.GetMetric()); n != maxMissReasons+1 {
		t.Errorf("%d reasons of misses, want %d (then other)", n, maxMissReasons+1)
	}
	if v := seriesOf(t, misses, "reason=empty").GetCounter().GetValue(); v != 1 {
		t.Errorf("misses{empty} %v, want 1", v)
	}
	if v := seriesOf(t, misses, "reason=other").GetCounter().GetValue(); v < 2 {
		t.Errorf("misses{other} %v, want the reasons past the bound and the empty one", v)
	}

	// Exec starts: a failure is counted, not timed.
	m.execStarted(backendDocker, 3*time.Millisecond, nil)
	m.execStarted(backendDocker, 0, os.ErrNotExist)
	fams = parseText(t, m.families())
	h := seriesOf(t, fams["airlock_exec_start_seconds"], "backend=docker").GetHistogram()
	if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-0.003) > 1e-9 {
		t.Errorf("exec starts %d, %v s; want 1, 0.003", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 0.003 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("exec start bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if v := seriesOf(t, fams["airlock_exec_start_failures_total"], "backend=docker").GetCounter().GetValue(); v != 1 {
		t.Errorf("exec start failures %v, want 1", v)
	}
}

// TestWriteMetrics: label values and help texts are escaped, values written
// as the format reads them (+Inf, a bucket's bound inclusive).
func TestWriteMetrics(t *testing.T) {
	h := newHistogram([]float64{0.5, 1})
	for _, v := range []float64{0.5, 0.7, 3} {
		h.observe(v)
	}
	fams := parseText(t, []MetricFamily{
		{Name: "x_info", Type: "gauge", Help: "a help\nwith a \\ and a newline",
			Series: []MetricSeries{{Labels: []MetricLabel{{"v", "a \"quoted\"\nvalue \\ here"}}, Value: 1}}},
		{Name: "x_inf", Type: "gauge", Help: "infinite", Series: []MetricSeries{{Value: math.Inf(1)}}},
		{Name: "x_seconds", Type: "histogram", Help: "a histogram", Series: []MetricSeries{{Labels: []MetricLabel{{"k", "v"}}, Histogram: h.value()}}},
	})
	if got := fams["x_info"].GetHelp(); got != "a help\nwith a \\ and a newline" {
		t.Errorf("help %q", got)
	}
	if got := fams["x_info"].GetMetric()[0].GetLabel()[0].GetValue(); got != "a \"quoted\"\nvalue \\ here" {
		t.Errorf("label value %q", got)
	}
	if got := fams["x_inf"].GetMetric()[0].GetGauge().GetValue(); !math.IsInf(got, 1) {
		t.Errorf("+Inf read back as %v", got)
	}
	hv := seriesOf(t, fams["x_seconds"], "k=v").GetHistogram()
	if hv.GetSampleCount() != 3 || hv.GetSampleSum() != 4.2 {
		t.Errorf("histogram count %d sum %v, want 3, 4.2", hv.GetSampleCount(), hv.GetSampleSum())
	}
	var counts []uint64
	for _, b := range hv.GetBucket() {
		counts = append(counts, b.GetCumulativeCount())
	}
	if len(counts) < 2 || counts[0] != 1 || counts[1] != 2 {
		t.Errorf("buckets %v, want le=0.5: 1 (inclusive), le=1: 2", counts)
	}
}

// TestProcessFamilies: the process's figures read from a procfs, and none
// where there is no procfs.
func TestProcessFamilies(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"self/statm":  "2000 300 100 1 0 500 0\n",
		"self/stat":   "4242 (airlock (d) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 12345 100000 300 18446744073709551615\n",
		"self/limits": "Limit                     Soft Limit           Hard Limit           Units\nMax cpu time              unlimited            unlimited            seconds\nMax open files            1024                 4096                 files\n",
		"stat":        "cpu  1 2 3\nbtime 1700000000\nprocesses 9\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, fd := range []string{"0", "1", "2", "7"} {
		if err := os.MkdirAll(filepath.Join(root, "self", "fd", fd), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	page := float64(os.Getpagesize())
	fams := parseText(t, processFamilies(root))
	for name, want := range map[string]float64{
		"process_open_fds":              4,
		"process_max_fds":               1024,
		"process_virtual_memory_bytes":  2000 * page,
		"process_resident_memory_bytes": 300 * page,
		"process_cpu_seconds_total":     3,
		"process_start_time_seconds":    1700000000 + 123.45,
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("no %s", name)
			continue
		}
		m := f.GetMetric()[0]
		got := m.GetGauge().GetValue()
		if m.Counter != nil {
			got = m.GetCounter().GetValue()
		}
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
	if fams := processFamilies(filepath.Join(root, "none")); len(fams) != 0 {
		t.Errorf("without a procfs: %d families, want none", len(fams))
	}
}
