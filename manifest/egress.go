package manifest

import (
	"maps"
	"slices"

	"github.com/airlock-dev/airlock/egress"
)

// HasEgress reports whether a sandbox made from r has egress rules.
func HasEgress(r *Resolved) bool { return r != nil && r.Sandbox.Egress != nil }

// ProxyOverrides lists the proxy variables a manifest with egress rules sets
// itself, where a user value wins over airlock's (airlock config warns about
// them).
func ProxyOverrides(r *Resolved) []string {
	if !HasEgress(r) {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(egress.ClientEnv("", nil))) {
		if _, ok := r.Env[k]; ok {
			out = append(out, "env."+k)
		}
		for _, d := range slices.Sorted(maps.Keys(r.Daemons)) {
			if _, ok := r.Daemons[d].Env[k]; ok {
				out = append(out, KeyPath("daemons", d, "env", k))
			}
		}
	}
	return out
}
