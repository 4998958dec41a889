//go:build race

package supervisor

// raceEnabled: under `go test -race` the supervisor binary is built with
// the race detector too, so the integration tests check its goroutines.
func init() { raceEnabled = true }
