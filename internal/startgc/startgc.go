// Package startgc keeps the garbage collector off while a program's packages initialise: the CLI's
// dependencies allocate a few megabytes in their init functions (JSON schemas compiled, tables built),
// which used to cost a collection cycle on every start; Done turns it back on as GOGC set it.
//
// A program imports it first (its import path sorts before its heavy dependencies', and it needs
// only runtime/debug, so it initialises before they do) and calls Done at the top of main.
package startgc

import "runtime/debug"

// before is the collector's setting from GOGC, turned off until Done.
var before = debug.SetGCPercent(-1)

// Done turns the garbage collector back on, with the setting it had at start.
func Done() { debug.SetGCPercent(before) }
