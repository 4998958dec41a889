//go:build !linux

package supervisor

// fileWatch is inotify's (tailwatch_linux.go); elsewhere Tail polls.
type fileWatch struct{}

func watchFile(string) *fileWatch { return nil }

func (*fileWatch) opened(string) {}

func (*fileWatch) changed() <-chan struct{} { return nil }

func (*fileWatch) close() {}
