package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/supervisor"
)

// ErrExecNotRecorded is what SignalExec wraps when the sandbox has no record
// of the exec's process: it was never started there, or it has not yet
// recorded itself (it runs a moment after the backend started it).
var ErrExecNotRecorded = errors.New(supervisor.ErrExecUnknown.Error())

// SignalExec sends signal (a name or number, checked) to the process group of
// API exec execID in a running container, through an exec of `supervise signal
// --exec`: the same on every backend, none of which can signal an exec's
// process itself. gone is true when no process of the exec is left.
func SignalExec(ctx context.Context, ex Execer, containerID, execID, signal string) (gone bool, err error) {
	out := &limitedBuffer{n: 4096}
	code, err := ex.ExecIn(ctx, containerID, []string{SupervisorIn, "supervise", "signal", "--exec", execID, "--", signal}, nil, out, out)
	if err != nil {
		return false, failed("cannot signal exec %s: %v", execID, err)
	}
	msg := bytes.TrimSpace(out.bytes())
	if code != 0 {
		if bytes.Contains(msg, []byte("unknown flag: --exec")) {
			return false, failed("cannot signal exec %s: the sandbox runs the supervisor of an older airlock, which cannot signal an exec; recreate the sandbox (airlock down, then airlock up -d)", execID)
		}
		if bytes.Contains(msg, []byte(supervisor.ErrExecUnknown.Error())) {
			return false, &Error{Code: 125, Err: fmt.Errorf("cannot signal exec %s: %w", execID, ErrExecNotRecorded)}
		}
		return false, failed("cannot signal exec %s: %s", execID, bytes.TrimPrefix(msg, []byte("airlock: ")))
	}
	return bytes.Equal(msg, []byte("gone")), nil
}
