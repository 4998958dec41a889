package manifest

import "github.com/airlock-dev/airlock/manifest/specrules"

// Defaults are applied to the merged tables, before decoding, so that every value
// of the resolved manifest is explicit and `config --layers` can say "default".

// requiredField names the field without which a named entry is not defined at all.
var requiredField = map[string]string{
	"mounts":   "source",
	"copies":   "source",
	"daemons":  "command",
	"services": "image",
}

// sections are the tables of named entries, in output order.
var sections = []string{"mounts", "copies", "daemons", "services"}

// dropDisabled removes entries with enabled = false. Such an entry without its
// required field was defined by no layer, which is an error.
func dropDisabled(data map[string]any, origins map[string]origin) Errors {
	var errs Errors
	for _, sec := range sections {
		entries, _ := data[sec].(map[string]any)
		for name, v := range entries {
			e, _ := v.(map[string]any)
			if en, ok := e["enabled"].(bool); !ok || en {
				continue
			}
			if _, ok := e[requiredField[sec]]; !ok {
				errs = append(errs, locate(origins, []string{sec, name, "enabled"},
					"enabled = false, but no layer defines "+KeyPath(sec, name)+" ("+requiredField[sec]+" is missing)"))
			}
			delete(entries, name)
		}
	}
	return errs
}

func applyDefaults(data map[string]any, origins map[string]origin) {
	set := func(m map[string]any, path []string, key string, v any) {
		if _, ok := m[key]; ok {
			return
		}
		m[key] = v
		p := append(append([]string{}, path...), key)
		origins[KeyPath(p...)] = origin{path: p}
	}
	table := func(m map[string]any, key string) map[string]any {
		t, ok := m[key].(map[string]any)
		if !ok {
			t = map[string]any{}
			m[key] = t
		}
		return t
	}
	set(data, nil, "presets", []any{})
	set(data, nil, "tools", []any{})
	sb := table(data, "sandbox")
	sp := []string{"sandbox"}
	set(sb, sp, "workdir", "")
	set(sb, sp, "user", "")
	set(sb, sp, "shell", []any{})
	set(sb, sp, "harden", true)
	set(sb, sp, "privileged", false)
	set(sb, sp, "wait_for_daemons", false)
	set(sb, sp, "network", "bridge")
	set(sb, sp, "ports", []any{})
	set(sb, sp, "cap_add", []any{})
	set(sb, sp, "cap_drop", []any{})
	set(sb, sp, "project", "auto")
	set(sb, sp, "ready_timeout", "60s")
	set(sb, sp, "cpus", 0.0)
	set(sb, sp, "memory", "")
	if e, ok := sb["egress"].(map[string]any); ok {
		ep := []string{"sandbox", "egress"}
		set(e, ep, "allow", []any{})
		set(e, ep, "network", "bridge")
	}
	if pl, ok := sb["pool"].(map[string]any); ok {
		pp := []string{"sandbox", "pool"}
		set(pl, pp, "size", int64(0))
		set(pl, pp, "idle_ttl", DefaultPoolIdleTTL)
	}
	if b, ok := sb["build"].(map[string]any); ok {
		bp := []string{"sandbox", "build"}
		set(b, bp, "context", ".")
		set(b, bp, "dockerfile", "Dockerfile")
	}
	each := func(sec string, f func(e map[string]any, p []string)) {
		entries, _ := data[sec].(map[string]any)
		for name, v := range entries {
			if e, ok := v.(map[string]any); ok {
				p := []string{sec, name}
				set(e, p, "enabled", true)
				f(e, p)
			}
		}
	}
	each("mounts", func(e map[string]any, p []string) {
		set(e, p, "read_only", false)
		set(e, p, "missing", "fail")
		switch e["missing"] {
		case "create-dir":
			set(e, p, "create_mode", "755")
		case "create-file":
			set(e, p, "create_mode", "644")
		default:
			set(e, p, "create_mode", "")
		}
		set(e, p, "file_content", "")
	})
	each("copies", func(e map[string]any, p []string) {
		set(e, p, "exclude", []any{})
	})
	each("daemons", func(e map[string]any, p []string) {
		set(e, p, "cwd", "/")
		set(e, p, "signal", "SIGTERM")
		set(e, p, "timeout", int64(10))
		set(e, p, "restart", specrules.DefaultRestart)
		set(e, p, "max_restarts", int64(specrules.DefaultMaxRestarts))
		set(e, p, "harden", true)
		set(e, p, "oneshot", false)
		set(e, p, "after", []any{})
		if r, ok := e["ready"].(map[string]any); ok {
			set(r, append(p, "ready"), "timeout", "30s")
		}
	})
	each("services", func(e map[string]any, p []string) {
		set(e, p, "command", []any{})
		set(e, p, "required", true)
		if h, ok := e["healthcheck"].(map[string]any); ok {
			hp := append(p, "healthcheck")
			set(h, hp, "interval", "1s")
			set(h, hp, "timeout", "3s")
			set(h, hp, "retries", int64(30))
		}
	})
}
