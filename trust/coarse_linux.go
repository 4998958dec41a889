package trust

import (
	"time"

	"golang.org/x/sys/unix"
)

// coarsePassed reports whether the clock Linux stamps files with (the coarse
// real-time clock, or a finer one never behind it) has passed t: a file
// changed from now on carries a later time than t.
func coarsePassed(t time.Time) bool {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return false
	}
	return time.Unix(ts.Unix()).After(t)
}
