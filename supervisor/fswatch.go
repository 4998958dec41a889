package supervisor

import (
	"io"
	"time"
)

// WatchOptions are a watch's (FsWatch): the changes under Path, a directory,
// written to Out as lines of JSON (fsentry.Event) until ctx ends, Out fails
// or Path goes away.
type WatchOptions struct {
	Path string
	// MaxDirs bounds the directories watched (Path and those below it):
	// past it one overflow event says so, and what changes in the others is
	// not reported.
	MaxDirs int
	// Rate bounds the events written per second: past it they are counted,
	// not written, and an overflow event with the count follows the second.
	Rate int
	// Recursive watches the directories below Path too (else Path's entries
	// only).
	Recursive bool
	Out       io.Writer
	// Heartbeat is how often an empty line is written while nothing happens,
	// so that a reader gone is noticed (a write fails) even when nothing
	// changes; 0 for 10 s.
	Heartbeat time.Duration
}

// Defaults and ceilings of a watch's bounds.
const (
	DefaultWatchMaxDirs = 1024
	MaxWatchMaxDirs     = 65536
	DefaultWatchRate    = 1000
	MaxWatchRate        = 100000
)
