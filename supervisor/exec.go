package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/paths"
)

// maxExecEnvSize bounds the exec env file the exec side reads.
const maxExecEnvSize = 4 << 20

// writeExecEnv writes env for `supervise exec`, atomically and readable only by
// the sandbox user.
func writeExecEnv(path string, env []string) error {
	b, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("cannot encode the exec environment: %w", err)
	}
	if err := paths.WriteFileAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("cannot write the exec environment: %w", err)
	}
	return nil
}

// findCommand looks argv0 up in env's PATH; when it cannot be run the error
// says so, with the exit code for it: 127 when it is not found, else 126.
func findCommand(argv0 string, env []string) (path string, code int, err error) {
	path, err = lookPath(argv0, env)
	if err != nil {
		code = ExitNotExec
		if errors.Is(err, errNotFound) {
			code = ExitNotFound
		}
		return "", code, fmt.Errorf("cannot run %s: %w", argv0, err)
	}
	return path, 0, nil
}

// ExecOptions are the inputs of Exec (`airlock supervise exec`).
type ExecOptions struct {
	SpecPath string
	Env      []string // K=V, over the sandbox's main environment
	// ValuesPath, when set, is a file StashExecEnv wrote: more K=V over Env,
	// read once, then removed.
	ValuesPath string
	Workdir    string // "" for the spec's main cwd
	// PIDDir is where an API exec's PID file goes (ExecIDEnv among Env):
	// "" for ExecPIDDir.
	PIDDir string
	Argv   []string
}

// Exec replaces the current process with argv, run the way the sandbox runs its
// main command: the main command's environment (written by the supervisor to the
// spec's exec_env_file, so substituted values never enter the exec's own
// configuration), its user (main.user), its working directory and its hardening. It returns only on
// failure, with 127 (not found), 126 (not executable) or 125.
func Exec(o ExecOptions) (int, error) {
	if len(o.Argv) == 0 || o.Argv[0] == "" {
		return ExitAirlock, errors.New("cannot exec: no command given")
	}
	// The values go first, so that the file is gone whatever fails next.
	var values []string
	if o.ValuesPath != "" {
		var err error
		if values, err = takeExecEnv(o.ValuesPath); err != nil {
			return ExitAirlock, err
		}
	}
	spec, err := LoadSpec(o.SpecPath)
	if err != nil {
		return ExitAirlock, err
	}
	env := os.Environ()
	if spec.ExecEnvFile != "" {
		f, err := os.Open(spec.ExecEnvFile)
		if err == nil {
			var saved []string
			err = json.NewDecoder(io.LimitReader(f, maxExecEnvSize)).Decode(&saved)
			f.Close()
			if err != nil {
				return ExitAirlock, fmt.Errorf("cannot read the sandbox environment: %w", err)
			}
			env = saved
		}
	}
	// A terminal asked with a size has it before the command runs.
	extra := takeTTYSize(slices.Concat(o.Env, values))
	if id := execIDOf(extra); id != "" {
		// An API exec: recorded so that it can be signalled (execpid.go).
		// Failing that, it runs all the same; a signal then says why not.
		dir := o.PIDDir
		if dir == "" {
			dir = ExecPIDDir
		}
		if err := RecordExecPID(dir, id); err != nil {
			fmt.Fprintf(os.Stderr, "airlock: warning: %v\n", err)
		}
	}
	for _, kv := range extra {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			env = setEnv(env, kv)
		}
	}
	// The main command's user (a root supervisor runs it as sandbox.user,
	// main.user): the exec starts as the container's user and becomes that
	// one, groups first, before it looks at the working directory or the
	// command, so both are checked with its rights.
	acct, err := lookupAccount("the command", spec.Main.User)
	if err != nil {
		return ExitAirlock, err
	}
	if c := acct.credential(); c != nil {
		if isTerminal(os.Stdin) {
			// The exec's terminal becomes the user's, as login makes it,
			// so what reopens it (ttyname) may.
			_ = os.Stdin.Chown(int(c.Uid), int(c.Gid))
		}
		if err := switchUser(c); err != nil {
			return ExitAirlock, fmt.Errorf("cannot run the command as user %q: %w", spec.Main.User, err)
		}
	}
	dir := o.Workdir
	if dir == "" {
		dir = spec.Main.Cwd
	}
	if dir != "" {
		if err := os.Chdir(dir); err != nil {
			if errors.Is(err, syscall.EACCES) {
				if werr := workdirDenied(dir, uint32(os.Getuid()), uint32(os.Getgid()), currentGroups(), ""); werr != nil {
					return ExitAirlock, werr
				}
			}
			return ExitAirlock, fmt.Errorf("cannot use working directory %s: %w", dir, err)
		}
	}
	path, code, err := findCommand(o.Argv[0], env)
	if err != nil {
		return code, err
	}
	if spec.Main.Harden == nil || *spec.Main.Harden {
		// no_new_privs is a thread's: the exec below must come from the
		// thread that set it, not from another the goroutine moved to.
		runtime.LockOSThread()
		if err := setNoNewPrivs(); err != nil {
			return ExitAirlock, fmt.Errorf("cannot set no_new_privs: %w", err)
		}
	}
	err = syscall.Exec(path, o.Argv, env)
	code = ExitNotExec
	if errors.Is(err, syscall.ENOENT) {
		code = ExitNotFound
	}
	return code, fmt.Errorf("cannot run %s: %w", o.Argv[0], err)
}

// currentGroups are the process's supplementary groups.
func currentGroups() []uint32 {
	gs, _ := os.Getgroups()
	out := make([]uint32, 0, len(gs))
	for _, g := range gs {
		out = append(out, uint32(g))
	}
	return out
}

// setEnv sets K=V in env, replacing an earlier K.
func setEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	out := env[:0:0]
	for _, e := range env {
		if ek, _, _ := strings.Cut(e, "="); ek != k {
			out = append(out, e)
		}
	}
	return append(out, kv)
}

// WrapOptions are the inputs of Wrap (`airlock supervise wrap`).
type WrapOptions struct {
	SecretsPath string   // a secrets file (read once, then deleted), or
	Socket      string   // where the values are delivered (see ReceiveSecrets)
	Env         []string // NAME=key: NAME gets the secrets file's value for key
	Argv        []string
}

// Wrap starts a service container's own command with substituted env values that
// must not sit in the container's configuration: it reads them from the secrets
// file (and deletes it), sets them over its environment and replaces itself with
// argv. It returns only on failure (125, 126, 127); messages name keys, never values.
func Wrap(o WrapOptions) (int, error) {
	if len(o.Argv) == 0 || o.Argv[0] == "" {
		return ExitAirlock, errors.New("cannot wrap: no command given")
	}
	var secrets *Secrets
	var err error
	if o.Socket != "" {
		secrets, err = ReceiveSecrets(o.Socket, DeliveryTimeout)
	} else {
		var warn error
		secrets, warn, err = LoadSecrets(o.SecretsPath)
		if warn != nil {
			fmt.Fprintf(os.Stderr, "airlock: warning: %v\n", warn)
		}
	}
	if err != nil {
		return ExitAirlock, err
	}
	env := os.Environ()
	for _, e := range o.Env {
		name, key, ok := strings.Cut(e, "=")
		if !ok || name == "" || key == "" {
			return ExitAirlock, fmt.Errorf("cannot wrap: --env %q is not NAME=key", e)
		}
		v, ok := secrets.values[key]
		if !ok {
			return ExitAirlock, fmt.Errorf("cannot wrap: the secrets file has no %s", key)
		}
		env = setEnv(env, name+"="+v)
	}
	secrets.forget()
	path, code, err := findCommand(o.Argv[0], env)
	if err != nil {
		return code, err
	}
	err = syscall.Exec(path, o.Argv, env)
	return ExitNotExec, fmt.Errorf("cannot run %s: %w", o.Argv[0], err)
}
