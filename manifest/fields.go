package manifest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/manifest/specrules"
)

// Field documents one key of sandbox.toml. The table drives `airlock schema` and
// is checked against docs/manifest.md, so the three never drift apart.
type Field struct {
	Key     string   // key path; <name> stands for an entry name
	Type    string   // string, boolean, integer, number, array of strings, table
	Default string   // as TOML, "" when there is none
	Enum    []string // allowed values, when the set is closed
	Doc     string
	// Min and Max bound a number (nil: unbounded on that side).
	Min, Max *float64
	// Names is the pattern of the keys of a table of strings ("" for any).
	Names string
	// Removable marks a table of strings whose values may also be false in a
	// layer: the variable a lower layer set is removed.
	Removable bool
	// Widens is the key's widening rule for the trust check (docs/trust.md):
	// the area a change of it can give a sandbox more of the host in
	// (mounts, copies, privileges, user, capabilities, network, ports,
	// egress, tools, presets, env, project, build, files), or "never": what
	// it sets stays inside the sandbox (a command, a timeout, a limit, a
	// table whose keys are judged one by one). Every key has one.
	Widens string
}

func bound(f float64) *float64 { return &f }

// ProcessEnvNames is the pattern of the variable names the supervisor sets.
const ProcessEnvNames = specrules.EnvNamePattern

// Fields lists every key of the manifest in the order the manual presents them.
var Fields = []Field{
	{Key: "presets", Widens: "presets", Type: "array of strings", Default: "[]", Doc: "Presets to layer below this file: a built-in name, a user preset name, or a path (contains / or ends in .toml, relative to the naming file). Union across layers."},
	{Key: "tools", Widens: "tools", Type: "array of strings", Default: "[]", Enum: append(slices.Clone(Tools), "go-cache", "npm-cache", "uv-cache", "apt-cache"), Doc: "Builtin tools: shortcuts that become mounts and environment. Union across layers. go-cache, npm-cache, uv-cache and apt-cache are aliases of go, npm, uv and apt: the resolved manifest holds the canonical name, and config --layers names the alias used."},

	{Key: "sandbox", Widens: "never", Type: "table", Doc: "The primary container."},
	{Key: "sandbox.image", Widens: "env", Type: "string", Doc: "Image of the primary container; required unless sandbox.build is given. ${VAR} substitution applies."},
	{Key: "sandbox.build", Widens: "build", Type: "table", Doc: "Build the image through the Engine API instead of using sandbox.image; the result is tagged by a hash of its context and reused while the context is unchanged."},
	{Key: "sandbox.build.context", Widens: "build", Type: "string", Default: `"."`, Doc: "Build context directory, relative to the project dir."},
	{Key: "sandbox.build.dockerfile", Widens: "build", Type: "string", Default: `"Dockerfile"`, Doc: "Dockerfile path inside the context."},
	{Key: "sandbox.build.args", Widens: "never", Type: "table of strings", Doc: "Build arguments (ARG values)."},
	{Key: "sandbox.workdir", Widens: "never", Type: "string", Default: `""`, Doc: "Working directory of the main command: an absolute path, or a path relative to the project dir (\"tests\" is the project's tests folder; it may not lead out of the project); empty means the project dir, which is bind-mounted (or copied) at its own host path."},
	{Key: "sandbox.user", Widens: "user", Type: "string", Default: `""`, Doc: "User of the main command, `exec` and the shell of `up` (name, uid, name:group or uid:gid); empty means the image's USER, resolved as Docker does. `\"host\"` is the uid:gid of the user running the airlock CLI (the CLI resolves it before it sends the manifest, so a daemon running as another user still uses yours; refused on the kubernetes backend): what the sandbox writes into the project and host mounts stays yours. A numeric user the image has no passwd entry for gets one (named airlock, home /home/airlock owned by it; Docker backend). The container (PID 1) runs as this user, unless a daemon names another user while this one is not root: then PID 1 runs as root to start that daemon, and still runs the main command, `exec` and the shell as this user (docs/supervisor.md#users). `up` and `run` warn about a writable mount this user cannot write. Not substituted: `\"${UID}\"` is a config error at `validate` as at `run`."},
	{Key: "sandbox.shell", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Shell argv for `airlock up`; empty means the image's SHELL environment variable, else /bin/sh."},
	{Key: "sandbox.path_prepend", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Directories put in front of PATH, in this order, for the main command, `airlock exec` and every daemon (and its ready cmd), by the supervisor when each starts: in front of the PATH the process has there (the image's, or the PATH its env sets), never the host's. Absolute paths without ':'. Builtin tools add theirs after these (the go tool its toolchain's bin). Not substituted."},
	{Key: "sandbox.harden", Widens: "privileges", Type: "boolean", Default: "true", Doc: "Run the main process with no_new_privs (no privilege gained through setuid or file capabilities). The capabilities are Docker's default set adjusted by cap_add and cap_drop either way."},
	{Key: "sandbox.wait_for_daemons", Widens: "never", Type: "boolean", Default: "false", Doc: "run returns only once every daemon shut down, with every shutdown line, and the sandbox is removed (as run --wait, and docker run --rm). By default run returns once the main command exited and its output is out, with the lines of the daemons that stopped within 20 ms; the others shut down in the background (events, logs)."},
	{Key: "sandbox.pool", Widens: "never", Type: "table", Doc: "A warm pool for airlock run (docs/pool.md): the daemon keeps this many sandboxes of this manifest made, started and parked, services healthy and the daemons that take no substituted value ready, and hands one to a run whose manifest, image, Engine and copied files are exactly what a cold start would use now; the run then only delivers its command, env and values. A pooled sandbox serves one run and is removed like any other. Without this table (or with size 0) there is no pool. sandbox.local.toml can set it per developer."},
	{Key: "sandbox.pool.size", Widens: "never", Type: "integer", Default: "0", Doc: "How many parked sandboxes to keep (0 to 64); runtime.pool_max of config.toml bounds all pools of a daemon together (default 8)."},
	{Key: "sandbox.pool.idle_ttl", Widens: "never", Type: "string", Default: `"15m"`, Doc: "A pool whose sandboxes no run claimed for this long is drained (its parked sandboxes removed) until the next run of the manifest fills it again."},
	{Key: "sandbox.privileged", Widens: "privileges", Type: "boolean", Default: "false", Doc: "Run the sandbox privileged (what dockerd needs). airlock config and airlock up print a warning when it is on."},
	{Key: "sandbox.project", Widens: "project", Type: "string", Default: `"auto"`, Enum: ProjectModes, Doc: "How the project dir reaches the Engine: bind (mounted at its host path), copy (copied in through the Engine API, .airlockignore honoured) or auto (bind on a local Engine, copy on a remote one)."},
	{Key: "sandbox.egress", Widens: "egress", Type: "table", Doc: "Only the destinations in allow are reachable: the sandbox and its services sit on an internal network whose only way out is an airlock egress proxy (HTTP and HTTPS CONNECT; see docs/egress.md). Without this table nothing is restricted."},
	{Key: "sandbox.egress.allow", Widens: "egress", Type: "array of strings", Default: "[]", Doc: "Allowed destinations: host, host:port or *.domain (any depth below the domain, not the domain itself); the port defaults to 80 for HTTP and 443 for HTTPS. Empty denies everything."},
	{Key: "sandbox.egress.network", Widens: "egress", Type: "string", Default: `"bridge"`, Doc: "The Engine network the egress proxy uses to reach the outside."},
	{Key: "sandbox.network", Widens: "network", Type: "string", Default: `"bridge"`, Enum: Networks, Doc: "Network mode of the primary container. bridge gives the sandbox its own network, shared with its services."},
	{Key: "sandbox.ports", Widens: "ports", Type: "array of strings", Default: "[]", Doc: "Ports published on the host while the sandbox runs (up and run), in Docker's syntax: [ip:][host_port:]container_port[/tcp|udp|sctp], ranges as 8000-8010. Unlike Docker, an entry without an IP binds 127.0.0.1 only; write 0.0.0.0:… to listen on every interface. Without a host port the Engine picks a free one (airlock ps shows it). A host port already in use fails the start (exit 125). Needs network = \"bridge\" and no [sandbox.egress]."},
	{Key: "sandbox.cap_add", Widens: "capabilities", Type: "array of strings", Default: "[]", Doc: "Linux capabilities added to Docker's default set, as Docker names them (NET_ADMIN or CAP_NET_ADMIN, any case; ALL for every one). They reach processes that run as root in the sandbox; see docs/security.md. SYS_ADMIN and ALL are warned about, like privileged."},
	{Key: "sandbox.cap_drop", Widens: "capabilities", Type: "array of strings", Default: "[]", Doc: "Linux capabilities removed from Docker's default set, named as for cap_add (ALL drops every one; cap_add then adds back)."},
	{Key: "sandbox.ready_timeout", Widens: "never", Type: "duration", Default: `"60s"`, Doc: "Longest wait for daemons and required services to be ready (at most a year, like every duration)."},
	{Key: "sandbox.cpus", Widens: "never", Type: "number", Default: "0.0", Min: bound(0), Max: bound(MaxCPUs), Doc: "CPU limit, from 0.01 to 1024 (the Engine also refuses more than its host has); 0 means none. An Engine that does not apply CPU limits (rootless Docker on cgroup v1) refuses the sandbox (125) rather than ignore it."},
	{Key: "sandbox.memory", Widens: "never", Type: "string", Default: `""`, Doc: "Memory limit such as \"512m\" or \"2g\", from 6m (the Engine's minimum) to 1024t (1 PiB); empty or 0 means none. An Engine that does not apply memory limits (rootless Docker on cgroup v1) refuses the sandbox (125) rather than ignore it."},
	{Key: "sandbox.extra_hosts", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Lines added to the sandbox's /etc/hosts, as NAME:IP (or NAME=IP); IP may be host-gateway, the Engine's address for the host (Docker's --add-host)."},

	{Key: "env", Widens: "env", Type: "table of strings", Names: ProcessEnvNames, Removable: true, Doc: "Environment of the main command and of `airlock exec`, over the image's. Names are letters, digits and _, not starting with a digit. ${VAR} substitution applies, and here only a value may also name a daemon's or a service's variable by its key path: ${daemons.db.env.USER}. NAME = false removes the variable a lower layer set. Daemons do not get it."},

	{Key: "mounts.<name>", Widens: "mounts", Type: "table", Doc: "A bind mount from the host."},
	{Key: "mounts.<name>.enabled", Widens: "mounts", Type: "boolean", Default: "true", Doc: "false turns off a mount a lower layer defined."},
	{Key: "mounts.<name>.source", Widens: "mounts", Type: "string", Doc: "Host path; ~ is the host home, a relative path starts at the project dir. Required. ${VAR} substitution applies, but not from the vault: a host path shows in messages."},
	{Key: "mounts.<name>.target", Widens: "mounts", Type: "string", Doc: "Path inside the sandbox: absolute, or ~/… for the sandbox user's home. Required; unique across mounts and copies."},
	{Key: "mounts.<name>.read_only", Widens: "mounts", Type: "boolean", Default: "false", Doc: "Mount read-only inside the sandbox."},
	{Key: "mounts.<name>.missing", Widens: "mounts", Type: "string", Default: `"fail"`, Enum: MissingModes, Doc: "What to do when the source does not exist: fail (config error before anything is created), warn or ignore (skip the mount), create-dir or create-file (create it on the host)."},
	{Key: "mounts.<name>.create_mode", Widens: "mounts", Type: "string", Default: `"755" with create-dir, "644" with create-file, else ""`, Doc: "Octal mode of a source created by missing = create-dir or create-file."},
	{Key: "mounts.<name>.file_content", Widens: "mounts", Type: "string", Default: `""`, Doc: "Content of a source file created by missing = create-file."},

	{Key: "copies.<name>", Widens: "copies", Type: "table", Doc: "A host file or tree copied into the sandbox before start (no live link), owned by the sandbox user."},
	{Key: "copies.<name>.enabled", Widens: "copies", Type: "boolean", Default: "true", Doc: "false turns off a copy a lower layer defined."},
	{Key: "copies.<name>.source", Widens: "copies", Type: "string", Doc: "Host path, as for mounts. Required. ${VAR} substitution applies, but not from the vault."},
	{Key: "copies.<name>.target", Widens: "never", Type: "string", Doc: "Absolute path inside the sandbox (or ~/…). Required; unique across mounts and copies."},
	{Key: "copies.<name>.exclude", Widens: "copies", Type: "array of strings", Default: "[]", Doc: "Glob patterns (path.Match syntax) of files and folders not to copy, matched against each base name and each path relative to the source."},

	{Key: "daemons.<name>", Widens: "never", Type: "table", Doc: "A sidecar process the supervisor runs inside the sandbox before the main command."},
	{Key: "daemons.<name>.enabled", Widens: "never", Type: "boolean", Default: "true", Doc: "false turns off a daemon a lower layer (a preset) defined."},
	{Key: "daemons.<name>.command", Widens: "never", Type: "array of strings", Doc: "argv; argv[0] is looked up on PATH. Required. Not substituted: use the daemon's env."},
	{Key: "daemons.<name>.cwd", Widens: "never", Type: "string", Default: `"/"`, Doc: "Working directory (absolute)."},
	{Key: "daemons.<name>.signal", Widens: "never", Type: "string", Default: `"SIGTERM"`, Enum: Signals, Doc: "Signal sent to the daemon's process group at shutdown."},
	{Key: "daemons.<name>.timeout", Widens: "never", Type: "integer", Default: "10", Min: bound(0), Max: bound(float64(MaxDaemonTimeout)), Doc: "Seconds to wait after the signal before SIGKILL of the whole process group, at most 31536000 (a year); 0 waits forever."},
	{Key: "daemons.<name>.restart", Widens: "never", Type: "string", Default: `"always"`, Enum: RestartPolicies, Doc: "always restarts after any exit; on-failure after a non-zero exit or death by a signal. Restart n waits n seconds first. A one-shot is never restarted: any value but the default is a config error there."},
	{Key: "daemons.<name>.max_restarts", Widens: "never", Type: "integer", Default: "10", Min: bound(0), Max: bound(MaxCount), Doc: "Restarts after the first launch (N allows N+1 launches), at most 10000; 0 means no limit. The count resets after a run that lasted 60 s. Any value but the default is a config error on a one-shot, which is never restarted."},
	{Key: "daemons.<name>.harden", Widens: "privileges", Type: "boolean", Default: "true", Doc: "Run the daemon with no_new_privs; false for e.g. dockerd."},
	{Key: "daemons.<name>.oneshot", Widens: "never", Type: "boolean", Default: "false", Doc: "A setup step rather than a server: the command runs once, to completion, and is never restarted. The daemons that name it in after, and the main command, start only once it exited 0 (and the rest of its process group is gone); a non-zero exit, death by a signal or a failed launch fails the start (exit 125) with its name, how it ended and its last output lines. Its exit 0 is its readiness, so ready is a config error on a one-shot, as are restart and max_restarts other than their defaults. It runs at every start of the sandbox (write it to be repeatable), as its user, with its log like any daemon's. See docs/supervisor.md#one-shot-steps."},
	{Key: "daemons.<name>.after", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Daemons that must be ready (or completed, for a one-shot; or started, if they have no ready check) before this one starts."},
	{Key: "daemons.<name>.user", Widens: "user", Type: "string", Default: `""`, Doc: "User the daemon runs as (and its ready cmd): a name, uid, name:group or uid:gid, resolved in the sandbox's /etc/passwd and /etc/group when it starts (supplementary groups included; HOME becomes the user's home). Empty means the sandbox user. A name that is not there fails the start (exit 125) before anything runs. Another user than a sandbox user who is not root (a root setup step, say) makes the container's PID 1 run as root; the main command, `exec` and the shell still run as the sandbox user (docs/supervisor.md#users)."},
	{Key: "daemons.<name>.ready", Widens: "never", Type: "table", Doc: "Readiness check: exactly one of tcp, http, cmd or log. The main command starts only when every check passed. Not on a one-shot, whose exit 0 is its readiness."},
	{Key: "daemons.<name>.ready.tcp", Widens: "never", Type: "string", Doc: "host:port that accepts a TCP connection when the daemon is ready. An open port proves only that the server listens: with send and expect the check is a request and its answer."},
	{Key: "daemons.<name>.ready.send", Widens: "never", Type: "string", Doc: "Bytes the tcp check writes once connected (TOML escapes such as `\\r\\n` apply), at most 1024; needs expect."},
	{Key: "daemons.<name>.ready.expect", Widens: "never", Type: "string", Doc: "Bytes the server's answer (to send, or its greeting) must hold for the tcp check to pass, at most 1024; read up to 64 KiB per try."},
	{Key: "daemons.<name>.ready.http", Widens: "never", Type: "string", Doc: "http(s) URL that answers with a 2xx or 3xx status when the daemon is ready."},
	{Key: "daemons.<name>.ready.cmd", Widens: "never", Type: "array of strings", Doc: "argv that exits 0 when the daemon is ready."},
	{Key: "daemons.<name>.ready.log", Widens: "never", Type: "string", Doc: "Regular expression (Go syntax) matched against the daemon's output."},
	{Key: "daemons.<name>.ready.timeout", Widens: "never", Type: "duration", Default: `"30s"`, Doc: "How long the check may take before the sandbox fails (exit 125)."},
	{Key: "daemons.<name>.env", Widens: "env", Type: "table of strings", Names: ProcessEnvNames, Removable: true, Doc: "The daemon's own environment, over the image's (it does not get [env]). Names as in [env]. ${VAR} substitution applies. NAME = false removes the variable a lower layer set."},

	{Key: "services.<name>", Widens: "never", Type: "table", Doc: "A sibling container on the sandbox's network, reachable by its name."},
	{Key: "services.<name>.enabled", Widens: "never", Type: "boolean", Default: "true", Doc: "false turns off a service a lower layer defined."},
	{Key: "services.<name>.image", Widens: "never", Type: "string", Doc: "Image of the service container. Required."},
	{Key: "services.<name>.command", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Command of the service container; empty means the image's."},
	{Key: "services.<name>.required", Widens: "never", Type: "boolean", Default: "true", Doc: "Required services must be healthy before the sandbox is ready; optional ones start in parallel and report their first result as an event."},
	{Key: "services.<name>.env", Widens: "env", Type: "table of strings", Removable: true, Doc: "Environment of the service container. A name is anything without = (the Engine sets it), quoted as a key where it must be (\"my.var\"). ${VAR} substitution applies. NAME = false removes the variable a lower layer set."},
	{Key: "services.<name>.healthcheck", Widens: "never", Type: "table", Doc: "Health probe run by the Engine inside the service container; without one a service is healthy once running."},
	{Key: "services.<name>.healthcheck.cmd", Widens: "never", Type: "array of strings", Doc: "argv of the probe (exit 0 = healthy). Required in a healthcheck."},
	{Key: "services.<name>.healthcheck.interval", Widens: "never", Type: "duration", Default: `"1s"`, Doc: "Time between probes."},
	{Key: "services.<name>.healthcheck.timeout", Widens: "never", Type: "duration", Default: `"3s"`, Doc: "Longest time one probe may take."},
	{Key: "services.<name>.healthcheck.retries", Widens: "never", Type: "integer", Default: "30", Min: bound(0), Max: bound(MaxCount), Doc: "Consecutive failures before the service is unhealthy, at most 10000."},
	{Key: "services.<name>.healthcheck.start_period", Widens: "never", Type: "duration", Default: `""`, Doc: "Grace time after the start in which failed probes do not count against retries (compose's start_period)."},
	{Key: "services.<name>.healthcheck.start_interval", Widens: "never", Type: "duration", Default: `""`, Doc: "Time between probes during start_period (compose's start_interval). An Engine older than API 1.44 (Docker 25) cannot take it: airlock then probes at the shorter of interval and start_interval throughout."},
	{Key: "services.<name>.entrypoint", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Replaces the image's ENTRYPOINT and, as in compose, its CMD: the command is then command, or none."},
	{Key: "services.<name>.user", Widens: "user", Type: "string", Default: `""`, Doc: "User of the service's process (name, uid or uid:gid); empty means the image's."},
	{Key: "services.<name>.working_dir", Widens: "never", Type: "string", Default: `""`, Doc: "Working directory (absolute); empty means the image's."},
	{Key: "services.<name>.shm_size", Widens: "never", Type: "string", Default: `""`, Doc: "Size of /dev/shm such as \"256m\"; empty means the Engine's 64m."},
	{Key: "services.<name>.env_file", Widens: "files", Type: "array of strings", Default: "[]", Doc: "Files of NAME=VALUE lines (# comments, blank lines, export prefixes and quotes as compose reads them), relative to the folder of the file that names them, below the project dir unless `config.toml`'s `[services] env_files_outside` names them; env wins over them, a later file over an earlier. Values are taken literally and sit in the container's configuration like env's literals: put secrets in env as ${VAR}."},
	{Key: "services.<name>.extra_hosts", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Lines added to the service's /etc/hosts, as NAME:IP (or NAME=IP; IP may be host-gateway)."},
	{Key: "services.<name>.aliases", Widens: "never", Type: "array of strings", Default: "[]", Doc: "More names the service answers to on the sandbox's network, beside its own (compose's networks.*.aliases)."},
	{Key: "services.<name>.volumes", Widens: "mounts", Type: "array of strings", Default: "[]", Doc: "Compose's short syntax SOURCE:TARGET[:ro|rw], or TARGET alone (an anonymous volume). A SOURCE that is a path (./x, ../x, /x, ~/x; relative to the project dir) is a bind mount, and must exist; a name is a volume made for the sandbox (shared by its services that name it) and removed with it."},
	{Key: "services.<name>.tmpfs", Widens: "never", Type: "array of strings", Default: "[]", Doc: "tmpfs mounts: PATH or PATH:OPTIONS (such as /run:size=64m,mode=1777)."},
	{Key: "services.<name>.cap_add", Widens: "capabilities", Type: "array of strings", Default: "[]", Doc: "Linux capabilities added to the service's default set, named as for sandbox.cap_add."},
	{Key: "services.<name>.cap_drop", Widens: "capabilities", Type: "array of strings", Default: "[]", Doc: "Linux capabilities removed from the service's default set (ALL drops every one)."},
	{Key: "services.<name>.ulimits.<name>", Widens: "never", Type: "table", Doc: "A resource limit of the service by its name (nofile, nproc, memlock, core, stack, …): { soft = N, hard = M }, or one integer for both (-1: unlimited)."},
	{Key: "services.<name>.ulimits.<name>.soft", Widens: "never", Type: "integer", Doc: "Soft limit (-1: unlimited); at most hard."},
	{Key: "services.<name>.ulimits.<name>.hard", Widens: "never", Type: "integer", Doc: "Hard limit (-1: unlimited)."},
	{Key: "services.<name>.ports", Widens: "never", Type: "array of strings", Default: "[]", Doc: "The service's ports on the sandbox's 127.0.0.1 (in its network namespace, or forwarded: see loopback), so a job that reaches its services on localhost (as a CI job reaches ports published on its runner) runs unchanged: PORT, LISTEN:PORT or 127.0.0.1:LISTEN:PORT (compose's syntax), tcp only. Nothing is published on the host."},
	{Key: "services.<name>.loopback", Widens: "never", Type: "string", Default: `""`, Enum: []string{LoopbackShared, LoopbackForwarded}, Doc: "Where the service meets the sandbox's 127.0.0.1. shared: the service runs in the sandbox's network namespace, as a Pod's containers do: its ports are the sandbox's own, reached with no relay, and it sees the sandbox's loopback (needs ports that keep their numbers and no extra_hosts). forwarded: it keeps a namespace of its own, and only its ports entries are forwarded onto the sandbox's loopback. Empty: shared for a service with ports that keep their numbers and no extra_hosts, else forwarded. Either way its name and aliases reach it on the sandbox's network."},
	{Key: "services.<name>.depends_on", Widens: "never", Type: "table of strings", Doc: "Services that must reach a condition before this one starts: service_started, service_healthy (needs a healthcheck there) or service_completed_successfully (a required job that exits 0; its exit is then its success, not a failure). An array of names is the short form (each service_started). A failed condition fails the start (exit 125); cycles are config errors."},

	{Key: "compose", Widens: "never", Type: "table", Doc: "Services read from a compose file (compose-go: interpolation from the host environment and the file's .env, profiles, extends), as the lowest layer of [services.*]: a [services.<name>] table of any layer overrides a compose service key by key. A compose key airlock cannot honour is a config error naming it, the service and the compose file's line. See docs/compose.md."},
	{Key: "compose.file", Widens: "never", Type: "string", Doc: "The compose file, relative to the folder of the file that names it. Required in [compose]."},
	{Key: "compose.services", Widens: "never", Type: "array of strings", Default: "[]", Doc: "The services to take, with the services they depend on; empty means every service of the active profiles."},
	{Key: "compose.profiles", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Compose profiles to activate (services of other profiles are left out, as compose does)."},
	{Key: "compose.ignore", Widens: "never", Type: "array of strings", Default: "[]", Doc: "Compose service keys airlock may drop (ports, restart, container_name, labels, …; networks.<key> for a network setting): a knowing choice, never a silent one."},
}

// FieldsMarkdown renders the field table as the key reference of docs/manifest.md.
func FieldsMarkdown() string {
	var b strings.Builder
	b.WriteString("| key | type | default | widens ([trust](trust.md)) | meaning |\n|---|---|---|---|---|\n")
	for _, f := range Fields {
		def := f.Default
		if def == "" {
			def = "—"
		} else {
			def = "`" + def + "`"
		}
		doc := f.Doc
		if len(f.Enum) > 0 {
			doc += " One of: " + "`" + strings.Join(f.Enum, "`, `") + "`."
		}
		widens := f.Widens
		if widens == "never" {
			widens = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Key, f.Type, def, widens, strings.ReplaceAll(doc, "|", `\|`))
	}
	return b.String()
}
