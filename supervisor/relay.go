package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A daemon's stdout and stderr reach its logs through pipes the supervisor
// reads, one goroutine per stream and launch (a relay). What a relay reads goes,
// as it is, to the stream's own log (stdout.log, stderr.log), and line by line to
// the combined log (output.log) in the order the supervisor read it: one record
// per line, RecordStdout or RecordStderr, the line, a newline. Both relays of a
// daemon read under one lock, so the records of its two streams never mix.

// relayDrain bounds the wait for a launch's relays at shutdown, once its
// process group is gone: a process that left the group (setsid) and holds a
// pipe cannot hold the shutdown up.
const relayDrain = 2 * time.Second

// relayStdout and relayStderr index a daemon's streams.
const (
	relayStdout = iota
	relayStderr
)

// daemonLogs are a daemon's three log files.
type daemonLogs struct {
	mu     sync.Mutex
	files  [2]*os.File // stdout.log, stderr.log
	output *os.File    // output.log
	buf    []byte      // what one read takes (under mu)
	rec    []byte      // the records of one read (under mu)
}

// openLogs creates the daemon's log folder and truncates its log files.
func (d *daemonRun) openLogs(root string) error {
	dir := filepath.Join(root, d.spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the log folder of daemon %s: %w", d.spec.Name, err)
	}
	d.stdoutPath = filepath.Join(dir, StdoutLog)
	d.stderrPath = filepath.Join(dir, StderrLog)
	d.outputPath = filepath.Join(dir, OutputLog)
	d.logs = &daemonLogs{buf: make([]byte, 32<<10)}
	for i, p := range []string{d.stdoutPath, d.stderrPath, d.outputPath} {
		f, err := openLog(p)
		if err != nil {
			return fmt.Errorf("cannot open the log of daemon %s: %w", d.spec.Name, err)
		}
		if i < 2 {
			d.logs.files[i] = f
		} else {
			d.logs.output = f
		}
	}
	return nil
}

func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
}

func (d *daemonRun) closeLogs() {
	l := d.logs
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range []*os.File{l.files[0], l.files[1], l.output} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// size is the size of a stream's log (0 when unknown).
func (l *daemonLogs) size(stream int) int64 {
	if l.files[stream] == nil {
		return 0
	}
	return fileSize(l.files[stream])
}

// note writes a line of the supervisor's own about the daemon to its stderr
// log and, as a record of its own, to the combined log.
func (d *daemonRun) note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l := d.logs
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.files[relayStderr].WriteString(line + "\n")
	l.rec = appendRecord(l.rec[:0], relayStderr, []byte(line))
	_, _ = l.output.Write(l.rec)
}

// appendRecord appends the record of a line read from stream to b.
func appendRecord(b []byte, stream int, line []byte) []byte {
	tag := RecordStdout
	if stream == relayStderr {
		tag = RecordStderr
	}
	b = append(b, tag...)
	b = append(b, line...)
	return append(b, '\n')
}

// relay copies one stream of one launch from its pipe to the daemon's logs.
type relay struct {
	logs   *daemonLogs
	stream int
	r      *os.File
	rc     syscall.RawConn
	done   chan struct{} // closed when the relay ended

	// Under logs.mu:
	held   []byte // the start of a line not ended yet (at most MaxLogLine bytes)
	eof    bool   // the pipe has no writer left
	closed bool   // the relay ended: nothing more is read
}

// pipes makes the two pipes of a launch: the ends the process writes to
// (stdout, stderr) and the relays that read the other ends. Nothing is read
// before start is called. When it fails, nothing is left open.
func (l *daemonLogs) pipes() (w [2]*os.File, rs [2]*relay, err error) {
	for i := range 2 {
		r, wi, perr := os.Pipe()
		if perr == nil {
			rs[i] = &relay{logs: l, stream: i, r: r, done: make(chan struct{})}
			w[i] = wi
			rs[i].rc, perr = r.SyscallConn()
		}
		if perr != nil {
			for j := 0; j <= i; j++ {
				if rs[j] != nil {
					_ = rs[j].r.Close()
				}
				if w[j] != nil {
					_ = w[j].Close()
				}
			}
			return w, rs, fmt.Errorf("cannot make a pipe for the daemon's output: %w", perr)
		}
	}
	return w, rs, nil
}

// start runs the relay's goroutine.
func (r *relay) start() { go r.run() }

func (r *relay) run() {
	defer close(r.done)
	for {
		over := false
		err := r.rc.Read(func(fd uintptr) bool {
			r.logs.mu.Lock()
			defer r.logs.mu.Unlock()
			if r.closed || r.eof {
				over = true
				return true
			}
			switch r.readLocked(fd) {
			case readAgain:
				return false // wait until the pipe is readable
			case readEnd:
				over = true
			}
			return true
		})
		if over || err != nil {
			break
		}
	}
	r.finish()
}

type readOutcome int

const (
	readData readOutcome = iota
	readAgain
	readEnd
)

// readLocked reads once from the pipe and copies what it read to the logs.
func (r *relay) readLocked(fd uintptr) readOutcome {
	l := r.logs
	for {
		n, err := unix.Read(int(fd), l.buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return readAgain
		case err != nil || n <= 0:
			r.eof = true
			return readEnd
		}
		r.copyLocked(l.buf[:n])
		return readData
	}
}

// copyLocked writes p to the stream's log, and its lines ended (or grown to
// MaxLogLine bytes) as records to the combined log.
func (r *relay) copyLocked(p []byte) {
	l := r.logs
	_, _ = l.files[r.stream].Write(p)
	rec := l.rec[:0]
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		// A line longer than MaxLogLine goes out in records of MaxLogLine bytes.
		for len(r.held)+len(seg) > MaxLogLine {
			room := MaxLogLine - len(r.held)
			rec = appendRecord(rec, r.stream, append(r.held, seg[:room]...))
			r.held, seg = r.held[:0], seg[room:]
		}
		if i < 0 {
			r.held = append(r.held, seg...)
			break
		}
		rec = appendRecord(rec, r.stream, append(r.held, seg...))
		r.held = r.held[:0]
		p = p[i+1:]
	}
	if len(rec) > 0 {
		_, _ = l.output.Write(rec)
	}
	l.rec = rec
}

// drain copies what the pipe holds now (the output of a leader that exited)
// to the logs.
func (r *relay) drain() {
	_ = r.rc.Control(func(fd uintptr) {
		r.logs.mu.Lock()
		defer r.logs.mu.Unlock()
		for !r.closed && !r.eof {
			if r.readLocked(fd) != readData {
				break
			}
		}
	})
	r.wake()
}

// wake makes a relay whose pipe reached its end (read by drain) see it.
func (r *relay) wake() {
	r.logs.mu.Lock()
	eof := r.eof
	r.logs.mu.Unlock()
	if eof {
		_ = r.r.SetReadDeadline(time.Now())
	}
}

// finish writes the line held, as a record, and closes the pipe; nothing more
// is read.
func (r *relay) finish() {
	l := r.logs
	l.mu.Lock()
	if !r.closed {
		r.closed = true
		if len(r.held) > 0 {
			l.rec = appendRecord(l.rec[:0], r.stream, r.held)
			_, _ = l.output.Write(l.rec)
			r.held = nil
		}
	}
	l.mu.Unlock()
	_ = r.r.Close()
}

// awaitRelays waits until the relays of the daemon's launches have copied
// everything (their pipes have no writer left), at most relayDrain; a relay
// still open then (a process outside the daemon's group holds its pipe) gets
// what its pipe holds copied, and is ended.
func (d *daemonRun) awaitRelays() {
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	for _, r := range d.relays {
		select {
		case <-r.done:
			continue
		case <-t.C:
		}
		// Past the bound: the remaining ones at once.
		for _, r := range d.relays {
			select {
			case <-r.done:
			default:
				r.drain()
				r.finish()
				<-r.done
			}
		}
		break
	}
	d.relays = nil
}

// pruneRelays forgets the relays that ended.
func (d *daemonRun) pruneRelays() {
	live := d.relays[:0]
	for _, r := range d.relays {
		select {
		case <-r.done:
		default:
			live = append(live, r)
		}
	}
	clear(d.relays[len(live):])
	d.relays = live
}
