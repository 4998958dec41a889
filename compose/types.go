package compose

import "strings"

// Options say which compose file to read and which of its services to take.
type Options struct {
	File string // absolute path of the compose file
	// Content is the compose file's content, and DotEnv its .env's (nil:
	// none), as the caller read them (airlock's loader records what it reads).
	Content, DotEnv []byte
	// Services are the services to take, with the services they depend on;
	// empty means every service of the active profiles.
	Services []string
	Profiles []string
	// Ignore lists compose keys of a service (ports, restart, …) that airlock
	// may drop: the user's knowing choice, never a silent one.
	Ignore []string
	// Environ is the host environment for interpolation (K=V); the compose
	// file's .env lies below it, as compose has it.
	Environ []string
	// KeepEnvReferences leaves ${VAR} in environment values as written, for
	// airlock's own substitution (which delivers them privately) rather than
	// compose's: what `airlock init --from` writes must not hold a host value.
	KeepEnvReferences bool
	// CheckEnvFile, when set, is asked about every env file a service or an
	// include names (absolute) before it is read: an error refuses it, and
	// Referenced returns an *EnvFileError.
	CheckEnvFile func(path string) error
}

// EnvFileError is an env file CheckEnvFile refused: File (a compose file) names
// it at Line, under the key Path (services, <name>, env_file).
type EnvFileError struct {
	File string
	Line int
	Path []string
	Err  error
}

func (e *EnvFileError) Error() string { return e.Err.Error() }
func (e *EnvFileError) Unwrap() error { return e.Err }

// Error is a compose key airlock cannot honour, or a compose file it cannot read.
type Error struct {
	Line int
	Path []string // services, <name>, <compose key>…; nil for the file
	Msg  string
}

// Result is what a compose file gives: a services table as a sandbox.toml
// layer holds it, and the line of every key path it set.
type Result struct {
	Services map[string]any
	Lines    map[string]int // key path, joined by "\x00" → line of the compose file
	// Files are the other files the services' keys came from (env_file).
	Files []string
}

// LineKey is the key of Result.Lines for a key path.
func LineKey(path ...string) string { return strings.Join(path, "\x00") }
