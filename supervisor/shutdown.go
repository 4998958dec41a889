package supervisor

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stopAll asks every daemon started to stop at once (each signals its own process
// group; see daemonRun.terminate).
func (s *supervisor) stopAll() {
	for _, d := range s.running {
		d.stop()
	}
}

// collect waits for every daemon started to report its end and prints one line per
// daemon in completion order (with spinners for the ones still stopping when
// stderr is a terminal).
func (s *supervisor) collect() {
	s.collectUntil(nil)
	for _, d := range s.daemons {
		d.closeLogs()
	}
}

// collectFor is collect for at most d: it returns then, the daemons still
// stopping left to a later collect. A daemon whose process had ended by then
// stopped within d, though its end may not have come through yet (on a busy
// machine the goroutines that report it wait for a CPU): it is waited for, up
// to endedWait more.
func (s *supervisor) collectFor(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	s.collectUntil(t.C)
	for waited := time.Duration(0); len(s.remaining) > 0 && waited < endedWait && s.leaderEnded(); waited += endedPoll {
		t := time.NewTimer(endedPoll)
		s.collectUntil(t.C)
		t.Stop()
	}
}

// How long, and in which steps, collectFor waits for the ends of daemons
// whose processes ended within its time.
const (
	endedWait = 250 * time.Millisecond
	endedPoll = 5 * time.Millisecond
)

// leaderEnded reports whether a daemon still to report its end has no
// process running any more (its last launch's leader exited: a zombie not yet
// reaped, or gone), or never had one.
func (s *supervisor) leaderEnded() bool {
	for _, d := range s.running {
		if s.remaining[d.spec.Name] && processEnded(int(d.leader.Load())) {
			return true
		}
	}
	return false
}

// collectUntil prints the daemons' lines until each reported its end or
// until deadline (nil: none).
func (s *supervisor) collectUntil(deadline <-chan time.Time) {
	if s.view == nil {
		s.view = &shutdownView{w: s.msgs, tty: s.tty, color: s.color, quiet: s.quiet}
		s.remaining = map[string]bool{}
		for _, d := range s.running {
			s.remaining[d.spec.Name] = true
		}
	}
	v, remaining := s.view, s.remaining
	var tick <-chan time.Time
	if v.tty && !v.quiet && len(remaining) > 0 {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	v.draw(remaining)
	for len(remaining) > 0 {
		select {
		case r := <-s.results:
			delete(remaining, r.name)
			v.done(r, remaining)
		case <-tick:
			v.frame++
			v.draw(remaining)
		case <-deadline:
			return
		}
	}
}

// fastEndWait is how long a run that need not wait for its daemons' shutdown
// (Spec.EndMarker) gives them to stop before it marks the end of its output.
const fastEndWait = 20 * time.Millisecond

// markEnd writes the end marker with the main command's code on stdout and,
// when it is another stream, on stderr (after the shutdown lines printed so
// far, and after clearing the spinners of the daemons still stopping). A
// sealed one carries the whole status stream when it is small (status).
func (s *supervisor) markEnd(o Options, nonce string, code int, sealed bool, status []byte) {
	if s.view != nil {
		var b strings.Builder
		s.view.clear(&b)
		_, _ = io.WriteString(s.msgs, b.String())
	}
	m := EndMarker(nonce, code)
	if sealed {
		m = SealedEndMarker(nonce, code, status)
	}
	_, _ = io.WriteString(o.Stdout, m)
	if !sameFile(o.Stdout, o.Stderr) {
		_, _ = io.WriteString(o.Stderr, m)
	}
}

// EndMarker is what the supervisor writes after the main command's output
// when the spec has an end marker: an APC escape sequence, which terminals
// ignore, holding the nonce and the code.
func EndMarker(nonce string, code int) string {
	return endMarkerPrefix + nonce + ":" + strconv.Itoa(code) + endMarkerSuffix
}

// SealedEndMarker is EndMarker when every daemon stopped and the supervisor
// (PID 1) ended every other process of the sandbox: nothing in it can write
// any more, though its container has not exited yet. It carries the status
// stream, whole and final, when it is at most MaxMarkedStatus bytes: the host
// then need not read it from the stopped container.
func SealedEndMarker(nonce string, code int, status []byte) string {
	m := endMarkerPrefix + nonce + ":" + strconv.Itoa(code) + sealedSuffix
	if len(status) > 0 && len(status) <= MaxMarkedStatus {
		m += ":" + base64.StdEncoding.EncodeToString(status)
	}
	return m + endMarkerSuffix
}

const (
	endMarkerPrefix = "\x1b_airlock-end:"
	endMarkerSuffix = "\x1b\\"
	sealedSuffix    = ":sealed"
)

// MaxMarkedStatus bounds the status stream a sealed end marker carries.
const MaxMarkedStatus = 16 << 10

// StripEndMarkers removes every end marker (EndMarker, SealedEndMarker, of
// any nonce, whole) from s: text that quotes a container's output (a reason)
// shows what the command printed, not the supervisor's markers.
func StripEndMarkers(s string) string {
	for {
		i := strings.Index(s, endMarkerPrefix)
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], endMarkerSuffix)
		if j < 0 {
			return s[:i] // cut short: the rest is the marker's
		}
		s = s[:i] + s[i+j+len(endMarkerSuffix):]
	}
}

// EndMarkerStart is the start of nonce's marker: what a reader looks for.
func EndMarkerStart(nonce string) string { return endMarkerPrefix + nonce + ":" }

// EndMark is what an end marker says.
type EndMark struct {
	Code int
	// Sealed: SealedEndMarker; Status is the status stream it carries (nil
	// when none).
	Sealed bool
	Status []byte
}

// ParseEndMarker reads nonce's marker at the start of b.
func ParseEndMarker(b []byte, nonce string) (EndMark, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(EndMarkerStart(nonce)))
	if !ok {
		return EndMark{}, false
	}
	body, _, ok := bytes.Cut(rest, []byte(endMarkerSuffix))
	if !ok {
		return EndMark{}, false
	}
	var m EndMark
	digits, after, _ := bytes.Cut(body, []byte(":"))
	switch {
	case after == nil:
	case bytes.Equal(after, []byte(sealedSuffix[1:])):
		m.Sealed = true
	default:
		enc, ok := bytes.CutPrefix(after, []byte(sealedSuffix[1:]+":"))
		if !ok {
			return EndMark{}, false
		}
		st, err := base64.StdEncoding.DecodeString(string(enc))
		if err != nil || len(st) == 0 || len(st) > MaxMarkedStatus {
			return EndMark{}, false
		}
		m.Sealed, m.Status = true, st
	}
	if len(digits) == 0 || len(digits) > 3 {
		return EndMark{}, false
	}
	code, err := strconv.Atoi(string(digits))
	if err != nil || code < 0 || code > 255 {
		return EndMark{}, false
	}
	m.Code = code
	return m, true
}

// MaxEndMarker bounds the length of a marker (nonce of at most 64 characters,
// the status it may carry).
var MaxEndMarker = 16 + 64 + 1 + 3 + len(sealedSuffix) + 1 + base64.StdEncoding.EncodedLen(MaxMarkedStatus) + 2

// sameFile reports whether a and b are the same open file (a terminal given
// as both).
func sameFile(a, b *os.File) bool {
	if a == b {
		return true
	}
	sa, errA := a.Stat()
	sb, errB := b.Stat()
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// shutdownView prints the shutdown lines.
type shutdownView struct {
	w     io.Writer
	tty   bool // draw spinners
	color bool
	quiet bool
	frame int
	drawn int // spinner lines currently on screen
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const (
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
	ansiReset  = "\x1b[0m"
)

func (v *shutdownView) done(r stopResult, remaining map[string]bool) {
	if v.quiet {
		return
	}
	var b strings.Builder
	v.clear(&b)
	mark, word, colour := "✔", "shut down", ansiGreen
	switch {
	case r.killed:
		word, colour = "killed", ansiYellow
	case r.gaveUp != nil:
		mark, colour = "✘", ansiRed
		word = fmt.Sprintf("gave up after %d launches (%s)", r.gaveUp.launches, r.gaveUp.last)
	case r.completed:
		word = "completed"
	case r.failed != "":
		mark, colour = "✘", ansiRed
		word = "failed (" + r.failed + ")"
	}
	if v.color {
		mark = colour + mark + ansiReset
	}
	fmt.Fprintf(&b, "%s daemon %s: %s\n", mark, r.name, word)
	_, _ = io.WriteString(v.w, b.String())
	v.draw(remaining)
}

// draw redraws one spinner line per daemon still stopping.
func (v *shutdownView) draw(remaining map[string]bool) {
	if v.quiet || !v.tty {
		return
	}
	names := slices.Sorted(maps.Keys(remaining))
	var b strings.Builder
	v.clear(&b)
	frame := spinnerFrames[v.frame%len(spinnerFrames)]
	for _, n := range names {
		if v.color {
			fmt.Fprintf(&b, "%s%s%s daemon %s: stopping\n", ansiDim, frame, ansiReset, n)
		} else {
			fmt.Fprintf(&b, "%s daemon %s: stopping\n", frame, n)
		}
	}
	v.drawn = len(names)
	_, _ = io.WriteString(v.w, b.String())
}

// clear moves the cursor up over the spinner lines and erases them.
func (v *shutdownView) clear(b *strings.Builder) {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(b, "\x1b[%dA\x1b[J", v.drawn)
		v.drawn = 0
	}
}
