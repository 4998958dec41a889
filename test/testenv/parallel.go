package testenv

import (
	"flag"
	"os"
	"strconv"
)

// Parallelism returns the positive integer in the environment variable name,
// else def: how many tests of a package drive sandboxes at once.
func Parallelism(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// LiftParallelFlag sets -test.parallel to n unless the command line set it. go
// test runs at most -parallel (GOMAXPROCS: 2 here) parallel tests at once,
// which would leave a package's own bound of n without effect. Call it from
// TestMain, before m.Run.
func LiftParallelFlag(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
