// Package benchdoc is what the benchmark commands share: their common flags
// and exit (Flags, Exit), a hermetic project to time airlock in (Project, and
// with the busybox test image, Busybox, whose WarmUp runs both paths once),
// many project dirs with a sandbox alive in each (Alive), timed commands and
// their samples (Timed, Time, Timings), waiting for a run's removal
// (Settled), the median and the figures' formats, and printing the figures
// and writing one section of docs/benchmarks.md, leaving the others alone.
package benchdoc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/paths"
)

// Row is one measure: what, the figure, and the target ("" for none).
type Row struct{ Measure, Result, Target string }

// Machine describes where the figures were taken.
func Machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs, Linux %s, %s", runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version())
}

// Write replaces (or appends) the "## title" section of doc with a table of rows
// between intro and notes; with doc "" (the figures recorded nowhere) it does
// nothing.
func Write(doc, title, intro string, rows []Row, notes string) error {
	if doc == "" {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	fmt.Fprintf(&b, "Recorded %s. %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), intro)
	b.WriteString("| measure | result | target |\n|---|---|---|\n")
	for _, r := range rows {
		t := r.Target
		if t == "" {
			t = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Measure, r.Result, t)
	}
	if notes != "" {
		b.WriteString("\n" + strings.TrimRight(notes, "\n") + "\n")
	}
	section := b.String()

	old, err := os.ReadFile(doc)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	text := string(old)
	if text == "" {
		text = "# Benchmarks\n\nFigures recorded by `make bench`; each section is written by its own script.\n"
	}
	lines := strings.SplitAfter(text, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		if strings.TrimRight(l, "\n") == "## "+title {
			start = i
			continue
		}
		if start >= 0 && strings.HasPrefix(l, "## ") {
			end = i
			break
		}
	}
	var out string
	if start < 0 {
		out = strings.TrimRight(text, "\n") + "\n\n" + section
	} else {
		rest := strings.Join(lines[end:], "")
		if rest != "" {
			section += "\n"
		}
		out = strings.Join(lines[:start], "") + section + rest
	}
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		return err
	}
	return paths.WriteFileAtomic(doc, []byte(out), 0o644)
}

// Median returns the median of ds (the upper one of an even count); ds is left
// as it is.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
