package manifest

import (
	"strings"
	"testing"
)

// TestLoopbackValues: loopback takes shared or forwarded; shared needs ports
// that keep their numbers and no extra_hosts (a namespace shared has the
// sandbox's /etc/hosts).
func TestLoopbackValues(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`loopback = "pod"`, `services.db.loopback: must be one of`},
		{"loopback = \"shared\"\nports = [\"5433:5432\"]", `services.db.loopback: "shared" keeps a port's number`},
		{"loopback = \"shared\"\nports = [\"5432\"]\nextra_hosts = [\"h:1.2.3.4\"]", `services.db.loopback: "shared" takes the sandbox's /etc/hosts`},
	} {
		l := &Loader{Getenv: func(string) (string, bool) { return "", false }}
		_, err := l.LoadBytes(FileName, t.TempDir(), []byte("[sandbox]\nimage = \"x\"\n[services.db]\nimage = \"y\"\n"+c.body+"\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.body, err, c.want)
		}
	}
}
