package secrets

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Redactor masks known secret values in text: the control daemon's and the CLI's
// own log lines pass through it (the daemon's before and after JSON encoding,
// see Handler). Values shorter than MinRedactLen are not tracked; see there.
type Redactor struct {
	mu     sync.RWMutex
	values map[string]int // value → how many holders
}

// MinRedactLen is the shortest value a Redactor masks, in bytes. Masking is a
// plain substring replacement over whole log lines and messages, so a value of
// one to three bytes would be found everywhere: "1" or "ab" inside every
// number, pid, timestamp, ID and word, garbling the log beyond use while
// hiding nothing (a value that short is guessed in a few thousand tries anyway).
// So shorter values are ignored, and `airlock secrets set` refuses to store
// them (ErrShortValue); docs/secrets.md says that host-environment values that
// short are not masked.
const MinRedactLen = 4

// ErrShortValue is a secret too short to be masked in airlock's output.
var ErrShortValue = fmt.Errorf("the value is shorter than %d bytes: airlock could not mask it in its output and logs "+
	"(a value that short appears inside every number and word), so it refuses to store it; use a longer secret", MinRedactLen)

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
