package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/control/store"
	"github.com/airlock-dev/airlock/supervisor"
)

// A primary container that dies between sandbox.started and sandbox.ready
// without a report of its supervisor (the supervisor could not even be executed:
// `exec /airlock/bin/airlock: no such file or directory`; or it died at once) has
// failed to start: the sandbox becomes failed with what the container said, never
// stays pending (the store has no pending → stopped). Such a failure carries
// extra "exited_early" (the container's exit code): nothing of the sandbox ran,
// so `airlock up` removes a sandbox it made for it, as for a taken host port.

// earlyOutputLines and earlyOutputBytes bound the container output a reason quotes.
const (
	earlyOutputLines = 5
	earlyOutputBytes = 1024
)

// startedNotReady reports whether the sandbox's last start has not reached
// sandbox.ready (nor ended otherwise) in its recorded history.
func (f *follower) startedNotReady(id string) bool {
	evs, err := f.store.Events(id, 0)
	if err != nil {
		return false
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Kind {
		case "sandbox.started":
			return true
		case "sandbox.ready", "sandbox.stopped", "sandbox.failed":
			return false
		}
	}
	return false
}

// failEarly records that the primary of sandbox id exited before it was ready.
func (f *follower) failEarly(id string, rec store.Sandbox, codep *int) {
	code, out, _ := f.containerEnd(rec.ID, rec.ContainerID)
	if code == nil {
		code = codep
	}
	f.emit(id, store.Event{Kind: "sandbox.failed", Reason: earlyReason(code, out), ExitCode: code, Extra: earlyExtra(code)}, store.StateFailed)
}

// earlyReason says why a sandbox whose container exited before it was ready failed.
func earlyReason(code *int, output string) string {
	why := "its container exited before the sandbox was ready"
	if code != nil {
		why = fmt.Sprintf("its container exited (exit code %d) before the sandbox was ready", *code)
	}
	if output == "" {
		return why
	}
	return why + ": " + output
}

func earlyExtra(code *int) map[string]string {
	v := "unknown"
	if code != nil {
		v = fmt.Sprint(*code)
	}
	return map[string]string{"exit_code": "125", "exited_early": v}
}

// containerEnd returns the exit code and the last lines of the output of a
// primary container that ran and exited; ok is false when it did not (it runs,
// it never started, it is gone).
func (f *follower) containerEnd(id, containerID string) (code *int, output string, ok bool) {
	if containerID == "" {
		return nil, "", false
	}
	code, out, ok := f.rtOf(id).PrimaryEnd(context.WithoutCancel(f.ctx()), containerID, earlyOutputLines)
	if !ok {
		return nil, "", false
	}
	return code, lastLines(supervisor.StripEndMarkers(out)), true
}

// lastLines joins the non-empty lines of out with "; ", within earlyOutputBytes.
func lastLines(out string) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > earlyOutputLines {
		lines = lines[len(lines)-earlyOutputLines:]
	}
	s := strings.Join(lines, "; ")
	if len(s) > earlyOutputBytes {
		s = "…" + strings.ToValidUTF8(s[len(s)-earlyOutputBytes:], "")
	}
	return s
}
