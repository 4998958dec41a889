package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/bench/benchdoc"
)

// streamBytes is what the throughput rows stream: 1 GiB of zeros.
const streamBytes = 1 << 30

// throughput runs c, which writes streamBytes to its stdout, and returns the
// bytes per second the reader here got through the pipe.
func throughput(c *exec.Cmd) (float64, error) {
	out, err := c.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	start := time.Now()
	if err := c.Start(); err != nil {
		return 0, err
	}
	n, cerr := io.Copy(io.Discard, out)
	werr := c.Wait()
	d := time.Since(start)
	switch {
	case werr != nil:
		return 0, fmt.Errorf("%s: %v: %s", c, werr, stderr.String())
	case cerr != nil:
		return 0, cerr
	case n != streamBytes:
		return 0, fmt.Errorf("%s: read %d bytes, want %d", c, n, streamBytes)
	}
	return float64(n) / d.Seconds(), nil
}

// echoLatency starts c on a terminal (an interactive shell), then types one
// character at a time and times until the terminal echoes it back, keys times;
// it returns the median.
func echoLatency(c *exec.Cmd, keys int) (time.Duration, error) {
	tty, err := pty.StartWithSize(c, &pty.Winsize{Rows: 24, Cols: 200})
	if err != nil {
		return 0, err
	}
	// Non-blocking, so that reads honour deadlines (a pty's file is not
	// pollable as opened).
	fd, err := unix.Dup(int(tty.Fd()))
	if err != nil {
		return 0, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return 0, err
	}
	ptmx := os.NewFile(uintptr(fd), tty.Name())
	defer func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		ptmx.Close()
		tty.Close()
	}()
	// The shell is there once it ran a command (its output, not the
	// terminal's echo of the line typed, which has the quote).
	if err := typeAndWait(ptmx, "echo sh-'ready'\r", "sh-ready\r\n", 30*time.Second); err != nil {
		return 0, fmt.Errorf("%s: the shell did not answer: %w", c, err)
	}
	drain(ptmx) // the prompt
	var ts benchdoc.Timings
	for i := 0; i < keys; i++ {
		k := "x" // the shell is quiet between keys: the next byte is its echo
		start := time.Now()
		if err := typeAndWait(ptmx, k, k, 5*time.Second); err != nil {
			return 0, fmt.Errorf("%s: key %d: %w", c, i, err)
		}
		ts = append(ts, time.Since(start))
	}
	_, _ = io.WriteString(ptmx, "\x15exit\r") // ^U clears the typed line
	return benchdoc.Median(ts), nil
}

// drain reads what the terminal has to say until it is quiet for 300 ms.
func drain(ptmx *os.File) {
	buf := make([]byte, 4096)
	for {
		_ = ptmx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := ptmx.Read(buf); err != nil {
			return
		}
	}
}

// typeAndWait writes s to the terminal and reads until want was echoed.
func typeAndWait(ptmx *os.File, s, want string, timeout time.Duration) error {
	if _, err := io.WriteString(ptmx, s); err != nil {
		return err
	}
	_ = ptmx.SetReadDeadline(time.Now().Add(timeout))
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(want)) {
		n, err := ptmx.Read(buf)
		if err != nil {
			return fmt.Errorf("read %q: %w", got, err)
		}
		got = append(got, buf[:n]...)
	}
	return nil
}
