package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Poll intervals of the ready checks: short, so that the main command starts
// within a few milliseconds of a daemon becoming ready. A cmd check spawns a
// process per try (a shell pipeline, often), so it pauses between tries
// (cmdPollWait): tried every 20 ms for good, the check of a slow daemon
// (pg_isready costs ~70 ms of CPU a try, PostgreSQL's first start takes
// seconds) took a core away from the daemon it waited for.
const (
	pollInterval    = 10 * time.Millisecond
	cmdPollInterval = 20 * time.Millisecond
	cmdPollMax      = 50 * time.Millisecond
	maxTryTimeout   = 5 * time.Second
	maxLogLine      = 64 << 10
)

// cmdPollWait is the pause between the end of a cmd check's try that took
// took and the next try, sinceStart after the first one: a tenth of the time
// waited so far, at least cmdPollInterval and at most cmdPollMax (so that a
// daemon is seen ready at most 50 ms later than it got ready), and never
// shorter than the try (so that the checks take at most about half a core).
func cmdPollWait(sinceStart, took time.Duration) time.Duration {
	return max(min(max(sinceStart/10, cmdPollInterval), cmdPollMax), took)
}

// readyResult is what a ready watcher reports: nil err when the check passed.
type readyResult struct {
	name string
	err  error
}

// checker runs one try of a ready check; ok reports a pass.
type checker interface {
	try(ctx context.Context) (ok bool)
}

// watchReady polls the daemon's ready check from its first launch until it
// passes, its timeout passes, the daemon will not run again, or stop.
func (d *daemonRun) watchReady() {
	defer d.watchers.Done()
	r := d.spec.Ready
	timeout := r.timeout()
	deadline := time.Now().Add(timeout)
	c, interval := d.newChecker()
	if lc, ok := c.(*logChecker); ok {
		defer lc.close()
	}
	fail := func(msg string) {
		err := fmt.Errorf("daemon %s %s; see %s", d.spec.Name, msg, d.stderrPath)
		if tail := lastLines(d.stderrPath, 5); tail != "" {
			err = fmt.Errorf("%w; its last stderr lines:\n%s", err, tail)
		}
		d.readyResults <- readyResult{name: d.spec.Name, err: err}
	}
	pass := func() {
		d.status.emit(StatusEvent{Kind: KindDaemonReady, Daemon: d.spec.Name})
		close(d.ready)
		d.readyResults <- readyResult{name: d.spec.Name}
	}
	// attempt runs one try that may last until until; over is true when the
	// watch is: the check passed, or the supervisor stops.
	var took time.Duration // by the last try
	attempt := func(until time.Time) (over bool) {
		ctx, cancel := context.WithDeadline(d.ctx, until)
		t0 := time.Now()
		ok := c.try(ctx)
		took = time.Since(t0)
		cancel()
		if d.ctx.Err() != nil {
			return true
		}
		if ok {
			pass()
		}
		return ok
	}
	// A cmd check waits after each try (cmdPollWait); the others tick.
	_, isCmd := c.(*cmdChecker)
	var tick <-chan time.Time
	if !isCmd {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	started := time.Now()
	for {
		if attempt(minTime(deadline, time.Now().Add(maxTryTimeout))) {
			return
		}
		if !time.Now().Before(deadline) {
			fail("not ready after " + r.Timeout + " (" + r.describe() + ")")
			return
		}
		next := tick
		if isCmd {
			pause.Reset(cmdPollWait(time.Since(started), took))
			next = pause.C
		}
		select {
		case <-d.ctx.Done():
			return
		case <-d.finished:
			// No further launch: one last try, then give up at once.
			if attempt(time.Now().Add(time.Second)) {
				return
			}
			msg := "exited before it was ready (" + r.describe() + ")"
			if g := d.gaveUp; g != nil && g.same {
				// gaveUp was set before finished was closed.
				msg += fmt.Sprintf(": it failed the same way (%s) on %d launches in a row, so it was not restarted again", g.last, g.inRow)
			}
			fail(msg)
			return
		case <-next:
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (d *daemonRun) newChecker() (checker, time.Duration) {
	r := d.spec.Ready
	switch {
	case r.TCP != "":
		return tcpChecker{addr: r.TCP, send: r.Send, expect: r.Expect}, pollInterval
	case r.HTTP != "":
		return newHTTPChecker(r.HTTP), pollInterval
	case len(r.Cmd) > 0:
		return &cmdChecker{d: d}, cmdPollInterval
	default:
		return &logChecker{re: regexp.MustCompile(r.Log), paths: []string{d.stdoutPath, d.stderrPath}}, pollInterval
	}
}

// tcpChecker passes when a TCP connection to the address opens and, with
// expect, when what the server answers (to send, when given) holds expect.
type tcpChecker struct{ addr, send, expect string }

// maxExpectRead bounds what a tcp check reads of an answer.
const maxExpectRead = 64 << 10

func (c tcpChecker) try(ctx context.Context) bool {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	if c.send == "" && c.expect == "" {
		return true
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if c.send != "" {
		if _, err := io.WriteString(conn, c.send); err != nil {
			return false
		}
	}
	if c.expect == "" {
		return true
	}
	var got []byte
	buf := make([]byte, 4096)
	for len(got) < maxExpectRead {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if bytes.Contains(got, []byte(c.expect)) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// httpChecker passes on a 2xx or 3xx answer to a GET (redirects not followed,
// no proxy, no kept connections).
type httpChecker struct {
	url    string
	client *http.Client
}

func newHTTPChecker(url string) *httpChecker {
	return &httpChecker{url: url, client: &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (c *httpChecker) try(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return false
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// cmdChecker passes when its command exits 0. It runs with the daemon's env,
// cwd, user and harden setting, output discarded, and is killed (its whole
// process group) when the try's time is up.
type cmdChecker struct{ d *daemonRun }

func (c *cmdChecker) try(ctx context.Context) bool {
	d := c.d
	pid, ch, err := d.r.start(d.proc(d.spec.Ready.Cmd, d.devnull, d.devnull))
	if err != nil {
		return false
	}
	select {
	case ws := <-ch:
		return ws.Exited() && ws.ExitStatus() == 0
	case <-ctx.Done():
		killGroup(pid, unix.SIGKILL)
		<-ch
		return false
	}
}

// logChecker passes when a complete line of the daemon's stdout or stderr log
// (this sandbox's output: the logs are truncated at start) matches the regex.
// It reads only what was appended since its last try.
type logChecker struct {
	re    *regexp.Regexp
	paths []string
	files []*os.File
	tails [][]byte // partial last line of each file
}

func (c *logChecker) try(context.Context) bool {
	if c.files == nil {
		c.files = make([]*os.File, len(c.paths))
		c.tails = make([][]byte, len(c.paths))
	}
	buf := make([]byte, 32<<10)
	for i, p := range c.paths {
		if c.files[i] == nil {
			f, err := os.Open(p)
			if err != nil {
				continue
			}
			c.files[i] = f
		}
		for {
			n, err := c.files[i].Read(buf)
			if n > 0 && c.scan(i, buf[:n]) {
				return true
			}
			if err != nil || n == 0 {
				if err != nil && !errors.Is(err, io.EOF) {
					_ = c.files[i].Close()
					c.files[i] = nil
				}
				break
			}
		}
	}
	return false
}

// scan adds data to file i's pending text and matches each complete line.
func (c *logChecker) scan(i int, data []byte) bool {
	tail := append(c.tails[i], data...)
	for {
		nl := bytes.IndexByte(tail, '\n')
		if nl < 0 {
			break
		}
		line := tail[:nl]
		tail = tail[nl+1:]
		if c.re.Match(line) {
			c.tails[i] = nil
			return true
		}
	}
	if len(tail) > maxLogLine {
		// An endless line: match what there is, keep its end only.
		if c.re.Match(tail) {
			return true
		}
		tail = tail[len(tail)-maxLogLine/2:]
	}
	c.tails[i] = append([]byte(nil), tail...)
	return false
}

func (c *logChecker) close() {
	for _, f := range c.files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// lastLines returns the last n lines of a log, indented, for an error message
// (the log may be gone from the host once a run sandbox is removed).
func lastLines(path string, n int) string {
	text, _ := readTail(path, 0, 4096)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
