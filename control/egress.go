package control

import (
	"fmt"
	"strconv"

	"golang.org/x/time/rate"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
)

// Denied egress (design.md §7, docs/egress.md): the daemon follows a sandbox's egress
// proxy and records the first denial of each destination as an egress.denied
// event; later denials of it are counted, and the count is recorded once when
// the sandbox stops or is removed (extra "count"), so a retry loop cannot flood
// the history. Distinct destinations are bounded too (bounds.go): past
// maxEgressDestinations, denials are counted in one overflow event (extra
// "overflow", "limit", "count") and the destinations are not kept.
const (
	maxEgressDestinations = 100
	// egressRate and egressBurst bound how fast first denials are recorded; one
	// over the rate is recorded with its count when the sandbox stops.
	egressRate  = 10
	egressBurst = 100
)

// followEgress reads the denials of a sandbox's proxy while it runs.
func (f *follower) followEgress(id string, l *live) {
	if !f.claim(&l.egressFollowing) {
		return
	}
	done := make(chan struct{})
	f.mu.Lock()
	l.bounds.egressDone = done
	f.mu.Unlock()
	f.goAsync(func() {
		defer close(done)
		defer f.setFlags(l, func() { l.egressFollowing = false })
		_ = f.rtOf(id).FollowEgress(f.ctx(), id, func(d backend.EgressDenial) { f.egressDenied(id, l, d) })
	})
}

// validDenial reports whether a line of the proxy's output names a destination
// as the proxy writes them (a normalised host of printable ASCII, a port): the
// proxy runs in the sandbox's image, so its output is not trusted either.
func validDenial(d backend.EgressDenial) bool {
	if d.Host == "" || len(d.Host) > 255 || d.Port < 1 || d.Port > 65535 || len(d.Method) > 32 {
		return false
	}
	for _, s := range []string{d.Host, d.Method} {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c <= ' ' || c >= 0x7f {
				return false
			}
		}
	}
	return true
}

func (f *follower) egressDenied(id string, l *live, d backend.EgressDenial) {
	if !validDenial(d) {
		return
	}
	dest := d.Host + ":" + strconv.Itoa(d.Port)
	f.mu.Lock()
	if l.egress == nil {
		l.egress = map[string]*egressCount{}
	}
	c, seen := l.egress[dest]
	if !seen && len(l.egress) >= maxEgressDestinations {
		// Past the cap: counted, not kept (the map stays bounded).
		first := l.bounds.egressOverflow.add()
		f.mu.Unlock()
		if first {
			f.emitInside(id, l, overflowEvent(1))
		}
		return
	}
	if !seen {
		c = &egressCount{host: d.Host, port: d.Port}
		l.egress[dest] = c
	}
	c.n++
	now := false
	if !seen {
		if l.bounds.egressLimiter == nil {
			l.bounds.egressLimiter = rate.NewLimiter(egressRate, egressBurst)
		}
		now = l.bounds.egressLimiter.Allow()
		if now {
			c.recorded = 1
		}
	}
	f.mu.Unlock()
	if now {
		f.emitInside(id, l, store.Event{Kind: "egress.denied", Reason: fmt.Sprintf("egress to %s denied (%s)", dest, d.Method),
			Extra: map[string]string{"host": d.Host, "port": strconv.Itoa(d.Port), "count": "1"}})
	}
}

func overflowEvent(n int) store.Event {
	return store.Event{Kind: "egress.denied",
		Reason: fmt.Sprintf("egress denied to more than %d destinations: the others are counted, not recorded (%d denials so far)", maxEgressDestinations, n),
		Extra:  map[string]string{"overflow": "true", "limit": strconv.Itoa(maxEgressDestinations), "count": strconv.Itoa(n)}}
}

// egressCount is how often a destination was denied, and how many of those are
// recorded.
type egressCount struct {
	host     string
	port     int
	n        int
	recorded int
}

// flushEgress records the counts of destinations denied more often than
// recorded, and of the denials past the cap.
func (f *follower) flushEgress(id string, l *live) {
	f.mu.Lock()
	var evs []store.Event
	for dest, c := range l.egress {
		if c.n > c.recorded {
			evs = append(evs, store.Event{Kind: "egress.denied", Reason: fmt.Sprintf("egress to %s denied %d times", dest, c.n),
				Extra: map[string]string{"host": c.host, "port": strconv.Itoa(c.port), "count": strconv.Itoa(c.n)}})
		}
		c.recorded = max(c.recorded, c.n)
	}
	if n := l.bounds.egressOverflow.unrecorded(); n > 0 {
		evs = append(evs, overflowEvent(n))
	}
	f.mu.Unlock()
	for _, ev := range evs {
		f.emitInside(id, l, ev)
	}
}
