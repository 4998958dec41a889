//go:build linux

// Package inotifyev reads the events of one read of a Linux inotify descriptor: the CLI's watch of a
// project for `up`'s sync and the supervisor's file watches share it.
package inotifyev

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Event is one inotify event: the watch it came from, its mask, and the name of the entry of the
// watched folder it is about ("" for the folder itself).
type Event struct {
	Wd   int
	Mask uint32
	Name string
}

// Parse returns the events in b, what one read of an inotify descriptor gave, in order. A name the
// read cut short is left empty.
func Parse(b []byte) []Event {
	var out []Event
	for off := 0; off+unix.SizeofInotifyEvent <= len(b); {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&b[off]))
		nameLen := int(raw.Len)
		name := ""
		if nameLen > 0 && off+unix.SizeofInotifyEvent+nameLen <= len(b) {
			name = strings.TrimRight(string(b[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+nameLen]), "\x00")
		}
		off += unix.SizeofInotifyEvent + nameLen
		out = append(out, Event{Wd: int(raw.Wd), Mask: raw.Mask, Name: name})
	}
	return out
}
