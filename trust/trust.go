// Package trust remembers the manifest layers each project's sandboxes started
// from and tells which of them changed while a sandbox could write them.
//
// The record is one JSON file (state.json, 0600, in a 0700 folder of the user's
// data dir, never in a project or a sandbox) guarded by an flock (state.lock). It
// holds, per manifest: the accepted content of every layer file the last accepted
// load read (sandbox.toml, sandbox.local.toml, presets named by path, user
// presets, .airlockignore; a file that was absent is recorded as absent), when
// it was accepted, and the layers flagged as changed inside a sandbox; and, for
// the user, the sessions: each sandbox started by the CLI, with the host paths
// it could write (its bind-mounted project, its writable mounts), when it
// started and when it ended.
//
// A layer whose content differs from the accepted one was changed inside a
// sandbox when a session that could write it ran at its change time (its
// ctime, which code in a sandbox cannot set back; a removed file counts as
// changed inside whenever such a session ran since the acceptance), or when
// the CLI saw the difference itself as the sandbox's main command ended. Any
// other change was made while no sandbox ran and is accepted without a word.
package trust

import (
	"time"
)

// Lag opens every session's time window earlier than its start: a file's
// ctime comes from a coarse clock (a tick behind, or truncated to the second
// by some file systems), so a write right at the start may seem to precede
// it. The window needs no such margin at its end: a ctime is never later than
// the write.
const Lag = time.Second

// Retention is how long an ended session is kept for the projects it could
// write but which were not looked at since; MaxSessions bounds their number.
const (
	Retention   = 30 * 24 * time.Hour
	MaxSessions = 512
)
