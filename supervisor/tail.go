package supervisor

import (
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
	Path   string
	From   int64 // byte offset to start at
	Follow bool  // keep copying what is appended (waiting for the file to appear)
	Out    io.Writer
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
	if _, err := io.WriteString(o.Out, TailHeader); err != nil {
		return err
	}
	offset := o.From
	buf := make([]byte, 64<<10)
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
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
			if st.Size() < offset {
				offset = 0
			}
			copied := false
			for offset < st.Size() {
				n, err := f.ReadAt(buf[:min(int64(len(buf)), st.Size()-offset)], offset)
				if n > 0 {
					if _, werr := o.Out.Write(buf[:n]); werr != nil {
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
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
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
