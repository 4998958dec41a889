package control

import (
	"bytes"
	"io"
	"sync"

	"github.com/airlock-dev/airlock/supervisor"
)

// endFilter passes what is written to it on to w up to the end marker of a
// nonce (supervisor.EndMarker), calls found with the marker's code, and drops
// what follows. The start of a possible marker split across writes is held
// back until the rest tells (flush writes what is held).
type endFilter struct {
	mu    sync.Mutex
	w     io.Writer
	nonce string
	start []byte
	held  []byte
	done  bool
	found func(supervisor.EndMark)
}

// markedEnd is the code of a run's end marker, whether it was sealed, and
// the status stream a sealed one carried.
type markedEnd struct {
	code   int
	sealed bool
	status []byte
}

// filtersFlushed reports whether no filter saw its marker.
func filtersFlushed(fs []*endFilter) bool {
	for _, f := range fs {
		f.mu.Lock()
		done := f.done
		f.mu.Unlock()
		if done {
			return false
		}
	}
	return true
}

func newEndFilter(w io.Writer, nonce string, found func(supervisor.EndMark)) *endFilter {
	return &endFilter{w: w, nonce: nonce, start: []byte(supervisor.EndMarkerStart(nonce)), found: found}
}

func (f *endFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if f.done {
		return n, nil
	}
	data := p
	if len(f.held) > 0 {
		data = append(f.held, p...)
		f.held = nil
	}
	for len(data) > 0 {
		i := bytes.IndexByte(data, f.start[0])
		if i < 0 {
			f.pass(data)
			return n, nil
		}
		f.pass(data[:i])
		rest := data[i:]
		switch {
		case len(rest) < len(f.start) && bytes.HasPrefix(f.start, rest),
			bytes.HasPrefix(rest, f.start) && !bytes.Contains(rest, []byte("\x1b\\")) && len(rest) < supervisor.MaxEndMarker:
			f.held = append([]byte(nil), rest...) // a marker may be coming
			return n, nil
		case bytes.HasPrefix(rest, f.start):
			if m, ok := supervisor.ParseEndMarker(rest, f.nonce); ok {
				f.done = true
				f.found(m)
				return n, nil
			}
		}
		f.pass(rest[:1])
		data = rest[1:]
	}
	return n, nil
}

// pass writes b on; a client that went away is the caller's to notice.
func (f *endFilter) pass(b []byte) {
	if len(b) > 0 {
		_, _ = f.w.Write(b)
	}
}

// flush writes what is held back: the output ended without a marker.
func (f *endFilter) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.pass(f.held)
		f.held = nil
	}
}
