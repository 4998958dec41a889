package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// The streams of a daemon's log that DaemonLog reads (LogOptions.Stream).
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	// StreamBoth is both, in the order the supervisor read them, as records:
	// each line is RecordStdout or RecordStderr, then a line of the stream
	// (SplitLog takes them apart).
	StreamBoth = "both"
)

// The tags that start each line of a log of StreamBoth.
const (
	RecordStdout = "o "
	RecordStderr = "e "
)

// LogOptions choose what DaemonLog reads of a daemon's log: its stdout, its
// stderr or both (Stream; "" is StreamBoth, or StreamStderr when Stderr is
// set), only its last Tail lines (Tail >= 0; -1 for all of it), and with
// Follow what is appended until the sandbox stops.
type LogOptions struct {
	Stream string
	// Stderr is Stream StreamStderr (kept for callers from before Stream).
	Stderr bool
	Tail   int
	Follow bool
}

// DaemonLog returns a daemon's log in a sandbox as the supervisor keeps it
// (every run's output, appended across restarts): GET
// /v1/sandboxes/{id}/logs. Lines longer than 64 KiB may come cut, with a
// marker saying how many bytes were left out; in a log of StreamBoth such a
// line comes in records of 64 KiB. Close ends a follow.
func (c *Client) DaemonLog(ctx context.Context, id, daemon string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{"daemon": {daemon}}
	stream := o.Stream
	if stream == "" {
		stream = StreamBoth
		if o.Stderr {
			stream = StreamStderr
		}
	}
	q.Set("stream", stream)
	if o.Tail >= 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, "/v1/sandboxes/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// SplitLog copies a log of StreamBoth from r: each record's line, with its
// newline, to stdout or stderr by its tag. A line without a tag goes to stdout
// as it is. It holds no line: a line goes out in the pieces it comes in.
func SplitLog(r io.Reader, stdout, stderr io.Writer) error {
	s := &LogSplitter{Stdout: stdout, Stderr: stderr}
	if _, err := io.Copy(s, r); err != nil {
		return err
	}
	return s.Close()
}

// LogSplitter is SplitLog as a writer: what is written to it is a log of
// StreamBoth; Close writes a tag-like start of a last line that never ended.
type LogSplitter struct {
	Stdout, Stderr io.Writer
	to             io.Writer // the current line's writer; nil at a line's start
	head           []byte    // the start of a line, until its tag is known
}

func (s *LogSplitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.to == nil {
			// A line's start: its first two bytes tell where it goes.
			take := min(len(RecordStdout)-len(s.head), len(p))
			if i := bytes.IndexByte(p[:take], '\n'); i >= 0 {
				take = i + 1
			}
			s.head = append(s.head, p[:take]...)
			p = p[take:]
			switch h := string(s.head); {
			case h == RecordStdout:
				s.to, s.head = s.Stdout, s.head[:0]
			case h == RecordStderr:
				s.to, s.head = s.Stderr, s.head[:0]
			case len(h) == len(RecordStdout) || h[len(h)-1] == '\n':
				// No tag: the line as it is.
				s.to = s.Stdout
				if _, err := s.to.Write(s.head); err != nil {
					return n - len(p), err
				}
				s.head = s.head[:0]
				if h[len(h)-1] == '\n' {
					s.to = nil
				}
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if _, err := s.to.Write(p); err != nil {
				return n, err
			}
			break
		}
		if _, err := s.to.Write(p[:i+1]); err != nil {
			return n, err
		}
		s.to, p = nil, p[i+1:]
	}
	return n, nil
}

// Close writes what is held of a last line that ended before its tag was
// whole, to stdout.
func (s *LogSplitter) Close() error {
	if len(s.head) == 0 {
		return nil
	}
	_, err := s.Stdout.Write(s.head)
	s.head = s.head[:0]
	return err
}
