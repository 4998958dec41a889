package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// forwardsStdin reports whether stdin carries input worth forwarding: a terminal,
// a pipe or a file, but not /dev/null or another character device.
func forwardsStdin(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return r != nil
	}
	st, err := f.Stat()
	if err != nil {
		return false
	}
	if term.IsTerminal(int(f.Fd())) {
		return true
	}
	return st.Mode()&os.ModeCharDevice == 0
}

// parseEnvFlagsPrivate is parseEnvFlags for a sandbox's main command: every
// value, -e K=V as -e K (taken from the host environment, how CI passes
// tokens), travels privately like substituted values (as exec -e values do),
// never in the spec that PID 1 gets on its command line (its /proc cmdline,
// docker inspect). A later -e of the same name wins.
func (a *app) parseEnvFlagsPrivate(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		kvs, err := a.parseEnvFlags([]string{v})
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			k, val, _ := strings.Cut(kv, "=")
			out[k] = val
		}
	}
	return out, nil
}

// parseEnvFlags turns -e K=V (or -e K, taken from the host environment) into K=V.
func (a *app) parseEnvFlags(vals []string) ([]string, error) {
	var out []string
	for _, v := range vals {
		k, val, hasVal := strings.Cut(v, "=")
		if k == "" || strings.ContainsAny(k, "\x00") {
			return nil, withCode(ExitUsage, fmt.Errorf("invalid -e %q: use NAME=VALUE or NAME", v))
		}
		if !hasVal {
			hv, ok := a.getenv(k)
			if !ok {
				continue
			}
			val = hv
		}
		out = append(out, k+"="+val)
	}
	return out, nil
}

// parseLabels turns K=V flags into a map.
func parseLabels(vals []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" || strings.HasPrefix(k, "dev.airlock") {
			return nil, withCode(ExitUsage, fmt.Errorf("invalid --label %q: use KEY=VALUE (dev.airlock.* is reserved)", v))
		}
		out[k] = val
	}
	return out, nil
}
