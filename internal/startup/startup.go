// Package startup holds what a program knows of its own start: the time its packages began to
// initialise, and the garbage collector kept off while they do (the CLI's dependencies allocate a few
// megabytes in their init functions — JSON schemas compiled, tables built — which cost a collection
// cycle on every start).
//
// A program imports it first (its import path sorts before its heavy dependencies', and it needs only
// runtime/debug and time, so it initialises before they do) and calls GCOn at the top of main.
package startup

import (
	"runtime/debug"
	"time"
)

// Began is when this package initialised: about when the program's own packages began to (the
// runtime's start before it is not counted).
var Began = time.Now()

// before is the collector's setting from GOGC, turned off until GCOn.
var before = debug.SetGCPercent(-1)

// GCOn turns the garbage collector back on, with the setting it had at start.
func GCOn() { debug.SetGCPercent(before) }
