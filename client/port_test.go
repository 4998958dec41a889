package client

import "testing"

func TestPortString(t *testing.T) {
	for p, want := range map[Port]string{
		{HostIP: "127.0.0.1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"}: "127.0.0.1:18080->8080/tcp",
		{HostIP: "::1", HostPort: 18080, ContainerPort: 8080, Protocol: "tcp"}:       "[::1]:18080->8080/tcp",
		{HostIP: "0.0.0.0", HostPort: 53, ContainerPort: 53, Protocol: "udp"}:        "0.0.0.0:53->53/udp",
	} {
		if got := p.String(); got != want {
			t.Errorf("%+v shows as %q, want %q", p, got, want)
		}
	}
}
