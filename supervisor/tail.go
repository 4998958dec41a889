package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/paths"
)

// TailHeader is the first line Tail writes, before any byte of the file: a reader
// of the exec's output knows by it that the output is the file's, not an error the
// Engine or the runtime wrote into the stream.
const TailHeader = "airlock-tail v1\n"

// TailOptions are the inputs of Tail (`airlock supervise tail`), which the host
// runs as an exec to read the status stream and daemon logs through the Engine API.
type TailOptions struct {
	Path string
	From int64 // byte offset to start at
	// ByLines starts at the last Lines lines of the file instead of From
	// (TailStart), found by reading backwards from its end.
	ByLines bool
	Lines   int
	// MaxLine, when > 0, cuts every line longer than that: its first MaxLine
	// bytes are copied, then LineCut's marker, then its newline; the rest is
	// read in the sandbox and never copied. 0 copies the bytes as they are.
	MaxLine int
	Follow  bool // keep copying what is appended (waiting for the file to appear)
	Out     io.Writer
	// Poll is how often a followed file is looked at (default 10 ms).
	Poll time.Duration
	// Report, when set, is a file where Tail writes the offset it has copied
	// up to after each copy (the supervisor waits for it at exit).
	Report string
}

// Tail copies a regular file from an offset to Out and, with Follow, what is
// appended to it until ctx ends. Anything but a regular file is refused, so a
// FIFO or a device planted by a process in the sandbox cannot block the reader.
// A file that shrinks is read again from its start.
func Tail(ctx context.Context, o TailOptions) error {
	if o.Poll <= 0 {
		o.Poll = 10 * time.Millisecond
	}
	var w *fileWatch
	if o.Follow {
		// Woken by a change of the file's folder; polled only without inotify
		// (or before the folder exists), and every tailIdle besides.
		if w = watchFile(ctx, o.Path); w != nil {
			defer w.close()
		}
	}
	if _, err := io.WriteString(o.Out, TailHeader); err != nil {
		return err
	}
	offset := o.From
	fromLines := o.ByLines
	buf := make([]byte, 64<<10)
	out := &lineCutter{w: o.Out, max: o.MaxLine}
	defer out.flush()
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	wait := o.Poll
	for {
		copied := false
		if f == nil {
			var err error
			f, err = openRegular(o.Path)
			switch {
			case errors.Is(err, os.ErrNotExist) && o.Follow:
			case err != nil:
				return err
			}
		}
		if f != nil {
			st, err := f.Stat()
			if err != nil {
				return fmt.Errorf("cannot read %s: %w", o.Path, err)
			}
			if fromLines {
				fromLines = false
				if offset, err = TailStart(f, st.Size(), o.Lines); err != nil {
					return fmt.Errorf("cannot read %s: %w", o.Path, err)
				}
			}
			if st.Size() < offset {
				offset = 0
				if err := out.flush(); err != nil {
					return err
				}
			}
			copied = false
			for offset < st.Size() {
				if out.cut {
					// A cut line's rest is not copied: its holes need not be read.
					if d, ok := nextData(f, offset, st.Size()); ok && d > offset {
						out.skipped += d - offset
						offset = d
						continue
					}
				}
				n, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-offset)], offset)
				if n > 0 {
					if _, werr := out.Write(buf[:n]); werr != nil {
						return werr
					}
					offset += int64(n)
					copied = true
				}
				if err != nil {
					break
				}
			}
			if o.Report != "" && (copied || offset == 0) {
				_ = os.WriteFile(o.Report, []byte(strconv.FormatInt(offset, 10)), 0o644)
			}
		}
		if !o.Follow {
			return nil
		}
		if w != nil && f != nil {
			w.wait(tailIdle)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		// Polled (no inotify: a host allows 128 instances per user by
		// default, fs.inotify.max_user_instances): every o.Poll after a
		// change, less often the longer the file stays as it was.
		if copied {
			wait = o.Poll
		} else {
			wait = min(2*wait, max(o.Poll, tailPollMax))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// tailPollMax is the longest a polling follower waits between two looks at
// a file that does not change.
const tailPollMax = 100 * time.Millisecond

// tailIdle is how long a follower woken by changes (fileWatch) waits at most
// before it looks at its file anyway.
const tailIdle = time.Second

// MaxLogLine is the most of one line `airlock logs` prints: a longer line is cut
// (its first MaxLogLine bytes, then LineCut's marker), so that no reader holds
// more of a line, in the sandbox or on the host.
const MaxLogLine = 64 << 10

// LineCut is the marker printed after the first MaxLogLine bytes of a line that
// had n more.
func LineCut(n int64) string {
	return fmt.Sprintf(" [airlock: %d more bytes of this line not shown]", n)
}

// lineCutter copies lines, cutting each after max bytes (LineCut); max 0 copies
// everything as it is.
type lineCutter struct {
	w       io.Writer
	max     int
	lineLen int   // bytes of the current line copied
	cut     bool  // the current line passed max
	skipped int64 // bytes of the current line not copied
}

func (c *lineCutter) Write(p []byte) (int, error) {
	n := len(p)
	if c.max <= 0 {
		_, err := c.w.Write(p)
		return n, err
	}
	for len(p) > 0 {
		if c.cut {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				c.skipped += int64(len(p))
				return n, nil
			}
			c.skipped += int64(i)
			if _, err := io.WriteString(c.w, LineCut(c.skipped)+"\n"); err != nil {
				return n, err
			}
			c.cut, c.skipped, c.lineLen = false, 0, 0
			p = p[i+1:]
			continue
		}
		room := c.max - c.lineLen
		if i := bytes.IndexByte(p[:min(len(p), room+1)], '\n'); i >= 0 {
			if _, err := c.w.Write(p[:i+1]); err != nil {
				return n, err
			}
			c.lineLen = 0
			p = p[i+1:]
			continue
		}
		if len(p) <= room {
			_, err := c.w.Write(p)
			c.lineLen += len(p)
			return n, err
		}
		if _, err := c.w.Write(p[:room]); err != nil {
			return n, err
		}
		c.cut, c.skipped, c.lineLen = true, 0, c.max
		p = p[room:]
	}
	return n, nil
}

// flush ends a cut line that has no newline yet with its marker (and no newline).
func (c *lineCutter) flush() error {
	var err error
	if c.cut {
		_, err = io.WriteString(c.w, LineCut(c.skipped))
	}
	c.cut, c.skipped, c.lineLen = false, 0, 0
	return err
}

// TailStart returns the offset of the last n lines of the file r of the given
// size, reading backwards from its end in blocks of 64 KiB (it holds one block,
// whatever the length of a line; the holes of a sparse file are skipped unread).
// A last line without a newline counts as one of the n, as for tail -n.
func TailStart(r io.ReaderAt, size int64, n int) (int64, error) {
	if n <= 0 {
		return size, nil
	}
	buf := make([]byte, 64<<10)
	pos := size
	if pos > 0 {
		if _, err := r.ReadAt(buf[:1], pos-1); err != nil {
			return 0, err
		}
		if buf[0] == '\n' {
			pos-- // the last line's own newline
		}
	}
	count := 0
	f, sparse := r.(interface{ Fd() uintptr })
	for step := int64(len(buf)); pos > 0; {
		if sparse {
			// A hole of a sparse file holds no newline: skip it without
			// reading it, in ever longer steps.
			if from := max(0, pos-step); from < pos {
				if d, ok := nextData(f, from, pos); ok && d >= pos {
					pos, step = from, 2*step
					continue
				}
			}
			step = int64(len(buf))
		}
		start := max(0, pos-int64(len(buf)))
		b := buf[:pos-start]
		if _, err := r.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if bytes.IndexByte(b, '\n') < 0 {
			pos = start // no newline (IndexByte is the fast one)
			continue
		}
		for i := bytes.LastIndexByte(b, '\n'); i >= 0; i = bytes.LastIndexByte(b[:i], '\n') {
			// The line after this newline is whole.
			if count++; count == n {
				return start + int64(i) + 1, nil
			}
		}
		pos = start
	}
	return 0, nil
}

// openRegular opens path for reading without blocking on a FIFO and refuses
// anything but a regular file.
func openRegular(path string) (*os.File, error) {
	f, _, err := paths.OpenRegular(path, os.O_RDONLY, 0)
	if errors.Is(err, paths.ErrNotRegular) {
		return nil, fmt.Errorf("cannot read %s: not a regular file", path)
	}
	return f, err
}

// CutLines returns a writer that copies lines to w, each cut after max bytes
// as Tail's MaxLine cuts them (LineCut's marker after the first max bytes),
// and the function that ends a cut last line that has no newline yet.
func CutLines(w io.Writer, max int) (io.Writer, func() error) {
	c := &lineCutter{w: w, max: max}
	return c, c.flush
}
