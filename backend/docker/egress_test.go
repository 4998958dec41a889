package docker

import (
	"reflect"
	"testing"

	"github.com/airlock-dev/airlock/backend"
)

// TestEgressPrimaryConfig: behind egress rules the primary's only DNS server
// is the proxy's resolver and NET_RAW is dropped, unless cap_add names it (or
// ALL); without egress rules neither changes.
func TestEgressPrimaryConfig(t *testing.T) {
	rt := &Runtime{}
	sb := &backend.Sandbox{ID: "abc", Name: "airlock-abc", Network: "airlock-abc", Own: &sandboxState{egressDNS: "172.30.0.2"}}
	cases := []struct {
		extra    string
		wantDrop []string
	}{
		{"", []string{"CAP_NET_RAW"}},
		{`cap_drop = ["mknod"]`, []string{"CAP_MKNOD", "CAP_NET_RAW"}},
		{`cap_add = ["net_raw"]`, nil},
		{`cap_add = ["ALL"]`, nil},
		{`cap_drop = ["NET_RAW"]`, []string{"CAP_NET_RAW"}},
	}
	for _, c := range cases {
		r := loadBytes(t, "[sandbox]\nimage = \"x\"\n"+c.extra+"\n[sandbox.egress]\nallow = [\"example.org\"]\n", nil)
		_, host, _, err := primaryConfig(rt.Remote, sb, &backend.Request{}, r, &hostPlan{}, sandboxUser{Spec: "0:0"}, "x", "vol", map[string]string{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"172.30.0.2"}; !reflect.DeepEqual(host.DNS, want) {
			t.Errorf("%s: DNS = %q, want %q", c.extra, host.DNS, want)
		}
		if !reflect.DeepEqual([]string(host.CapDrop), c.wantDrop) {
			t.Errorf("%s: CapDrop = %q, want %q", c.extra, host.CapDrop, c.wantDrop)
		}
	}
	r := loadBytes(t, "[sandbox]\nimage = \"x\"\n", nil)
	_, host, _, err := primaryConfig(rt.Remote, &backend.Sandbox{ID: "abc", Name: "airlock-abc", Network: SharedNetwork}, &backend.Request{}, r, &hostPlan{}, sandboxUser{Spec: "0:0"}, "x", "vol", map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if host.DNS != nil || host.CapDrop != nil {
		t.Errorf("without egress rules: DNS %q, CapDrop %q", host.DNS, host.CapDrop)
	}
}
