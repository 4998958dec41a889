package kube_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/airlock-dev/airlock/backend/kube"
	"github.com/airlock-dev/airlock/internal/ids"
)

// assertLabel fails unless name is a DNS-1123 label, as Kubernetes requires of
// the names of Pods and containers.
func assertLabel(t *testing.T, name string) {
	t.Helper()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		t.Errorf("%q is not a DNS-1123 label: %v", name, errs)
	}
}

// TestPodNameKeepsAValidID: an ID that is already a short lowercase DNS label
// (a generated UUID, a chosen name) names its Pod unchanged.
func TestPodNameKeepsAValidID(t *testing.T) {
	for _, id := range []string{"1b4e28ba-2fa1-41d2-883f-0016d3cca427", "my-box", "abcd"} {
		if got, want := kube.PodName(id), "airlock-"+id; got != want {
			t.Errorf("PodName(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestPodNameSanitises: an ID that is not a lowercase DNS label of the room
// left (upper case, '_', too long) gets a valid name with a hash suffix, so
// that IDs differing only there still name different Pods.
func TestPodNameSanitises(t *testing.T) {
	long := strings.Repeat("a", 60)
	cases := []struct {
		id, prefix string
	}{
		{"MyBox", "airlock-mybox-"},
		{"my_box", "airlock-my-box-"},
		{"ABC_DEF-1", "airlock-abc-def-1-"},
		{long, "airlock-" + strings.Repeat("a", 46) + "-"},
		{strings.Repeat("B", 200), "airlock-" + strings.Repeat("b", 46) + "-"},
		{"x" + strings.Repeat("_", 50) + "y", "airlock-x-"}, // cut at a '-': no "--" before the hash
	}
	for _, c := range cases {
		if err := ids.Validate(c.id); err != nil {
			t.Fatalf("bad fixture: %v", err)
		}
		got := kube.PodName(c.id)
		assertLabel(t, got)
		if !strings.HasPrefix(got, c.prefix) || len(got) != len(c.prefix)+8 {
			t.Errorf("PodName(%q) = %q, want %q followed by an 8-digit hash", c.id, got, c.prefix)
		}
		if again := kube.PodName(c.id); again != got {
			t.Errorf("PodName(%q) is not stable: %q then %q", c.id, got, again)
		}
	}
	seen := map[string]string{}
	for _, id := range []string{"mybox", "MyBox", "MYBOX", "my_box", "my-box", long, long + "b"} {
		n := kube.PodName(id)
		if other, dup := seen[n]; dup {
			t.Errorf("ids %q and %q both name Pod %q", other, id, n)
		}
		seen[n] = id
	}
}

// TestContainerName: a service's container is svc-<name>, sanitised like Pod
// names when the name is not a lowercase DNS label.
func TestContainerName(t *testing.T) {
	cases := []struct {
		service, want string
		hashed        bool
	}{
		{"db", "svc-db", false},
		{"redis-cache", "svc-redis-cache", false},
		{"Redis", "svc-redis-", true},
		{"pg.main", "svc-pg-main-", true},
		{"my_db", "svc-my-db-", true},
		{strings.Repeat("s", 64), "svc-" + strings.Repeat("s", 50) + "-", true},
	}
	for _, c := range cases {
		got := kube.ContainerName(c.service)
		assertLabel(t, got)
		switch {
		case !c.hashed && got != c.want:
			t.Errorf("ContainerName(%q) = %q, want %q", c.service, got, c.want)
		case c.hashed && (!strings.HasPrefix(got, c.want) || len(got) != len(c.want)+8):
			t.Errorf("ContainerName(%q) = %q, want %q followed by an 8-digit hash", c.service, got, c.want)
		}
	}
}
