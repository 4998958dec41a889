// Package startup holds what a program knows of its own start: the time its packages began to
// initialise, and the garbage collector's setting: off while they initialise (the CLI's dependencies
// allocate a few megabytes in their init functions — JSON schemas compiled, tables built — of which
// about 1 MB stays live), then a command's or a long-running process's.
//
// A program imports it first (its import path sorts before its heavy dependencies', and it needs only
// the standard library's runtime/debug, os and time, so it initialises before they do) and calls
// GCForCommand at the top of main; a process that runs for long (the daemon) calls GCOn.
package startup

import (
	"os"
	"runtime/debug"
	"time"
)

// Began is when this package initialised: about when the program's own packages began to (the
// runtime's start before it is not counted).
var Began = time.Now()

// before is the collector's setting from GOGC, turned off until GCOn or GCForCommand.
var before = debug.SetGCPercent(-1)

// commandPercent is a command's setting: a heap may grow to five times what stayed live at the last
// collection (and to 16 MB before the first) rather than twice (4 MB), so that a short command
// (`airlock run`, whose live heap is about 1 MB) does not collect at all; one that streams for long
// still collects, every 16 MB or so of allocation.
const commandPercent = 400

// GCOn turns the garbage collector back on, with the setting it had at start (GOGC's, else 100).
func GCOn() { debug.SetGCPercent(before) }

// GCForCommand turns the garbage collector back on for a command: commandPercent, unless GOGC sets it.
func GCForCommand() {
	if _, set := os.LookupEnv("GOGC"); set {
		GCOn()
		return
	}
	debug.SetGCPercent(commandPercent)
}
