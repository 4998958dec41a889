package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/airlock-dev/airlock/paths"
)

// An exec's own values (`airlock exec -e`, the API's env) are private like secret
// values: the host never puts them on a command line, where the Engine's exec
// configuration (docker inspect) and /proc/PID/cmdline (on the host as in the
// sandbox) would show them. It delivers them first, as the stdin of a non-TTY
// exec of `supervise deliver --exec-env PATH`, which writes them to PATH, a new
// file (0600) with a one-time random name on the sandbox's tmpfs; the exec's
// `supervise exec --values PATH` then reads them and removes the file before it
// runs the command.

// StashExecEnv reads an exec's environment from in (a JSON array of K=V, at
// most 4 MiB) and writes it to path, a file that must not exist yet, readable by
// this user only. Errors never show a value.
func StashExecEnv(path string, in io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(in, maxSecretsSize+1))
	if err != nil {
		return fmt.Errorf("cannot read the exec's environment: %w", err)
	}
	if len(data) > maxSecretsSize {
		return fmt.Errorf("cannot deliver the exec's environment: larger than %d bytes", maxSecretsSize)
	}
	if _, err := decodeExecEnv(data); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("cannot deliver the exec's environment: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("cannot deliver the exec's environment: %w", err)
	}
	return nil
}

// takeExecEnv reads the environment StashExecEnv left at path and removes the
// file. It must be a regular file of this user, not a link.
func takeExecEnv(path string) ([]string, error) {
	f, st, err := paths.OpenRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the exec's environment: %w", err)
	}
	defer f.Close()
	if s, ok := st.Sys().(*syscall.Stat_t); ok && int(s.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("cannot read the exec's environment: %s belongs to uid %d, not to this user", path, s.Uid)
	}
	if err := os.Remove(path); err != nil {
		return nil, fmt.Errorf("cannot remove the exec's environment: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretsSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the exec's environment: %w", err)
	}
	if len(data) > maxSecretsSize {
		return nil, fmt.Errorf("cannot read the exec's environment: larger than %d bytes", maxSecretsSize)
	}
	return decodeExecEnv(data)
}

// decodeExecEnv decodes a JSON array of K=V (a non-empty K without NUL).
func decodeExecEnv(data []byte) ([]string, error) {
	var env []string
	if err := json.Unmarshal(data, &env); err != nil {
		// The JSON error may quote a value: keep only its kind.
		return nil, errors.New("cannot decode the exec's environment: want a JSON array of NAME=VALUE strings")
	}
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("cannot decode the exec's environment: entry %d is not NAME=VALUE", i+1)
		}
	}
	return env, nil
}
