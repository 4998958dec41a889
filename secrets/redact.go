package secrets

import (
	"bytes"
	"io"
	"sort"
	"sync"
)

// Redactor masks known secret values in text: the control daemon's and the CLI's
// own log lines pass through it. Values shorter than MinRedactLen are not tracked
// (masking "1" would garble every number).
type Redactor struct {
	mu     sync.RWMutex
	values map[string]int // value → how many holders
}

// MinRedactLen is the shortest value a Redactor masks.
const MinRedactLen = 4

// Mask replaces a secret value.
const Mask = "********"

// NewRedactor returns an empty redactor.
func NewRedactor() *Redactor { return &Redactor{values: map[string]int{}} }

// Add registers values; Remove forgets them (counted, so two holders of one value
// keep it masked until both are gone).
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) >= MinRedactLen {
			r.values[v]++
		}
	}
}

// Remove forgets values registered with Add.
func (r *Redactor) Remove(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if n, ok := r.values[v]; ok {
			if n <= 1 {
				delete(r.values, v)
			} else {
				r.values[v] = n - 1
			}
		}
	}
}

// Redact returns b with every known value masked, longest values first.
func (r *Redactor) Redact(b []byte) []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.values) == 0 {
		return b
	}
	vals := make([]string, 0, len(r.values))
	for v := range r.values {
		vals = append(vals, v)
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	for _, v := range vals {
		b = bytes.ReplaceAll(b, []byte(v), []byte(Mask))
	}
	return b
}

// Writer returns a writer that masks known values in each Write before passing it
// on. Each Write should be whole lines (log/slog writes one record per call).
func (r *Redactor) Writer(w io.Writer) io.Writer { return &redactWriter{r: r, w: w} }

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.r.Redact(append([]byte(nil), p...))); err != nil {
		return 0, err
	}
	return len(p), nil
}
