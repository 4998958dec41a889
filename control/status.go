package control

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/airlock-dev/airlock/backend"
	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// The supervisor's status stream lives inside the sandbox (supervisor.StatusFile) and
// reaches the daemon through the Engine API: an exec of `supervise tail --follow`
// while the container runs, an archive download of what is left once it stopped.
// It is untrusted input, read within bounds: a line longer than maxStatusLine or a
// stream longer than maxStatusStream fails the sandbox (it is killed), never the
// daemon; each sandbox is read by its own goroutine, so a stream that blocks
// blocks nobody else.
const (
	maxStatusLine   = 64 << 10
	maxStatusStream = 16 << 20
	// statusRate and statusBurst bound how fast a stream's lines become events
	// (a daemon restarting in a loop reports a few a second at most).
	statusRate  = 100
	statusBurst = 2000
)

// runFollowDelay is how long after its start a run sandbox's stream is followed
// (a short run's stream comes whole with its sealed end marker, and an exec
// starting as the supervisor seals the sandbox keeps it from sealing); a
// follower that ended while the sandbox runs is started again after
// followRetry, then twice as long each time, up to followRetryMax.
const (
	runFollowDelay = 500 * time.Millisecond
	followRetry    = time.Second
	followRetryMax = 30 * time.Second
)

// stallCheck is how often the stream of a pending sandbox is also read from the
// container's filesystem (catchUp): an exec whose output the Engine never passes
// on (seen under load) must not leave a sandbox pending for ever.
var stallCheck = 5 * time.Second

// errStatusAbuse is a status stream beyond its bounds.
var errStatusAbuse = errors.New("the status stream broke its bounds")

// startTailAt follows the sandbox's status stream from offset: 0 for a fresh start,
// the recorded offset for a daemon that restarted, so the transitions that
// happened while no daemon ran are recorded too, once.
func (f *follower) startTailAt(id string, l *live, offset int64) {
	l.ingestMu.Lock()
	l.tailGen++
	gen := l.tailGen
	l.offset, l.offsetOK = offset, true
	l.ingestMu.Unlock()
	f.spawnFollower(id, l, gen)
}

// spawnFollower follows the stream as generation gen, from l.offset.
func (f *follower) spawnFollower(id string, l *live, gen int) {
	f.goAsync(func() { f.follow(id, l, gen) })
}

func (f *follower) follow(id string, l *live, gen int) {
	// The follower ended while the sandbox runs (a process in it replaced the
	// stream): it is tried again later, less and less often.
	retry := backoff.NewExponentialBackOff(backoff.WithInitialInterval(followRetry), backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0), backoff.WithMaxInterval(followRetryMax), backoff.WithMaxElapsedTime(0))
	if rec, err := f.store.Get(id); err == nil && rec.Kind == backend.KindRun {
		// A run's main command is often short: an exec started at once would
		// compete with it for the Engine (an exec costs as much as the command),
		// while what a short run reports is read once it stopped. `up` waits for
		// readiness, so its stream is followed at once.
		if !sleep(f.ctx(), runFollowDelay) {
			return
		}
	}
	wctx, stopWatch := context.WithCancel(f.ctx())
	defer stopWatch()
	f.goAsync(func() { f.watchStall(wctx, id, l, gen) })
	for f.ctx().Err() == nil && l.current(gen) {
		rec, err := f.store.Get(id)
		if err != nil || rec.ContainerID == "" || rec.State == store.StateDeleted || rec.State == store.StateDeleting {
			return
		}
		l.ingestMu.Lock()
		from := l.offset
		l.ingestMu.Unlock()
		rc, cancel, early := takeEarly(l, from)
		if !early {
			var ctx context.Context
			ctx, cancel = context.WithCancel(f.ctx())
			rc, err = f.rtOf(id).FollowStatus(ctx, rec.ContainerID, from)
		}
		if err == nil {
			err = f.consume(id, l, gen, rc, from)
			rc.Close()
		}
		cancel()
		if errors.Is(err, errStatusAbuse) {
			return
		}
		if !f.rtOf(id).Running(f.ctx(), rec.ContainerID) {
			f.catchUp(id, l)
			if f.ctx().Err() == nil && l.current(gen) {
				// The Engine's die event may never come (the watch began after
				// it, the Engine restarted): record the stop from here too.
				f.primaryDied(id, l, f.rtOf(id).ExitCode(f.ctx(), rec.ContainerID), "", false)
			}
			return
		}
		if !sleep(f.ctx(), retry.NextBackOff()) {
			return
		}
	}
}

// watchStall reads the stream from the container's filesystem every stallCheck
// while the sandbox is pending and gen follows it. Lines the follower delivers
// later are not recorded twice (l.offset); a catch-up that found lines is logged.
func (f *follower) watchStall(ctx context.Context, id string, l *live, gen int) {
	t := time.NewTicker(stallCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if rec, err := f.store.Get(id); err != nil || rec.State != store.StatePending || !l.current(gen) {
			return
		}
		l.ingestMu.Lock()
		before := l.offset
		l.ingestMu.Unlock()
		f.catchUp(id, l)
		l.ingestMu.Lock()
		after := l.offset
		l.ingestMu.Unlock()
		if after > before {
			f.log().Warn("the status follower delivered nothing; read the stream from the container", "sandbox", id, "bytes", after-before)
		}
	}
}

// consume ingests the lines of a followed stream that starts at byte offset from.
func (f *follower) consume(id string, l *live, gen int, r io.Reader, from int64) error {
	br := bufio.NewReaderSize(r, 4096)
	pos := from
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxStatusLine {
			return f.abuse(id, l, fmt.Sprintf("a line longer than %d bytes", maxStatusLine))
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return err
		}
		pos += int64(len(line))
		if pos > maxStatusStream {
			return f.abuse(id, l, fmt.Sprintf("more than %d bytes", maxStatusStream))
		}
		l.ingestMu.Lock()
		if l.tailGen != gen {
			l.ingestMu.Unlock()
			return nil
		}
		if pos > l.offset {
			if !l.allowEvent() {
				f.abuseLocked(id, fmt.Sprintf("more than %d lines a second", statusRate))
				l.ingestMu.Unlock()
				return errStatusAbuse
			}
			f.ingestLine(id, line, pos)
			l.offset = pos
		}
		l.ingestMu.Unlock()
		line = line[:0]
	}
}

// catchUp ingests what the stream holds past the recorded offset, read from the
// container's filesystem (it works on a stopped container).
func (f *follower) catchUp(id string, l *live) {
	rec, err := f.store.Get(id)
	if err != nil || rec.ContainerID == "" {
		return
	}
	l.ingestMu.Lock()
	w := l.finalWait
	l.ingestMu.Unlock()
	if w != nil {
		// A sealed end's stream is being checked: it may make this read
		// needless (complete), and comes before what follows the stop.
		select {
		case <-w:
		case <-time.After(finalWaitMax):
		case <-f.ctx().Done():
		}
	}
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	if l.starting {
		return // sandbox.started comes first; the follower reads the stream after it
	}
	if l.complete {
		return // the follower read the stream to its last line
	}
	if !l.offsetOK {
		l.offset, l.offsetOK = f.recordedOffset(id), true
	}
	data, _, err := f.rtOf(id).ReadFile(f.ctx(), rec.ContainerID, supervisor.StatusFile, l.offset, maxStatusStream-l.offset+1)
	if err != nil {
		if errors.Is(err, backend.ErrNotRegular) {
			f.log().Warn("the status stream is not a regular file; ignored", "sandbox", id)
		}
		return
	}
	f.ingestData(id, l, data)
}

// expectFinal makes a catch-up wait for finalStatus (at most finalWaitMax).
func (f *follower) expectFinal(l *live) {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	if l.finalWait == nil {
		l.finalWait = make(chan struct{})
	}
}

// finalWaitMax bounds a catch-up's wait for a sealed end's stream.
const finalWaitMax = 5 * time.Second

// finalStatus ingests the status stream a sealed end marker carried (the
// whole stream, final: nothing in the sandbox runs any more) past what was
// recorded, and marks it read to its end, so that nothing is read from the
// stopped container (each read costs the Engine a process of its own). Not
// before sandbox.started is recorded: the catch-up reads it then. Nil data
// gives it up (a marker not believed). Either way a waiting catch-up goes on.
func (f *follower) finalStatus(id string, l *live, data []byte) {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	if data != nil && l.starting {
		// After sandbox.started (startLocked): the stopped container's
		// stream may not be readable then (a Pod's is gone with it).
		l.finalData = data
		return
	}
	f.finalLocked(id, l, data)
}

// finalLocked is finalStatus with l.ingestMu held, and no start in progress.
func (f *follower) finalLocked(id string, l *live, data []byte) {
	if l.finalWait != nil {
		defer func() { close(l.finalWait); l.finalWait = nil }()
	}
	if data == nil || l.complete {
		return
	}
	if !l.offsetOK {
		l.offset, l.offsetOK = f.recordedOffset(id), true
	}
	if int64(len(data)) < l.offset {
		return // not the stream recorded so far: read it from the container
	}
	if f.ingestData(id, l, data[l.offset:]) {
		l.complete = true
	}
}

// ingestData ingests the lines of data, the stream from l.offset on, and
// reports whether it ended with a whole line within the bounds. The caller
// holds l.ingestMu.
func (f *follower) ingestData(id string, l *live, data []byte) bool {
	pos := l.offset
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > maxStatusLine {
				f.abuseLocked(id, fmt.Sprintf("a line longer than %d bytes", maxStatusLine))
			}
			return false
		}
		line := data[:i+1]
		if len(line) > maxStatusLine {
			f.abuseLocked(id, fmt.Sprintf("a line longer than %d bytes", maxStatusLine))
			return false
		}
		pos += int64(len(line))
		if pos > maxStatusStream {
			f.abuseLocked(id, fmt.Sprintf("more than %d bytes", maxStatusStream))
			return false
		}
		if !l.allowEvent() {
			f.abuseLocked(id, fmt.Sprintf("more than %d lines a second", statusRate))
			return false
		}
		f.ingestLine(id, line, pos)
		l.offset = pos
		data = data[i+1:]
	}
	return true
}

// abuse fails a sandbox whose status stream broke its bounds, and kills it.
func (f *follower) abuse(id string, l *live, what string) error {
	l.ingestMu.Lock()
	defer l.ingestMu.Unlock()
	f.abuseLocked(id, what)
	return errStatusAbuse
}

func (f *follower) abuseLocked(id, what string) {
	l := f.liveOf(id)
	l.tailGen++ // nobody follows this stream any more
	rec, err := f.store.Get(id)
	if err != nil {
		return
	}
	f.log().Warn("status stream out of bounds; failing the sandbox", "sandbox", id, "what", what)
	if liveState(rec.State) || rec.State == store.StatePending {
		f.setFlags(l, func() { l.stopping = "status_stream" })
		f.emit(id, store.Event{Kind: "sandbox.failed", Reason: "its status stream broke the daemon's bounds (" + what + "); the sandbox was killed"}, store.StateFailed)
	}
	if rec.ContainerID != "" {
		_ = f.rtOf(id).KillPrimary(context.WithoutCancel(f.ctx()), rec.ContainerID, "SIGKILL")
	}
}

// ingestLine records one line of the stream; after is the stream offset past it.
// A line that does not decode as a known event is dropped.
func (f *follower) ingestLine(id string, line []byte, after int64) {
	ev, err := supervisor.NewStatusDecoder(bytes.NewReader(line)).Next()
	if err == nil {
		f.ingestOne(id, ev, after)
	}
}

// recordedOffset is how much of the status stream the sandbox's events already
// hold: each ingested event carries the offset after its line, written in the
// same transaction, so a restarted daemon records every line exactly once. A
// sandbox.started resets it: the supervisor starts a new stream.
func (f *follower) recordedOffset(id string) int64 {
	evs, err := f.store.Events(id, 0)
	if err != nil {
		return 0
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch {
		case evs[i].StatusOffset > 0:
			return evs[i].StatusOffset
		case evs[i].Kind == "sandbox.started":
			return 0
		}
	}
	return 0
}

// ingestOne records one status event; after is the stream offset past its line.
func (f *follower) ingestOne(id string, ev supervisor.StatusEvent, after int64) {
	out := store.Event{Kind: ev.Kind, Daemon: ev.Daemon, PID: ev.PID, Reason: ev.Reason, Signal: ev.Signal, ExitCode: ev.ExitCode, StatusOffset: after}
	out.Attempt = ev.Attempt
	out.DelayMS = ev.DelayMS
	switch ev.Kind {
	case supervisor.KindDaemonStarted, supervisor.KindDaemonReady, supervisor.KindDaemonCompleted, supervisor.KindDaemonExited,
		supervisor.KindDaemonRestarting, supervisor.KindDaemonGaveUp, supervisor.KindDaemonStopped, supervisor.KindDaemonKilled:
		l := f.liveOf(id)
		f.emitInside(id, l, out)
		f.mu.Lock()
		if l.up != nil {
			markUp(l.up, ev.Kind, ev.Daemon)
		}
		f.mu.Unlock()
	case supervisor.KindSupervisorReady:
		// Only an open run gets ready (phase.go): never one reported failed.
		if f.emitIfOpen(id, store.Event{Kind: "sandbox.ready", StatusOffset: after}, store.StateReady) {
			f.touch(id)
		}
	case supervisor.KindSupervisorFailed:
		if f.emitIfOpen(id, store.Event{Kind: "sandbox.failed", Reason: ev.Reason, Extra: map[string]string{"exit_code": "125"}, StatusOffset: after}, store.StateFailed) {
			f.stopFailed(id)
		}
	case supervisor.KindMainExited:
		out.Kind = "main.exited"
		f.emitInside(id, f.liveOf(id), out)
	case supervisor.KindSupervisorExiting:
		// The stream's last line: not an event of its own, but nothing is left
		// to read from the stopped container (callers hold l.ingestMu).
		f.liveOf(id).complete = true
	}
}
