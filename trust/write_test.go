package trust

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A warm pool's session that is open already is not written again: every run
// of a pooled manifest asks for it, and the record is read, encoded and
// replaced for nothing otherwise (its file keeps its inode).
func TestBeginPoolOpenWritesNothing(t *testing.T) {
	w := newWorld(t)
	w.check(nil)
	if err := w.store.BeginPool(w.manifest, []string{w.project}, []string{w.manifest}); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(filepath.Join(w.store.Dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	w.at(time.Minute)
	if err := w.store.BeginPool(w.manifest, []string{w.project}, []string{w.manifest}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(filepath.Join(w.store.Dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("the record was replaced by a BeginPool that found the pool's session open")
	}
}

// A run's session ends when its CLI learnt the main command's end (Ended's at),
// not when the record is written after reading the layers; a time before the
// session's start or after now is not taken.
func TestEndedAt(t *testing.T) {
	for _, c := range []struct {
		name string
		at   time.Duration // from the start of the session; 0: none given
		want time.Duration
	}{
		{"given", 30 * time.Second, 30 * time.Second},
		{"none", 0, time.Minute},
		{"before the start", -time.Second, time.Minute},
		{"after now", 2 * time.Minute, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.check(nil)
			ss := w.begin("s1", w.project)
			start := w.clock
			w.clock = start.Add(time.Minute)
			var at time.Time
			if c.at != 0 {
				at = start.Add(c.at)
			}
			if _, err := w.store.Ended(ss.Serial, w.snap(), true, at); err != nil {
				t.Fatal(err)
			}
			_ = w.store.view(func(st *state) error {
				for _, x := range st.Sessions {
					if x.Serial == ss.Serial {
						if got := x.Ended.Sub(start); got != c.want || !x.Sealed.Equal(x.Ended) {
							t.Errorf("ended %v after the start, sealed %v; want %v, the same", got, x.Sealed.Sub(start), c.want)
						}
					}
				}
				return nil
			})
		})
	}
}

// The coarse clock files are stamped with has passed a time a tick ago, and
// not one to come.
func TestCoarsePassed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux's coarse clock")
	}
	if !coarsePassed(time.Now().Add(-time.Second)) {
		t.Error("a second ago: not passed")
	}
	if coarsePassed(time.Now().Add(time.Second)) {
		t.Error("a second from now: passed")
	}
}
