package supervisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// MaxStatusLine is the longest status line the reader accepts; longer lines
// are skipped whole.
const MaxStatusLine = 16 << 10

// maxReasonLen bounds the reason field of an accepted event.
const maxReasonLen = 4 << 10

// StatusDecoder reads status events one at a time from an untrusted stream:
// lines longer than MaxStatusLine, malformed lines, unknown kinds and events
// with invalid field values are skipped.
type StatusDecoder struct {
	r       *bufio.Reader
	skipped int
}

// NewStatusDecoder returns a decoder reading r.
func NewStatusDecoder(r io.Reader) *StatusDecoder {
	return &StatusDecoder{r: bufio.NewReaderSize(r, 4096)}
}

// Skipped returns how many lines were skipped so far.
func (d *StatusDecoder) Skipped() int { return d.skipped }

// Next returns the next valid event, or io.EOF at the end of the stream. A
// last line without its newline is still read; other errors are the reader's.
func (d *StatusDecoder) Next() (StatusEvent, error) {
	for {
		line, err := d.readLine()
		if len(line) > 0 {
			if e, ok := parseStatusLine(line); ok {
				return e, nil
			}
			d.skipped++
		}
		if err != nil {
			return StatusEvent{}, err
		}
	}
}

// readLine returns one line without its newline; a line over the limit is
// drained and returned empty (and counted as skipped).
func (d *StatusDecoder) readLine() ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := d.r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > MaxStatusLine+1 {
				tooLong = true
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			d.skipped++
			if err == nil {
				return nil, nil
			}
			return nil, err
		}
		return bytes.TrimSuffix(buf, []byte{'\n'}), err
	}
}

// ReadStatus reads every valid event of a status stream.
func ReadStatus(r io.Reader) ([]StatusEvent, error) {
	d := NewStatusDecoder(r)
	var out []StatusEvent
	for {
		e, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("cannot read status stream: %w", err)
		}
		out = append(out, e)
	}
}

func parseStatusLine(line []byte) (StatusEvent, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !utf8.Valid(line) {
		return StatusEvent{}, false
	}
	// The fields of StatusEvent, the time as MarshalJSON writes it.
	type plain StatusEvent
	var raw struct {
		Time string `json:"time"`
		plain
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return StatusEvent{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, raw.Time)
	if err != nil {
		return StatusEvent{}, false
	}
	e := StatusEvent(raw.plain)
	e.Time = t
	if e.Validate() != nil {
		return StatusEvent{}, false
	}
	return e, true
}

// Validate checks the field values of an event: a known kind, a daemon name
// where the kind needs one, and every number and name in range.
func (e StatusEvent) Validate() error {
	daemonKind := false
	switch e.Kind {
	case KindDaemonStarted, KindDaemonReady, KindDaemonCompleted, KindDaemonExited, KindDaemonRestarting,
		KindDaemonGaveUp, KindDaemonStopped, KindDaemonKilled:
		daemonKind = true
	case KindSupervisorReady, KindSupervisorFailed, KindSupervisorParked, KindMainExited, KindSupervisorExiting:
	default:
		return fmt.Errorf("cannot accept event: unknown kind %q", e.Kind)
	}
	switch {
	case e.Time.IsZero():
		return errors.New("cannot accept event: no time")
	case daemonKind && !daemonNameRE.MatchString(e.Daemon):
		return fmt.Errorf("cannot accept event: bad daemon name %q", e.Daemon)
	case !daemonKind && e.Daemon != "":
		return errors.New("cannot accept event: daemon name on a non-daemon event")
	case e.PID < 0 || e.PID > 1<<22:
		return fmt.Errorf("cannot accept event: pid %d out of range", e.PID)
	case e.ExitCode != nil && (*e.ExitCode < 0 || *e.ExitCode > 255):
		return fmt.Errorf("cannot accept event: exit code %d out of range", *e.ExitCode)
	case e.Signal != "" && !knownSignalName(e.Signal):
		return fmt.Errorf("cannot accept event: unknown signal %q", e.Signal)
	case e.Attempt < 0 || e.Attempt > 1<<30:
		return fmt.Errorf("cannot accept event: attempt %d out of range", e.Attempt)
	case e.DelayMS != nil && (*e.DelayMS < 0 || *e.DelayMS > int64(1<<40)):
		return fmt.Errorf("cannot accept event: delay %d out of range", *e.DelayMS)
	case len(e.Reason) > maxReasonLen || !utf8.ValidString(e.Reason):
		return errors.New("cannot accept event: reason too long or not UTF-8")
	}
	return nil
}
