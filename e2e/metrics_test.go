package e2e

import (
	"context"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/airlock-dev/airlock/client"
)

// metricsManifest has a warm pool of one.
const metricsManifest = `
[sandbox]
image = "{{image}}"
network = "none"

[sandbox.pool]
size = 1
`

// TestDaemonMetrics: after a warm run (the pool's parked sandbox) and a cold
// one (--no-pool), `airlock daemon metrics` and GET /metrics on the daemon's
// socket answer Prometheus' text format (parsed by Prometheus' parser) with
// one create of each launch, a claim and a miss.
func TestDaemonMetrics(t *testing.T) {
	limit(t)
	e := newEnv(t, metricsManifest)
	t.Cleanup(func() { e.Run("pool", "drain") })
	e.MustRun("pool", "warm")
	if r := e.MustRun("--log-level", "debug", "run", "--", "true"); !strings.Contains(r.Stderr, "warm pool: hit") {
		t.Fatalf("the first run did not take the parked sandbox: %s", r)
	}
	e.MustRun("run", "--no-pool", "--", "true")

	parse := func(where, text string) map[string]*dto.MetricFamily {
		t.Helper()
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s is not Prometheus' text format: %v\n%s", where, err, text)
		}
		return fams
	}
	viaCLI := parse("airlock daemon metrics", e.MustRun("daemon", "metrics").Stdout)
	text, err := client.New(e.Socket()).Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	viaSocket := parse("GET /metrics", text)
	for where, fams := range map[string]map[string]*dto.MetricFamily{"airlock daemon metrics": viaCLI, "GET /metrics": viaSocket} {
		count := func(name string, labels ...string) float64 {
			t.Helper()
			f := fams[name]
			for _, m := range f.GetMetric() {
				var got []string
				for _, lp := range m.GetLabel() {
					got = append(got, lp.GetName()+"="+lp.GetValue())
				}
				if strings.Join(got, ",") != strings.Join(labels, ",") {
					continue
				}
				switch {
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
			t.Fatalf("%s: no %s%v", where, name, labels)
			return 0
		}
		if n := count("airlock_sandbox_create_seconds", "launch=warm", "backend=docker"); n != 1 {
			t.Errorf("%s: %v warm creates, want 1", where, n)
		}
		if n := count("airlock_sandbox_create_seconds", "launch=cold", "backend=docker"); n != 1 {
			t.Errorf("%s: %v cold creates, want 1", where, n)
		}
		if n := count("airlock_pool_claims_total"); n != 1 {
			t.Errorf("%s: %v claims, want 1", where, n)
		}
		if n := count("airlock_pool_misses_total", "reason=disabled"); n != 1 {
			t.Errorf("%s: %v misses (disabled), want 1", where, n)
		}
		if n := count("process_open_fds"); n <= 0 {
			t.Errorf("%s: process_open_fds %v", where, n)
		}
	}
}
