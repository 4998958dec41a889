package supervisor

import "path"

// The state directory inside a sandbox (DESIGN §7): what the supervisor writes
// for the host to read through the Engine API. It is owned by the sandbox user
// and kept across a stop and a start. The runtime points the spec's StatusFile
// and LogDir here; the control daemon reads the status stream and `airlock logs`
// the daemons' logs from here.
const (
	// StateDir holds the status stream and the daemons' logs.
	StateDir = "/airlock/state"
	// StatusFile is the status stream (JSON lines, see StatusEvent).
	StatusFile = StateDir + "/status.jsonl"
	// DaemonLogRoot holds one directory of logs per daemon (DaemonLogDir).
	DaemonLogRoot = StateDir + "/daemons"
)

// Names of a daemon's log files in its DaemonLogDir.
const (
	StdoutLog = "stdout.log"
	StderrLog = "stderr.log"
)

// DaemonLogDir is the directory of daemon name's logs.
func DaemonLogDir(name string) string { return path.Join(DaemonLogRoot, name) }

// DaemonLogFile is daemon name's stdout log, or with stderr its stderr log.
func DaemonLogFile(name string, stderr bool) string {
	if stderr {
		return path.Join(DaemonLogDir(name), StderrLog)
	}
	return path.Join(DaemonLogDir(name), StdoutLog)
}
