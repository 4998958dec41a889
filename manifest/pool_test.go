package manifest_test

import "testing"

// [sandbox.pool]: its defaults, and a local layer that sets it per developer.
func TestPoolDefaultsAndLocalLayer(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": img})
	if r.Sandbox.Pool != nil {
		t.Fatalf("a manifest without [sandbox.pool] has a pool: %+v", r.Sandbox.Pool)
	}
	r = load(t, map[string]string{
		"sandbox.toml":       img,
		"sandbox.local.toml": "[sandbox.pool]\nsize = 3\n",
	})
	if r.Sandbox.Pool == nil || r.Sandbox.Pool.Size != 3 || r.Sandbox.Pool.IdleTTL != "15m" {
		t.Fatalf("pool = %+v, want size 3 and idle_ttl 15m", r.Sandbox.Pool)
	}
	r = load(t, map[string]string{
		"sandbox.toml":       img + "[sandbox.pool]\nsize = 2\nidle_ttl = \"1h\"\n",
		"sandbox.local.toml": "[sandbox.pool]\nsize = 0\n",
	})
	if r.Sandbox.Pool == nil || r.Sandbox.Pool.Size != 0 || r.Sandbox.Pool.IdleTTL != "1h" {
		t.Fatalf("pool = %+v, want size 0 (the local layer's) and idle_ttl 1h", r.Sandbox.Pool)
	}
}
