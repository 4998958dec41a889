//go:build !linux

package supervisor

import "context"

// FsWatch: inotify is Linux's, and the supervisor runs only there.
func FsWatch(ctx context.Context, o WatchOptions) error { return errLinuxOnly }
