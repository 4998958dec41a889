package manifest_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/manifest"
)

// Services as compose files write them (issue 24): the keys compose's services
// use, with compose's meaning, and errors that name the key and the line.

const svc = img + "[services.db]\nimage = \"postgres\"\n"

func TestServiceComposeKeys(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": svc + `entrypoint = ["docker-entrypoint.sh"]
user = "999:999"
working_dir = "/var/lib/postgresql"
shm_size = "256m"
extra_hosts = ["db.local:127.0.0.1", "gw=host-gateway", "v6:::1"]
aliases = ["postgres", "database"]
volumes = ["./ci/init:/docker-entrypoint-initdb.d:ro", "pgdata:/var/lib/postgresql/data", "/scratch"]
tmpfs = ["/tmp", "/run:size=64m"]
cap_add = ["SYS_NICE"]
cap_drop = ["NET_RAW"]
ulimits = { nofile = { soft = 20000, hard = 40000 }, nproc = 65535 }
healthcheck = { cmd = ["pg_isready"], start_period = "30s", start_interval = "1s" }
[services.app]
image = "app"
depends_on = { db = "service_healthy", migrate = "service_completed_successfully" }
[services.migrate]
image = "app"
depends_on = ["db"]
`})
	db := r.Services["db"]
	if db.User != "999:999" || db.WorkingDir != "/var/lib/postgresql" || db.ShmSize != "256m" || !slices.Equal(db.Entrypoint, []string{"docker-entrypoint.sh"}) {
		t.Errorf("db: %+v", db)
	}
	if want := map[string]manifest.Ulimit{"nofile": {Soft: 20000, Hard: 40000}, "nproc": {Soft: 65535, Hard: 65535}}; !reflect.DeepEqual(db.Ulimits, want) {
		t.Errorf("ulimits %v, want %v (one integer is both limits)", db.Ulimits, want)
	}
	if h := db.Healthcheck; h.StartPeriod != "30s" || h.StartInterval != "1s" {
		t.Errorf("healthcheck %+v", h)
	}
	if got := r.Services["app"].DependsOn; !maps.Equal(got, manifest.DependsOn{"db": manifest.ServiceHealthy, "migrate": manifest.ServiceCompletedSuccessfully}) {
		t.Errorf("app depends_on %v", got)
	}
	if got := r.Services["migrate"].DependsOn; !maps.Equal(got, manifest.DependsOn{"db": manifest.ServiceStarted}) {
		t.Errorf("the array form of depends_on: %v, want db = service_started", got)
	}
	for in, want := range map[string]manifest.ServiceVolume{
		"./ci/init:/docker-entrypoint-initdb.d:ro": {Kind: "bind", Source: "./ci/init", Target: "/docker-entrypoint-initdb.d", ReadOnly: true},
		"pgdata:/var/lib/postgresql/data":          {Kind: "volume", Source: "pgdata", Target: "/var/lib/postgresql/data"},
		"/scratch":                                 {Kind: "anonymous", Target: "/scratch"},
		"~/certs:/certs:rw":                        {Kind: "bind", Source: "~/certs", Target: "/certs"},
	} {
		if got, err := manifest.ParseServiceVolume(in); err != nil || got != want {
			t.Errorf("ParseServiceVolume(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]manifest.ServicePort{"5432": {Listen: 5432, Port: 5432}, "15432:5432": {Listen: 15432, Port: 5432}, "127.0.0.1:6432:6432/tcp": {Listen: 6432, Port: 6432}, "0.0.0.0:80:8080": {Listen: 80, Port: 8080}} {
		if got, err := manifest.ParseServicePort(in); err != nil || got != want {
			t.Errorf("ParseServicePort(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"db.local:127.0.0.1": "db.local:127.0.0.1", "gw=host-gateway": "gw:host-gateway", "v6:::1": "v6:::1"} {
		if got, err := manifest.ParseExtraHost(in); err != nil || got != want {
			t.Errorf("ParseExtraHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestServiceComposeKeyErrors(t *testing.T) {
	for line, want := range map[string]string{
		`entrypoint = [""]`:                                         `sandbox.toml:5: services.db.entrypoint: the first element (the program) must not be empty`,
		`working_dir = "data"`:                                      `sandbox.toml:5: services.db.working_dir: must be an absolute path, got "data"`,
		`shm_size = "lots"`:                                         `sandbox.toml:5: services.db.shm_size: invalid size "lots" (use a number with an optional unit k, m, g or t, e.g. "256m")`,
		`extra_hosts = ["nohost"]`:                                  `sandbox.toml:5: services.db.extra_hosts: "nohost": use NAME:IP (or NAME=IP)`,
		`extra_hosts = ["a:not-an-ip"]`:                             `sandbox.toml:5: services.db.extra_hosts: "a:not-an-ip": "not-an-ip" is not an IP address (or host-gateway)`,
		`aliases = ["two words"]`:                                   `sandbox.toml:5: services.db.aliases: "two words" is not a host name (letters, digits, '.', '_' and '-', at most 63 characters)`,
		`volumes = ["data:relative"]`:                               `sandbox.toml:5: services.db.volumes: "data:relative": the target "relative" must be an absolute path`,
		`volumes = ["./a:/x:z"]`:                                    `sandbox.toml:5: services.db.volumes: "./a:/x:z": unknown mode "z" (use ro or rw)`,
		`volumes = ["bad name!:/x"]`:                                `sandbox.toml:5: services.db.volumes: "bad name!:/x": the source "bad name!" is neither a path (./dir, /dir, ~/dir) nor a volume name (letters, digits, _ . -)`,
		`volumes = ["a:/x", "./b:/x"]`:                              `sandbox.toml:5: services.db.volumes: "a:/x" and "./b:/x" both mount /x`,
		`tmpfs = ["run"]`:                                           `sandbox.toml:5: services.db.tmpfs: "run": the path must be absolute`,
		`cap_add = ["NOPE"]`:                                        `sandbox.toml:5: services.db.cap_add: unknown capability "NOPE"`,
		`cap_add = ["NET_ADMIN"]` + "\ncap_drop = [\"net_admin\"]":  `sandbox.toml:6: services.db.cap_drop: NET_ADMIN is also in services.db.cap_add (name a capability in one of them)`,
		`ulimits = { files = 10 }`:                                  `sandbox.toml:5: services.db.ulimits.files: unknown resource (use one of core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, sigpending, stack)`,
		`ulimits = { nofile = { soft = 9, hard = 3 } }`:             `sandbox.toml:5: services.db.ulimits.nofile: the soft limit 9 is above the hard limit 3`,
		`ulimits = { nofile = { soft = 9 } }`:                       `sandbox.toml:5: services.db.ulimits.nofile: needs both soft and hard (or one number for both)`,
		`ulimits = { nofile = "many" }`:                             `sandbox.toml:5: services.db.ulimits.nofile: wrong type: expected an integer or a table { soft = N, hard = M }`,
		`ports = ["5432/udp"]`:                                      `sandbox.toml:5: services.db.ports: "5432/udp": only tcp ports are forwarded`,
		`ports = ["10.0.0.1:5432:5432"]`:                            `sandbox.toml:5: services.db.ports: "10.0.0.1:5432:5432": a service's ports are forwarded onto the sandbox's 127.0.0.1, not 10.0.0.1`,
		`ports = ["8000-8010"]`:                                     `sandbox.toml:5: services.db.ports: "8000-8010": not a port (1-65535; ranges are not forwarded)`,
		`ports = ["5432", "5432:80"]`:                               `sandbox.toml:5: services.db.ports: "5432:80": 127.0.0.1:5432 is already forwarded to db`,
		`depends_on = "cache"`:                                      `sandbox.toml:5: services.db.depends_on: wrong type: expected an array of service names or a table of conditions`,
		`depends_on = ["cache"]`:                                    `sandbox.toml:5: services.db.depends_on: cache is not a service of this manifest (services: db)`,
		`depends_on = ["db"]`:                                       `sandbox.toml:5: services.db.depends_on: a service cannot depend on itself`,
		`healthcheck = { cmd = ["true"], start_interval = "soon" }`: `sandbox.toml:5: services.db.healthcheck.start_interval: invalid duration "soon" (use a Go duration such as "30s" or "2m")`,
	} {
		got := loadErr(t, map[string]string{"sandbox.toml": svc + line + "\n"})
		if got != want && !(line == `cap_add = ["NOPE"]` && len(got) > len(want) && got[:len(want)] == want) {
			t.Errorf("%s:\n\tgot  %s\n\twant %s", line, got, want)
		}
	}
}

func TestServiceDependsOnErrors(t *testing.T) {
	two := svc + "[services.cache]\nimage = \"redis\"\n"
	for extra, want := range map[string]string{
		"[services.app]\nimage = \"app\"\ndepends_on = { cache = \"service_healthy\" }\n":                                                                                                              `sandbox.toml:9: services.app.depends_on.cache: service_healthy needs a healthcheck on cache (add [services.cache.healthcheck], or use service_started)`,
		"[services.app]\nimage = \"app\"\ndepends_on = { cache = \"service_ready\" }\n":                                                                                                                `sandbox.toml:9: services.app.depends_on.cache: unknown condition "service_ready" (use one of service_started, service_healthy, service_completed_successfully)`,
		"[services.app]\nimage = \"app\"\nrequired = false\n[services.job]\nimage = \"j\"\nrequired = false\n[services.x]\nimage = \"x\"\ndepends_on = { job = \"service_completed_successfully\" }\n": `sandbox.toml:15: services.x.depends_on.job: service_completed_successfully needs job to be required (an optional service's end gates nothing)`,
		"[services.db.depends_on]\ncache = \"service_started\"\n[services.cache.depends_on]\ndb = \"service_started\"\n":                                                                               `sandbox.toml:9: services.cache.depends_on: cycle: cache -> db -> cache`,
	} {
		if got := loadErr(t, map[string]string{"sandbox.toml": two + extra}); got != want {
			t.Errorf("%q:\n\tgot  %s\n\twant %s", extra, got, want)
		}
	}
}

// TestServiceEnvFile: env_file is read relative to the file that names it, env
// wins over it and a later file over an earlier one, values are literal.
func TestServiceEnvFile(t *testing.T) {
	p := newProject(t, map[string]string{
		"sandbox.toml": svc + "env_file = [\"ci/db.env\", \"ci/more.env\"]\nenv = { POSTGRES_DB = \"fromtoml\" }\n",
		"ci/db.env":    "# the database\nPOSTGRES_USER=ci\nexport POSTGRES_PASSWORD=\"s3cret\"\n\nPOSTGRES_DB=fromfile\nLEVEL='1'\nRAW=${HOME}\n",
		"ci/more.env":  "LEVEL=2\n",
	})
	r, err := p.load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"POSTGRES_USER": "ci", "POSTGRES_PASSWORD": "s3cret", "POSTGRES_DB": "fromtoml", "LEVEL": "2", "RAW": "${HOME}"}
	if got := r.Services["db"].Env; !maps.Equal(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
	p = newProject(t, map[string]string{"sandbox.toml": svc + "env_file = [\"missing.env\"]\n"})
	if got := p.loadErr(); !strings.Contains(got, "sandbox.toml:5: services.db.env_file: cannot read env file: open ") || !strings.Contains(got, "missing.env: no such file or directory") {
		t.Errorf("a missing env file: %s", got)
	}
	p = newProject(t, map[string]string{"sandbox.toml": svc + "env_file = [\"bad.env\"]\n", "bad.env": "OK=1\nnot a line\n"})
	if got := p.loadErr(); !strings.Contains(got, "bad.env:2: not NAME=VALUE") {
		t.Errorf("a bad env file line: %s", got)
	}
}

// TestServiceKeysOnKubernetes: what a Pod's sidecar cannot honour is a config
// error naming the key on the kubernetes backend; entrypoint and working_dir pass.
func TestServiceKeysOnKubernetes(t *testing.T) {
	r := load(t, map[string]string{"sandbox.toml": svc + "entrypoint = [\"x\"]\nworking_dir = \"/w\"\nvolumes = [\"d:/d\"]\nulimits = { nproc = 5 }\n"})
	_, err := manifest.CheckBackend(r, manifest.Backend{Name: manifest.BackendKubernetes})
	if err == nil {
		t.Fatal("volumes and ulimits passed on the kubernetes backend")
	}
	for _, want := range []string{"sandbox.toml:7: services.db.volumes: is not supported on the kubernetes backend yet", "sandbox.toml:8: services.db.ulimits: is not supported on the kubernetes backend yet"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "entrypoint") || strings.Contains(err.Error(), "working_dir") {
		t.Errorf("entrypoint or working_dir refused on kubernetes:\n%v", err)
	}
}
