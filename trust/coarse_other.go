//go:build !linux

package trust

import "time"

// coarsePassed cannot tell here: settle asks a file.
func coarsePassed(time.Time) bool { return false }
