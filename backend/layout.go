package backend

// The places inside a sandbox that both backends lay out alike.

// Paths inside the primary container. Nothing of airlock's host state is mounted
// into a sandbox (design.md §7): the spec is uploaded through the Engine API, the
// status stream and daemon logs live in the container's own filesystem (the
// state dir, whose layout supervisor/layout.go gives: supervisor.StateDir,
// StatusFile, DaemonLogFile) and are read through the API, and secret values
// are delivered to a socket on a tmpfs.
const (
	AirlockIn    = "/airlock"
	BinMount     = AirlockIn + "/bin"       // the injected supervisor volume (read-only)
	SupervisorIn = BinMount + "/airlock"    // its path
	SpecIn       = AirlockIn + "/spec.json" // the supervisor spec (uploaded, holds no secret)
	RunMount     = AirlockIn + "/run"       // a tmpfs: secrets socket and exec environment
	ExecEnvIn    = RunMount + "/env.json"
	// SecretsSocketIn is where PID 1 (or a service's wrapper) waits for its values.
	SecretsSocketIn = RunMount + "/secrets.sock"
	// StatusReadIn is where the daemon's follower reports how much of the status
	// stream it read; the supervisor waits for it at exit.
	StatusReadIn = RunMount + "/status.read"
)
