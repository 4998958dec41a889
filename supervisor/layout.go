package supervisor

import "path"

// The state directory inside a sandbox (design.md §7): what the supervisor writes
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

// Names of a daemon's log files in its DaemonLogDir: its stdout, its stderr,
// and both in the order the supervisor read them (OutputLog), one record per
// line: RecordStdout or RecordStderr, the line, a newline. A line longer than
// MaxLogLine is there in records of MaxLogLine bytes; a last line without a
// newline is a record too, once its stream ended.
const (
	StdoutLog = "stdout.log"
	StderrLog = "stderr.log"
	OutputLog = "output.log"
)

// The tags that start a record of OutputLog: the line was read from the
// daemon's stdout, or from its stderr. (client.RecordStdout and RecordStderr
// are the same: TestRecordTags.)
const (
	RecordStdout = "o "
	RecordStderr = "e "
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

// DaemonOutputLog is daemon name's combined log (OutputLog).
func DaemonOutputLog(name string) string { return path.Join(DaemonLogDir(name), OutputLog) }

// MaxLogLineOf is the most of one line of a daemon's log file that `airlock logs`
// prints: MaxLogLine, and for the combined log the record's tag too.
func MaxLogLineOf(file string) int {
	if path.Base(file) == OutputLog {
		return MaxLogLine + len(RecordStdout)
	}
	return MaxLogLine
}
