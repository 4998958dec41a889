package control

import (
	"fmt"
	"strconv"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/sandbox"
)

// Denied egress (DESIGN §7): the daemon follows a sandbox's egress proxy and
// records the first denial of each destination as an egress.denied event; later
// denials of it are counted, and the count is recorded once when the sandbox
// stops or is removed (extra "count"), so a retry loop cannot flood the history.

// followEgress reads the denials of a sandbox's proxy while it runs.
func (s *Service) followEgress(id string, l *live) {
	if !s.claim(&l.egressFollowing) {
		return
	}
	s.goAsync(func() {
		defer s.setFlags(l, func() { l.egressFollowing = false })
		_ = s.rtOf(id).FollowEgress(s.ctx, id, func(d sandbox.EgressDenial) { s.egressDenied(id, l, d) })
	})
}

func (s *Service) egressDenied(id string, l *live, d sandbox.EgressDenial) {
	dest := d.Host + ":" + strconv.Itoa(d.Port)
	s.mu.Lock()
	if l.egress == nil {
		l.egress = map[string]*egressCount{}
	}
	c, seen := l.egress[dest]
	if !seen {
		c = &egressCount{host: d.Host, port: d.Port}
		l.egress[dest] = c
	}
	c.n++
	s.mu.Unlock()
	if !seen {
		s.emit(id, store.Event{Kind: "egress.denied", Reason: fmt.Sprintf("egress to %s denied (%s)", dest, d.Method),
			Extra: map[string]string{"host": d.Host, "port": strconv.Itoa(d.Port), "count": "1"}}, "")
	}
}

// egressCount is how often a destination was denied, and how many of those are
// recorded.
type egressCount struct {
	host     string
	port     int
	n        int
	recorded int
}

// flushEgress records the counts of destinations denied more often than recorded.
func (s *Service) flushEgress(id string, l *live) {
	s.mu.Lock()
	var evs []store.Event
	for dest, c := range l.egress {
		if c.n > 1 && c.n > c.recorded {
			evs = append(evs, store.Event{Kind: "egress.denied", Reason: fmt.Sprintf("egress to %s denied %d times", dest, c.n),
				Extra: map[string]string{"host": c.host, "port": strconv.Itoa(c.port), "count": strconv.Itoa(c.n)}})
		}
		c.recorded = max(c.recorded, c.n)
	}
	s.mu.Unlock()
	for _, ev := range evs {
		s.emit(id, ev, "")
	}
}
