package control

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/client"
)

// metrics answers GET /metrics: the daemon's metrics (Service.Metrics) and
// its process's, in Prometheus' text exposition format 0.0.4
// (docs/metrics.md). On TCP it needs the token, as every route does.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	var fams []MetricFamily
	if s.svc != nil {
		var err error
		if fams, err = s.svc.Metrics(r.Context()); err != nil {
			writeError(w, err)
			return
		}
	}
	fams = append(fams, s.daemonFamilies()...)
	var buf bytes.Buffer
	writeMetrics(&buf, fams)
	w.Header().Set("Content-Type", client.MetricsContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// daemonFamilies are the daemon's build and its process's figures, read from
// /proc/self (where there is none, only the build).
func (s *server) daemonFamilies() []MetricFamily {
	fams := []MetricFamily{{Name: "airlock_daemon_info", Type: "gauge", Help: "The daemon's version and build, as labels; the value is 1.",
		Series: []MetricSeries{{Labels: []MetricLabel{{"version", s.opts.Version}, {"build_id", s.opts.BuildID}}, Value: 1}}}}
	return append(fams, processFamilies("/proc")...)
}

// processFamilies are the process's figures under the names Prometheus'
// client libraries give them, read from procfs at root; one that cannot be
// read is left out.
func processFamilies(root string) []MetricFamily {
	var fams []MetricFamily
	if fds, err := os.ReadDir(root + "/self/fd"); err == nil {
		fams = append(fams, gauge("process_open_fds", "Open file descriptors of the daemon.", float64(len(fds))))
	}
	if max, ok := maxOpenFiles(root); ok {
		fams = append(fams, gauge("process_max_fds", "The most file descriptors the daemon may open (its soft limit).", max))
	}
	page := float64(os.Getpagesize())
	if f := procFields(root + "/self/statm"); len(f) >= 2 {
		if vsz, err := strconv.ParseFloat(f[0], 64); err == nil {
			fams = append(fams, gauge("process_virtual_memory_bytes", "Virtual memory size of the daemon in bytes.", vsz*page))
		}
		if rss, err := strconv.ParseFloat(f[1], 64); err == nil {
			fams = append(fams, gauge("process_resident_memory_bytes", "Resident memory size of the daemon in bytes.", rss*page))
		}
	}
	// /proc/self/stat: its fields after the command's name, which is in
	// parentheses and may hold spaces; utime and stime are the 14th and
	// 15th fields, starttime the 22nd, in clock ticks (100 a second on
	// Linux: USER_HZ).
	const hz = 100
	b, err := os.ReadFile(root + "/self/stat")
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 {
		f := strings.Fields(string(b[i+1:]))
		at := func(n int) (float64, bool) { // the nth field of the whole line
			if n-3 >= len(f) {
				return 0, false
			}
			v, err := strconv.ParseFloat(f[n-3], 64)
			return v, err == nil
		}
		if ut, ok := at(14); ok {
			if st, ok := at(15); ok {
				fams = append(fams, MetricFamily{Name: "process_cpu_seconds_total", Type: "counter",
					Help: "CPU time the daemon used, user and system, in seconds.", Series: []MetricSeries{{Value: (ut + st) / hz}}})
			}
		}
		if start, ok := at(22); ok {
			if boot, ok := bootTime(root); ok {
				fams = append(fams, gauge("process_start_time_seconds", "When the daemon started, in seconds since the Unix epoch.", boot+start/hz))
			}
		}
	}
	return fams
}

// procFields are the fields of a one-line procfs file.
func procFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// maxOpenFiles is the soft limit of open files in /proc/self/limits.
func maxOpenFiles(root string) (float64, bool) {
	b, err := os.ReadFile(root + "/self/limits")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		if f[0] == "unlimited" {
			return math.Inf(1), true
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}

// bootTime is when the machine booted (btime of /proc/stat), in seconds
// since the Unix epoch.
func bootTime(root string) (float64, bool) {
	f, err := os.Open(root + "/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return t, err == nil
		}
	}
	return 0, false
}

// writeMetrics writes fams in Prometheus' text exposition format 0.0.4: for
// each family its HELP and TYPE lines, then one line a series (a histogram's
// buckets, le="+Inf" last, then its _sum and _count).
func writeMetrics(w io.Writer, fams []MetricFamily) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	for _, f := range fams {
		bw.WriteString("# HELP " + f.Name + " " + escapeHelp(f.Help) + "\n")
		bw.WriteString("# TYPE " + f.Name + " " + f.Type + "\n")
		for _, s := range f.Series {
			h := s.Histogram
			if h == nil {
				writeSample(bw, f.Name, s.Labels, "", "", s.Value)
				continue
			}
			for i, le := range h.Bounds {
				writeSample(bw, f.Name+"_bucket", s.Labels, "le", formatFloat(le), float64(h.Counts[i]))
			}
			writeSample(bw, f.Name+"_bucket", s.Labels, "le", "+Inf", float64(h.Count))
			writeSample(bw, f.Name+"_sum", s.Labels, "", "", h.Sum)
			writeSample(bw, f.Name+"_count", s.Labels, "", "", float64(h.Count))
		}
	}
}

// writeSample writes one line: name, labels (and extra="extraValue" when
// extra is not ""), value.
func writeSample(w *bufio.Writer, name string, labels []MetricLabel, extra, extraValue string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 || extra != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l.Name + `="` + escapeLabel(l.Value) + `"`)
		}
		if extra != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extra + `="` + extraValue + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteString(" " + formatFloat(v) + "\n")
}

// formatFloat writes a value as the format reads it: +Inf, -Inf, NaN, or
// Go's shortest decimal form.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// escapeHelp escapes a HELP text: backslash and newline.
var escapeHelp = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace

// escapeLabel escapes a label's value: backslash, double quote and newline.
var escapeLabel = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
