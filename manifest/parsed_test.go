package manifest_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/docker/go-connections/nat"

	"github.com/airlock-dev/airlock/manifest"
)

// The resolved manifest carries its strings that have a type of their own
// read (Resolved.Parsed): what each string says, one table a kind of value,
// and the same after the wire's round trip, which does not carry them.

func TestParsedSandboxPorts(t *testing.T) {
	b := func(ip, port string) nat.PortBinding { return nat.PortBinding{HostIP: ip, HostPort: port} }
	for _, c := range []struct {
		ports       string
		want        []nat.PortMapping
		wantExposed nat.PortSet
		wantBinds   nat.PortMap
	}{
		{`[]`, nil, nil, nil},
		{`["8080"]`, []nat.PortMapping{{Port: "8080/tcp", Binding: b("127.0.0.1", "")}},
			nat.PortSet{"8080/tcp": {}}, nat.PortMap{"8080/tcp": {b("127.0.0.1", "")}}},
		{`["0.0.0.0:80:8080", "127.0.0.1:18080:8080", "53:53/udp"]`, []nat.PortMapping{
			{Port: "8080/tcp", Binding: b("0.0.0.0", "80")},
			{Port: "8080/tcp", Binding: b("127.0.0.1", "18080")},
			{Port: "53/udp", Binding: b("127.0.0.1", "53")},
		}, nat.PortSet{"8080/tcp": {}, "53/udp": {}}, nat.PortMap{
			"8080/tcp": {b("0.0.0.0", "80"), b("127.0.0.1", "18080")},
			"53/udp":   {b("127.0.0.1", "53")},
		}},
		{`["8000-8001:9000-9001"]`, []nat.PortMapping{
			{Port: "9000/tcp", Binding: b("127.0.0.1", "8000")},
			{Port: "9001/tcp", Binding: b("127.0.0.1", "8001")},
		}, nat.PortSet{"9000/tcp": {}, "9001/tcp": {}}, nat.PortMap{
			"9000/tcp": {b("127.0.0.1", "8000")},
			"9001/tcp": {b("127.0.0.1", "8001")},
		}},
	} {
		r := load(t, map[string]string{"sandbox.toml": img + "ports = " + c.ports + "\n"})
		if got := r.Parsed.Sandbox.Ports; !reflect.DeepEqual(got, c.want) {
			t.Errorf("ports = %s: Parsed.Sandbox.Ports = %+v, want %+v", c.ports, got, c.want)
		}
		exposed, binds := r.Parsed.Sandbox.EnginePorts()
		if !reflect.DeepEqual(exposed, c.wantExposed) || !reflect.DeepEqual(binds, c.wantBinds) {
			t.Errorf("ports = %s: EnginePorts = %v, %v; want %v, %v", c.ports, exposed, binds, c.wantExposed, c.wantBinds)
		}
	}
}

func TestParsedSandboxMemory(t *testing.T) {
	for _, c := range []struct {
		line string
		want int64
	}{
		{``, 0},
		{`memory = "0"`, 0},
		{`memory = "512m"`, 512 << 20},
		{`memory = "2g"`, 2 << 30},
		{`memory = "1.5GiB"`, 3 << 29},
		{`memory = "6291456"`, manifest.MinMemory},
		{`memory = "1024t"`, manifest.MaxMemory},
	} {
		r := load(t, map[string]string{"sandbox.toml": img + c.line + "\n"})
		if got := r.Parsed.Sandbox.Memory; got != c.want {
			t.Errorf("%s: Parsed.Sandbox.Memory = %d, want %d", c.line, got, c.want)
		}
	}
}

func TestParsedExtraHosts(t *testing.T) {
	for _, c := range []struct {
		hosts string
		want  []manifest.ExtraHost
		// engine is each entry as the Engine takes it.
		engine []string
	}{
		{`[]`, nil, nil},
		{`["db.local:127.0.0.1"]`, []manifest.ExtraHost{{Name: "db.local", IP: "127.0.0.1"}}, []string{"db.local:127.0.0.1"}},
		{`["gw=host-gateway", "v6:::1", "b=[fd00::1]"]`,
			[]manifest.ExtraHost{{Name: "gw", IP: "host-gateway"}, {Name: "v6", IP: "::1"}, {Name: "b", IP: "fd00::1"}},
			[]string{"gw:host-gateway", "v6:::1", "b:fd00::1"}},
	} {
		r := load(t, map[string]string{"sandbox.toml": img + "extra_hosts = " + c.hosts + `

[services.db]
image = "postgres:16"
extra_hosts = ` + c.hosts + "\n"})
		for what, got := range map[string][]manifest.ExtraHost{
			"sandbox.extra_hosts":     r.Parsed.Sandbox.ExtraHosts,
			"services.db.extra_hosts": r.Parsed.Services["db"].ExtraHosts,
		} {
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s = %s: read %+v, want %+v", what, c.hosts, got, c.want)
				continue
			}
			for i, h := range got {
				if h.String() != c.engine[i] {
					t.Errorf("%s = %s: entry %d is %q for the Engine, want %q", what, c.hosts, i, h, c.engine[i])
				}
			}
		}
	}
}

// service loads a manifest of one service, db, with the given lines.
func service(t *testing.T, lines string) *manifest.Resolved {
	t.Helper()
	return load(t, map[string]string{"sandbox.toml": img + "\n[services.db]\nimage = \"postgres:16\"\n" + lines + "\n"})
}

func TestParsedServiceVolumes(t *testing.T) {
	for _, c := range []struct {
		volumes string
		want    []manifest.ServiceVolume
	}{
		{`[]`, nil},
		{`["./ci/init:/docker-entrypoint-initdb.d:ro", "pgdata:/var/lib/postgresql/data", "/scratch", "~/certs:/certs:rw", "/srv:/srv"]`, []manifest.ServiceVolume{
			{Kind: "bind", Source: "./ci/init", Target: "/docker-entrypoint-initdb.d", ReadOnly: true},
			{Kind: "volume", Source: "pgdata", Target: "/var/lib/postgresql/data"},
			{Kind: "anonymous", Target: "/scratch"},
			{Kind: "bind", Source: "~/certs", Target: "/certs"},
			{Kind: "bind", Source: "/srv", Target: "/srv"},
		}},
	} {
		r := service(t, "volumes = "+c.volumes)
		if got := r.Parsed.Services["db"].Volumes; !reflect.DeepEqual(got, c.want) {
			t.Errorf("volumes = %s: read %+v, want %+v", c.volumes, got, c.want)
		}
	}
}

func TestParsedServiceTmpfs(t *testing.T) {
	for _, c := range []struct {
		tmpfs string
		want  []manifest.Tmpfs
	}{
		{`[]`, nil},
		{`["/run"]`, []manifest.Tmpfs{{Target: "/run"}}},
		{`["/tmp:size=64m,mode=1777", "/cache:"]`, []manifest.Tmpfs{{Target: "/tmp", Options: "size=64m,mode=1777"}, {Target: "/cache"}}},
	} {
		r := service(t, "tmpfs = "+c.tmpfs)
		if got := r.Parsed.Services["db"].Tmpfs; !reflect.DeepEqual(got, c.want) {
			t.Errorf("tmpfs = %s: read %+v, want %+v", c.tmpfs, got, c.want)
		}
	}
}

func TestParsedServiceShmSize(t *testing.T) {
	for _, c := range []struct {
		line string
		want int64
	}{
		{``, 0},
		{`shm_size = "0"`, 0},
		{`shm_size = "64m"`, 64 << 20},
		{`shm_size = "1g"`, 1 << 30},
		{`shm_size = "512k"`, 512 << 10},
		{`shm_size = "1000"`, 1000},
	} {
		r := service(t, c.line)
		if got := r.Parsed.Services["db"].ShmSize; got != c.want {
			t.Errorf("%s: read %d, want %d", c.line, got, c.want)
		}
	}
}

func TestParsedServicePorts(t *testing.T) {
	for _, c := range []struct {
		ports string
		want  []manifest.ServicePort
	}{
		{`[]`, nil},
		{`["5432"]`, []manifest.ServicePort{{Listen: 5432, Port: 5432}}},
		{`["15432:5432", "127.0.0.1:6432:6432/tcp", "0.0.0.0:80:8080"]`, []manifest.ServicePort{{Listen: 15432, Port: 5432}, {Listen: 6432, Port: 6432}, {Listen: 80, Port: 8080}}},
	} {
		r := service(t, "ports = "+c.ports)
		if got := r.Parsed.Services["db"].Ports; !reflect.DeepEqual(got, c.want) {
			t.Errorf("ports = %s: read %+v, want %+v", c.ports, got, c.want)
		}
	}
}

// TestParsedWireRoundTrip: FromWire reads the same typed values again from
// the wire form, which holds none of them (it is the same with or without
// them), and a manifest without such values has none.
func TestParsedWireRoundTrip(t *testing.T) {
	p := newProject(t, map[string]string{"sandbox.toml": img + `ports = ["8080", "127.0.0.1:18080:80/udp"]
memory = "1.5g"
extra_hosts = ["gw=host-gateway"]

[env]
TOKEN = "${TOKEN}"

[services.db]
image = "postgres:16"
volumes = ["./init:/init:ro", "data:/data", "/anon"]
tmpfs = ["/tmp:size=64m"]
shm_size = "256m"
extra_hosts = ["h:10.0.0.1"]
ports = ["15432:5432"]
env = { PASS = "${TOKEN}" }

[services.cache]
image = "redis:7"
`})
	p.vault.values["TOKEN"] = "s3cret"
	r := p.mustLoad()
	if len(r.Parsed.Sandbox.Ports) != 2 || r.Parsed.Sandbox.Memory != 3<<29 || len(r.Parsed.Services["db"].Volumes) != 3 || r.Parsed.Services["db"].ShmSize != 256<<20 {
		t.Fatalf("the manifest's values are not read: %+v", r.Parsed)
	}

	w, values, err := r.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	bare := *r
	bare.Parsed = manifest.Parsed{}
	wb, _, err := bare.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.Resolved, wb.Resolved) {
		t.Errorf("the wire form changes with the typed values:\n%s\n%s", w.Resolved, wb.Resolved)
	}
	data, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var got manifest.Wire
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	back, err := manifest.FromWire(got, values)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Parsed, r.Parsed) {
		t.Errorf("FromWire(ToWire(r)).Parsed = %+v\nwant %+v", back.Parsed, r.Parsed)
	}
	masked, err := manifest.FromWire(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(masked.Parsed, r.Parsed) {
		t.Errorf("without the substituted values, Parsed = %+v\nwant %+v", masked.Parsed, r.Parsed)
	}

	plain := load(t, map[string]string{"sandbox.toml": img})
	if !reflect.DeepEqual(plain.Parsed, manifest.Parsed{}) {
		t.Errorf("a manifest without such values: Parsed = %+v, want none", plain.Parsed)
	}
	if back, err := manifest.FromWire(mustWire(t, plain), nil); err != nil || !reflect.DeepEqual(back.Parsed, manifest.Parsed{}) {
		t.Errorf("read back: Parsed = %+v, %v; want none", back.Parsed, err)
	}
}

func mustWire(t *testing.T, r *manifest.Resolved) manifest.Wire {
	t.Helper()
	w, _, err := r.ToWire()
	if err != nil {
		t.Fatal(err)
	}
	return w
}
