package daemon

import "testing"

// `daemon run --log-level info` wins over a config's runtime.log_level = "debug":
// a flag given is a flag given, even when it names the default.
func TestDaemonLogLevelFlagWinsWhenGiven(t *testing.T) {
	for _, c := range []struct {
		config, flag string
		set          bool
		want         string
	}{
		{"debug", "info", true, "info"},
		{"debug", "info", false, "debug"},
		{"warn", "error", true, "error"},
		{"info", "info", false, "info"},
	} {
		if got := daemonLogLevel(c.config, c.set, c.flag); got != c.want {
			t.Errorf("config %q, flag %q (given %v) = %q, want %q", c.config, c.flag, c.set, got, c.want)
		}
	}
}
