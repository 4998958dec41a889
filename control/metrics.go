package control

import (
	"context"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/control/pool"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/engine"
)

// The daemon's metrics (GET /metrics, docs/metrics.md): what it counts as it
// goes (creates and their launch, pool claims and misses, exec starts) and
// what it reads when asked (sandboxes by state, the pools, the store). The
// API layer (api_metrics.go) writes them in Prometheus' text format and adds
// the process's own figures.

// MetricFamily is one family of the daemon's metrics: its name, help, type
// ("counter", "gauge" or "histogram") and series.
type MetricFamily struct {
	Name, Help, Type string
	Series           []MetricSeries
}

// MetricSeries is one series of a family: its labels in order, and its value,
// or its histogram.
type MetricSeries struct {
	Labels    []MetricLabel
	Value     float64
	Histogram *HistogramValue
}

// MetricLabel is one label of a series.
type MetricLabel struct{ Name, Value string }

// HistogramValue is a histogram at one moment: the upper bounds of its
// buckets (ascending, +Inf left out), the cumulative count of each, and the
// count and sum of every observation.
type HistogramValue struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// The buckets of the histograms, in seconds: a warm create takes tens of
// milliseconds, a cold one up to minutes (a pull); an exec starts in
// milliseconds.
var (
	createBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	execBuckets   = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// The label values of the series, each one always written (at zero before
// it happened), so that a rate or a ratio has both sides from the start.
var (
	metricLaunches    = []string{"warm", "cold"}
	metricBackends    = []string{backendDocker, backendKubernetes}
	metricMissReasons = []string{pool.MissEmpty, pool.MissStale, pool.MissUnhealthy, pool.MissDisabled, pool.MissOptions}
)

// The backend label's values.
const (
	backendDocker     = "docker"
	backendKubernetes = "kubernetes"
)

// maxCreating bounds the creates the daemon times at once (a sandbox created
// and never started nor deleted holds one); those past it are not timed.
const maxCreating = 4096

// maxMissReasons bounds the distinct reasons of pool misses counted; more
// are counted as "other".
const maxMissReasons = 16

// histogram counts observations into fixed buckets.
type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound ≥ v: le is inclusive
	h.counts[i]++
	h.sum += v
}

func (h *histogram) value() *HistogramValue {
	out := &HistogramValue{Bounds: h.bounds, Counts: make([]uint64, len(h.bounds)), Sum: h.sum}
	var cum uint64
	for i, n := range h.counts {
		cum += n
		if i < len(h.bounds) {
			out.Counts[i] = cum
		}
	}
	out.Count = cum
	return out
}

// createTimer times one create: from its request to its sandbox.started and
// its sandbox.ready, less the time a sandbox created without start waited for
// its resume.
type createTimer struct {
	backend string
	warm    bool          // claimed from a warm pool
	started bool          // sandbox.started was timed
	since   time.Time     // the start of the part being timed; zero while waiting for a resume
	work    time.Duration // timed before sandbox.created
}

// launchKey names the series of a create.
type launchKey struct{ launch, backend string }

// metrics counts what the daemon does, as it does it. Its observe sees every
// event the daemon records; starting and execStarted are told the rest.
type metrics struct {
	// backendOf names the backend of a sandbox (a label value).
	backendOf func(id string) string

	mu             sync.Mutex
	creating       map[string]*createTimer
	creates        map[launchKey]*histogram // to sandbox.started
	readies        map[launchKey]*histogram // to sandbox.ready
	createFailures map[launchKey]uint64
	claims         uint64
	misses         map[string]uint64
	execStarts     map[string]*histogram // by backend
	execFailures   map[string]uint64     // by backend
}

func newMetrics(backendOf func(id string) string) *metrics {
	m := &metrics{backendOf: backendOf, creating: map[string]*createTimer{}, creates: map[launchKey]*histogram{}, readies: map[launchKey]*histogram{},
		createFailures: map[launchKey]uint64{}, misses: map[string]uint64{}, execStarts: map[string]*histogram{}, execFailures: map[string]uint64{}}
	for _, be := range metricBackends {
		for _, l := range metricLaunches {
			m.creates[launchKey{l, be}] = newHistogram(createBuckets)
			m.readies[launchKey{l, be}] = newHistogram(createBuckets)
			m.createFailures[launchKey{l, be}] = 0
		}
		m.execStarts[be] = newHistogram(execBuckets)
		m.execFailures[be] = 0
	}
	for _, r := range metricMissReasons {
		m.misses[r] = 0
	}
	return m
}

// observe is told of each event the daemon recorded.
func (m *metrics) observe(ev store.Event) {
	id := ev.SandboxID
	switch ev.Kind {
	case "sandbox.preparing":
		// The first event after sandbox.accepted, written by the create
		// as it hands the work on: the create is timed from now.
		be := m.backendOf(id)
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.creating[id]; !ok && len(m.creating) < maxCreating {
			m.creating[id] = &createTimer{backend: be, since: time.Now()}
		}
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch ev.Kind {
	case "sandbox.created":
		if ct := m.creating[id]; ct != nil && !ct.since.IsZero() {
			// Made: the start (now, or at a resume) is timed from its beginning.
			ct.work += time.Since(ct.since)
			ct.since = time.Time{}
		}
	case "pool.claimed":
		m.claims++
		if ct := m.creating[id]; ct != nil {
			ct.warm = true
		}
	case "pool.missed":
		reason := ev.Reason
		if _, ok := m.misses[reason]; !ok && (reason == "" || len(m.misses) >= maxMissReasons) {
			reason = "other"
		}
		m.misses[reason]++
	case "sandbox.started":
		if ct := m.creating[id]; ct != nil && !ct.started {
			ct.started = true
			m.creates[ct.key()].observe(ct.elapsed().Seconds())
		}
	case "sandbox.ready":
		if ct := m.creating[id]; ct != nil {
			delete(m.creating, id)
			m.readies[ct.key()].observe(ct.elapsed().Seconds())
		}
	case "sandbox.failed":
		if ct := m.creating[id]; ct != nil {
			delete(m.creating, id)
			m.createFailures[ct.key()]++
		}
	case "sandbox.stopped", "sandbox.deleting", "sandbox.deleted":
		delete(m.creating, id) // never ready: not a create that ended
	}
}

// elapsed is the create's time so far.
func (ct *createTimer) elapsed() time.Duration {
	d := ct.work
	if !ct.since.IsZero() {
		d += time.Since(ct.since)
	}
	return d
}

func (ct *createTimer) key() launchKey {
	if ct.warm {
		return launchKey{"warm", ct.backend}
	}
	return launchKey{"cold", ct.backend}
}

// starting is told that a start of sandbox id begins (the create's own, or
// a resume of one created without start).
func (m *metrics) starting(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ct := m.creating[id]; ct != nil && ct.since.IsZero() {
		ct.since = time.Now()
	}
}

// execStarted records how long an exec on a backend took to start (from
// the daemon taking it in to its process running), or that it could not.
func (m *metrics) execStarted(backend string, d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.execFailures[backend]++
		return
	}
	m.execStarts[backend].observe(d.Seconds())
}

// backendName is the label value of the backend at ep.
func backendName(ep engine.Endpoint) string {
	if ep.IsKubernetes() {
		return backendKubernetes
	}
	return backendDocker
}

// backendOf names the backend sandbox id is on.
func (s *Service) backendOf(id string) string {
	rec, err := s.store.Get(id)
	if err != nil {
		return backendName(s.rt.Location())
	}
	return backendName(s.endpointOf(rec))
}

// Metrics returns the daemon's metrics now (GET /metrics).
func (s *Service) Metrics(ctx context.Context) ([]MetricFamily, error) {
	recs, err := s.store.List(store.Filter{IncludeDeleted: true})
	if err != nil {
		return nil, err
	}
	byState := map[MetricLabel]int{}
	var events uint64
	for _, r := range recs {
		byState[MetricLabel{r.State, backendName(s.endpointOf(r))}]++
		events += r.LastSeq
	}
	var fams []MetricFamily
	fams = append(fams, s.metrics.families()...)
	states := MetricFamily{Name: "airlock_sandboxes", Type: "gauge",
		Help: "Sandboxes the daemon's store holds, by state and backend (deleted ones until their history is purged; parked sandboxes of warm pools are not here)."}
	for _, be := range metricBackends {
		for _, st := range store.States {
			states.Series = append(states.Series, MetricSeries{Labels: []MetricLabel{{"state", st}, {"backend", be}}, Value: float64(byState[MetricLabel{st, be}])})
		}
	}
	fams = append(fams, states)
	fams = append(fams, s.poolFamilies()...)
	var size float64
	if fi, err := os.Stat(s.store.Path()); err == nil {
		size = float64(fi.Size())
	}
	fams = append(fams,
		gauge("airlock_event_store_bytes", "Size of the daemon's store (its bbolt file: records, events and exec records) in bytes.", size),
		gauge("airlock_events", "Events the store holds, of every sandbox it keeps.", float64(events)))
	return fams, ctx.Err()
}

// gauge is a family of one gauge without labels.
func gauge(name, help string, v float64) MetricFamily {
	return MetricFamily{Name: name, Help: help, Type: "gauge", Series: []MetricSeries{{Value: v}}}
}

// poolFamilies are the warm pools' figures now.
func (s *Service) poolFamilies() []MetricFamily {
	list, _, max := s.Pools()
	var ready, starting, target int
	for _, p := range list {
		ready += p.Ready
		starting += p.Starting
		target += p.Size
	}
	parked := MetricFamily{Name: "airlock_pool_sandboxes", Type: "gauge",
		Help: "Sandboxes of the warm pools: parked and healthy (ready), or being made (starting).",
		Series: []MetricSeries{{Labels: []MetricLabel{{"state", "ready"}}, Value: float64(ready)},
			{Labels: []MetricLabel{{"state", "starting"}}, Value: float64(starting)}}}
	return []MetricFamily{parked,
		gauge("airlock_pool_target", "Sandboxes the warm pools keep parked together (the sum of their sizes).", float64(target)),
		gauge("airlock_pool_max", "runtime.pool_max: the most sandboxes all warm pools may hold together.", float64(max)),
		gauge("airlock_pools", "Warm pools the daemon keeps.", float64(len(list)))}
}

// families are the counted figures.
func (m *metrics) families() []MetricFamily {
	m.mu.Lock()
	defer m.mu.Unlock()
	creates := MetricFamily{Name: "airlock_sandbox_create_seconds", Type: "histogram",
		Help: "Time from a create request to its sandbox.started (less the time a sandbox created without start waited for its resume), by launch (warm: claimed from a pool) and backend."}
	readies := MetricFamily{Name: "airlock_sandbox_ready_seconds", Type: "histogram",
		Help: "Time from a create request to its sandbox.ready (less the time a sandbox created without start waited for its resume), by launch and backend."}
	failures := MetricFamily{Name: "airlock_sandbox_create_failures_total", Type: "counter",
		Help: "Creates whose sandbox failed before it was ready, by launch and backend."}
	execs := MetricFamily{Name: "airlock_exec_start_seconds", Type: "histogram",
		Help: "Time from the daemon taking an API exec in to its process running in the sandbox, by backend."}
	execFailures := MetricFamily{Name: "airlock_exec_start_failures_total", Type: "counter",
		Help: "API execs that could not start, by backend."}
	for _, be := range metricBackends {
		for _, l := range metricLaunches {
			k := launchKey{l, be}
			labels := []MetricLabel{{"launch", l}, {"backend", be}}
			creates.Series = append(creates.Series, MetricSeries{Labels: labels, Histogram: m.creates[k].value()})
			readies.Series = append(readies.Series, MetricSeries{Labels: labels, Histogram: m.readies[k].value()})
			failures.Series = append(failures.Series, MetricSeries{Labels: labels, Value: float64(m.createFailures[k])})
		}
		labels := []MetricLabel{{"backend", be}}
		execs.Series = append(execs.Series, MetricSeries{Labels: labels, Histogram: m.execStarts[be].value()})
		execFailures.Series = append(execFailures.Series, MetricSeries{Labels: labels, Value: float64(m.execFailures[be])})
	}
	claims := MetricFamily{Name: "airlock_pool_claims_total", Type: "counter",
		Help: "Creates that took a parked sandbox of a warm pool.", Series: []MetricSeries{{Value: float64(m.claims)}}}
	misses := MetricFamily{Name: "airlock_pool_misses_total", Type: "counter",
		Help: "Creates of a manifest with a warm pool that did not take a parked sandbox, by reason (docs/pool.md)."}
	reasons := make([]string, 0, len(m.misses))
	for r := range m.misses {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		misses.Series = append(misses.Series, MetricSeries{Labels: []MetricLabel{{"reason", r}}, Value: float64(m.misses[r])})
	}
	return []MetricFamily{creates, readies, failures, execs, execFailures, claims, misses}
}
