//go:build !linux

package supervisor

import "os"

// setTTYSizeIfNone: the supervisor runs on Linux only.
func setTTYSizeIfNone(*os.File, uint16, uint16) {}
