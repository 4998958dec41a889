package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// maxSecretsSize bounds the secrets file.
const maxSecretsSize = 4 << 20

// Secrets holds the values of the secrets file, by key. Its String method
// never shows a value, so it is safe to print by mistake.
type Secrets struct{ values map[string]string }

func (s *Secrets) String() string {
	if s == nil {
		return "secrets(none)"
	}
	return fmt.Sprintf("secrets(%d keys)", len(s.values))
}

// forget drops the values once every process env is resolved.
func (s *Secrets) forget() {
	if s != nil {
		s.values = nil
	}
}

// LoadSecrets reads the secrets file (a JSON object of key to string value)
// once and deletes it, so the values live only in the supervisor's memory and
// in the processes that reference them. An empty path gives no secrets. A
// failure to delete is returned as warn, not as an error.
func LoadSecrets(path string) (s *Secrets, warn error, err error) {
	if path == "" {
		return &Secrets{}, nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read secrets file: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretsSize+1))
	f.Close()
	if rmErr := os.Remove(path); rmErr != nil {
		warn = fmt.Errorf("cannot delete secrets file: %w", rmErr)
	}
	if err != nil {
		return nil, warn, fmt.Errorf("cannot read secrets file %s: %w", path, err)
	}
	if len(data) > maxSecretsSize {
		return nil, warn, fmt.Errorf("cannot read secrets file %s: larger than %d bytes", path, maxSecretsSize)
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		// The JSON error may quote part of the file, which may hold a
		// value: keep only its kind.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, warn, fmt.Errorf("cannot decode secrets file %s: want an object of string values", path)
		}
		return nil, warn, fmt.Errorf("cannot decode secrets file %s: not a JSON object", path)
	}
	return &Secrets{values: values}, warn, nil
}

// resolveEnv builds a process environment: base (the supervisor's own), then
// the entries in order, each replacing a variable of the same name. The error
// names the entry and the secret key, never a value.
func resolveEnv(owner string, base []string, entries []EnvEntry, secrets *Secrets) ([]string, error) {
	env := make([]string, 0, len(base)+len(entries))
	index := make(map[string]int, len(base)+len(entries))
	set := func(name, value string) {
		kv := name + "=" + value
		if i, ok := index[name]; ok {
			env[i] = kv
			return
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	for _, kv := range base {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		set(name, value)
	}
	for _, e := range entries {
		if e.Value != nil {
			set(e.Name, *e.Value)
			continue
		}
		var v string
		var ok bool
		if secrets != nil {
			v, ok = secrets.values[e.Secret]
		}
		if !ok {
			return nil, fmt.Errorf("cannot set %s of %s: secret %q is not in the secrets file", e.Name, owner, e.Secret)
		}
		set(e.Name, v)
	}
	return env, nil
}

// defaultPath is the PATH the Engine gives a container whose image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// prependPath puts dirs in front of env's PATH (of defaultPath when env has
// none, or an empty one). A dir given twice is kept the first time.
func prependPath(env []string, dirs []string) []string {
	if len(dirs) == 0 {
		return env
	}
	var front []string
	for _, d := range dirs {
		if !slices.Contains(front, d) {
			front = append(front, d)
		}
	}
	old, ok := lookupEnv(env, "PATH")
	if !ok || old == "" {
		old = defaultPath
	}
	value := strings.Join(front, ":") + ":" + old
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != "PATH" {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+value)
}

// lookupEnv returns the value of name in env.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}
