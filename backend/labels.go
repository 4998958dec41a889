package backend

// The labels every object of a sandbox carries, on either backend, and the kinds
// of sandbox.

// Labels on every object of a sandbox (design.md §7).
const (
	LabelSandbox  = "dev.airlock.sandbox"
	LabelProject  = "dev.airlock.project"
	LabelPlanHash = "dev.airlock.plan-hash"
	// LabelRole is primary, service or helper.
	LabelRole = "dev.airlock.role"
	// LabelService names a service container's service.
	LabelService = "dev.airlock.service"
	// LabelKind is run or up.
	LabelKind = "dev.airlock.kind"
	// LabelDaemons counts the enabled daemons of the primary.
	LabelDaemons = "dev.airlock.daemons"
	// LabelCLIPid and LabelCLIStart identify the CLI process that owns a run sandbox.
	LabelCLIPid   = "dev.airlock.cli-pid"
	LabelCLIStart = "dev.airlock.cli-start"
	// LabelOwner carries the instance key of the control daemon that made the
	// object: a daemon touches only its own (and, for a sandbox in its store,
	// objects made before owners were recorded).
	LabelOwner = "dev.airlock.owner"
	// LabelStopTimeout is how long stop waits before SIGKILL, in seconds.
	LabelStopTimeout = "dev.airlock.stop-timeout"
	// LabelUser, on a primary that runs as root so that its supervisor can
	// start daemons as other users, is the sandbox user (main, exec, shell,
	// and the owner of what the files API writes).
	LabelUser = "dev.airlock.user"
)

// LabelPool, on every object of a sandbox made for a warm pool, is the pool's
// key; it stays on the objects of a sandbox a run claimed.
const LabelPool = "dev.airlock.pool"

// Kinds of sandbox.
const (
	KindRun = "run"
	KindUp  = "up"
)
