//go:build !linux

package supervisor

import (
	"context"
	"time"
)

// fileWatch is inotify's (tailwatch_linux.go); elsewhere a follower polls.
type fileWatch struct{}

func watchFile(context.Context, string) *fileWatch { return nil }

func (*fileWatch) wait(time.Duration) {}

func (*fileWatch) close() {}
