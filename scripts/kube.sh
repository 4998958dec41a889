#!/usr/bin/env bash
# kube.sh: a real single-node Kubernetes (v1.34.2) for airlock's tests, built from the Go
# module proxy and run as plain processes on this machine beside (never inside) the Docker
# Engine. Linux, root (but for build), Debian packages.
#
#   scripts/kube.sh build       builds hyperkube (kube-apiserver, kube-controller-manager,
#                               kube-scheduler, kubelet and kubectl in one binary dispatching on
#                               argv[0]; source scripts/kube/hyperkube) and etcd v3.6
#                               (scripts/kube/etcd) into the cache; a no-op when they are there and
#                               their sources did not change. Uses the normal Go build cache.
#   scripts/kube.sh up          installs missing Debian packages, builds when needed, makes the
#                               certificates (openssl), starts containerd, etcd, the apiserver,
#                               controller-manager, scheduler and kubelet, and waits until node
#                               "localhost" is Ready and the ServiceAccount "default" (and the
#                               ConfigMap kube-root-ca.crt) exist in namespace "default". Prints the
#                               time of each phase. A quick no-op when the cluster answers; starts
#                               only what is missing when part of it runs.
#   scripts/kube.sh down        ends what up started and nothing else: pods (through the API, then
#                               whatever containers remain, through its own containerd), the
#                               processes whose pids it recorded, mounts under the state directory,
#                               the bridge, its cgroups and the kubelet's and CNI's leftovers in
#                               fixed host paths. Keeps certificates, etcd's data and imported images,
#                               so a later up resumes the same cluster with the same kubeconfig.
#   scripts/kube.sh clean       down, then removes the state directory (not the build cache).
#   scripts/kube.sh status      says whether the cluster answers (exit 0) or not (exit 1).
#   scripts/kube.sh kubeconfig  prints the admin kubeconfig's path.
#   scripts/kube.sh import TAR  imports an image archive (docker save / docker-archive tar) into the
#                               cluster's containerd, namespace k8s.io. There is no registry: pods
#                               name such images with imagePullPolicy: Never (or IfNotPresent).
#   scripts/kube.sh kubectl ARG...  runs the built kubectl with the admin kubeconfig.
#   scripts/kube.sh env         prints export lines for KUBECONFIG and a PATH holding kubectl.
#
# Paths:
#   ${AIRLOCK_KUBE_CACHE:-$HOME/.cache/airlock-kube}/v1.34.2/bin   hyperkube, its symlinks
#       (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl), etcd
#   ${AIRLOCK_KUBE_STATE:-/var/lib/airlock-kube}   the cluster:
#       kubeconfig              admin kubeconfig (certificates embedded)
#       pki/                    CA, serving and client certificates and kubeconfigs, service-account key
#       etc/                    containerd.toml, kubelet-config.yaml, resolv.conf, cni/ (bridge conflist)
#       logs/NAME.log           each component's log (the previous run's in NAME.log.1)
#       run/                    NAME.pid of every process up started; host paths it created
#       containerd.sock         the cluster's own containerd (config, root, state and runc root
#                               below containerd/; never the Docker Engine's containerd)
#       etcd/ kubelet/ pod-logs/ cni/ images/   component data; images/pause.tar is the sandbox image
# Network: every component listens on 127.0.0.1 only: apiserver 6443, etcd 2379-2381, kubelet
#   10250 and 10248, controller-manager 10257, scheduler 10259. Pods get 10.244.0.0/24 on the
#   bridge airlockkube0 (gateway 10.244.0.1 is the host), no masquerade, no default route. There
#   is no kube-proxy (no ClusterIP services) and no cluster DNS. The host's iptables are never
#   changed (no kube-proxy, kubelet makeIPTablesUtilChains: false, CNI without ipMasq).
# Host paths the kubelet and containerd use whatever they are told (down removes what they left):
#   /var/lib/kubelet/device-plugins, /var/log/containers (symlinks into pod-logs), /var/lib/cni
#   (this network's entries), the cgroups /sys/fs/cgroup/*/airlock-kube.
# Facts of this machine kind behind the choices: Kubernetes stays on 1.34 (1.35's kubelet refuses
# cgroup v1); containerd needs restrict_oom_score_adj (no CAP_SYS_RESOURCE); the kubelet refuses
# a loopback node IP, so the node is named localhost and the apiserver reaches it by hostname.
set -euo pipefail

prog=kube.sh
k8s_version=v1.34.2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/kube
cache=${AIRLOCK_KUBE_CACHE:-${HOME:-/root}/.cache/airlock-kube}/$k8s_version
bin=$cache/bin
state=${AIRLOCK_KUBE_STATE:-/var/lib/airlock-kube}
state=${state%/}
kubeconfig=$state/kubeconfig
pki=$state/pki
run=$state/run
logs=$state/logs
sock=$state/containerd.sock
node=localhost
bridge=airlockkube0
cni_net=airlock-kube
pod_cidr=10.244.0.0/24
svc_cidr=10.96.0.0/24
cni_bin=/usr/lib/cni
cgroup_name=airlock-kube
pause_image=docker.io/airlock-kube/pause:1
apiserver_url=https://127.0.0.1:6443
components=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
# Host paths the kubelet and containerd hardcode; up records which of them it created.
host_dirs=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers /var/lib/cni /var/lib/cni/results)

say() { echo "$prog: $*" >&2; }
die() {
  say "$*"
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
need_root() { [ "$(id -u)" = 0 ] || die "cannot $1: must run as root"; }
kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$state/kubectl-cache" --request-timeout=10s "$@"; }
ctrc() { ctr --address "$sock" --namespace k8s.io "$@"; }

# running PID: the process exists and is not a zombie.
running() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# alive NAME: the process up recorded for NAME runs and is still that process (its command line
# names the component and this state directory: a recycled pid is not ours).
alive() {
  local f=$run/$1.pid pid cmd
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && running "$pid" || return 1
  cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ $cmd == *"$1"* && $cmd == *"$state/"* ]]
}

# start NAME CMD...: runs CMD in a session of its own (so neither the caller's end nor its
# signals end it), output to logs/NAME.log, pid to run/NAME.pid.
start() {
  local name=$1
  shift
  mkdir -p "$logs" "$run"
  [ ! -f "$logs/$name.log" ] || mv -f "$logs/$name.log" "$logs/$name.log.1"
  # (without the lock descriptors: a daemon holding them would block every later up and down)
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$run/$name.pid"
}

# fail_log NAME MESSAGE: dies with MESSAGE and the last lines of NAME's log.
fail_log() {
  say "$2; last lines of $logs/$1.log:"
  tail -n 25 "$logs/$1.log" >&2 || true
  exit 1
}

# wait_until SECONDS NAME WHAT CMD...: polls CMD until it succeeds; fails early when NAME's
# process ended.
wait_until() {
  local secs=$1 name=$2 what=$3 deadline
  deadline=$(($(date +%s) + secs))
  shift 3
  until "$@" >/dev/null 2>&1; do
    alive "$name" || fail_log "$name" "cannot start the cluster: $name exited before $what"
    [ "$(date +%s)" -lt "$deadline" ] || fail_log "$name" "cannot start the cluster: no $what within $secs s"
    sleep 0.2
  done
}

# port_free PORT...: fails naming the process of another program listening on a port we need.
port_free() {
  local p
  for p in "$@"; do
    if [ -n "$(ss -Hltn "sport = :$p" 2>/dev/null)" ]; then
      die "cannot start the cluster: 127.0.0.1:$p is taken by another program ($(ss -Hltnp "sport = :$p" | grep -o 'users:.*' | head -1))"
    fi
  done
}

### build

ldflags() {
  local minor=${k8s_version#v1.} p out="-s -w"
  minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    out+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$out"
}

# build_one NAME DIR LDFLAGS: builds the module in DIR into $bin/NAME unless the binary there
# was built from the same go.mod, go.sum, sources and flags.
build_one() {
  local name=$1 dir=$2 ld=$3 out=$bin/$1 stamp t
  stamp=$({ cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go && echo "$ld"; } | sha256sum | cut -d' ' -f1)
  if [ -x "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || die "cannot build $name: no go command on PATH"
  say "building $name into $bin (a cold build takes minutes)"
  t=$(now)
  mkdir -p "$bin"
  if ! (cd "$dir" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly \
    go build -trimpath -buildvcs=false -ldflags "$ld" -o "$out.tmp" .); then
    rm -f "$out.tmp"
    die "cannot build $name (go output above)"
  fi
  mv -f "$out.tmp" "$out"
  echo "$stamp" >"$out.stamp"
  say "built $name in $(since "$t")"
}

cmd_build() {
  local c t
  t=$(now)
  mkdir -p "$bin"
  exec 8>>"$cache/.lock"
  flock 8
  build_one hyperkube "$src/hyperkube" "$(ldflags)"
  build_one etcd "$src/etcd" "-s -w"
  for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    [ "$(readlink "$bin/$c" 2>/dev/null)" = hyperkube ] || ln -sfn hyperkube "$bin/$c"
  done
  flock -u 8
  say "phase build: $(since "$t")"
}

### up

ensure_packages() {
  local need=()
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  [ -x $cni_bin/bridge ] && [ -x $cni_bin/host-local ] && [ -x $cni_bin/loopback ] || need+=(containernetworking-plugins)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v ip >/dev/null 2>&1 && command -v ss >/dev/null 2>&1 || need+=(iproute2)
  # the sandbox image is the static busybox
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
  [ ${#need[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "cannot install ${need[*]}: no apt-get; install them by hand"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  export NEEDRESTART_SUSPEND=1
  local out
  out=$( (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}") 2>&1) || {
    echo "$out" >&2
    die "cannot install ${need[*]}"
  }
}

# genkey FILE: an ECDSA P-256 private key (PKCS#8), quick to make unlike RSA.
genkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA, in the current directory.
sign() {
  genkey "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -extfile "$1.ext" -out "$1.crt" 2>"$1.err" || {
    cat "$1.err" >&2
    return 1
  }
  rm -f "$1.err"
  rm -f "$1.csr" "$1.ext"
}

# kubeconfig_for CERT: a kubeconfig for the client certificate CERT with everything embedded.
kubeconfig_for() {
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: airlock-kube
  cluster:
    server: $apiserver_url
    certificate-authority-data: $(base64 -w0 ca.crt)
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$1.crt")
    client-key-data: $(base64 -w0 "$1.key")
contexts:
- name: airlock-kube
  context: {cluster: airlock-kube, user: $1, namespace: default}
current-context: airlock-kube
EOF
}

# gen_pki: CA, certificates and kubeconfigs (once; all or nothing).
gen_pki() {
  [ -f "$pki/complete" ] && [ -f "$kubeconfig" ] && return 0
  local d=$state/pki.tmp client
  rm -rf "$d"
  mkdir -p "$d"
  client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  (
    cd "$d"
    umask 077
    genkey ca.key
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=airlock-kube-ca" -out ca.crt
    genkey sa.key
    openssl pkey -in sa.key -pubout -out sa.pub
    sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1"
    sign admin "/O=system:masters/CN=airlock-kube-admin" "$client"
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
    sign controller-manager "/CN=system:kube-controller-manager" "$client"
    sign scheduler "/CN=system:kube-scheduler" "$client"
    sign kubelet "/O=system:nodes/CN=system:node:$node" "$client"
    for c in admin controller-manager scheduler kubelet; do kubeconfig_for "$c" >"$c.kubeconfig"; done
    touch complete
  )
  rm -rf "$pki"
  mv "$d" "$pki"
  install -m 600 "$pki/admin.kubeconfig" "$kubeconfig"
}

write_configs() {
  mkdir -p "$state/etc/cni" "$state/containerd/root" "$state/containerd/state" "$state/containerd/runc" \
    "$state/cni/ipam" "$state/pod-logs" "$state/kubelet/volume-plugins" "$state/controller-manager/volume-plugins" "$state/etcd"
  chmod 700 "$state/etcd"
  echo "nameserver 127.0.0.1" >"$state/etc/resolv.conf"
  cat >"$state/etc/cni/10-$cni_net.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$cni_net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "dataDir": "$state/cni/ipam"}
    }
  ]
}
EOF
  cat >"$state/etc/containerd.toml" <<EOF
# The cluster's own containerd (scripts/kube.sh); never the Docker Engine's.
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

# containerd 1.6's task service needs the legacy runtime loaded; unused, its root is ours too
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "$state/containerd/runc-v1"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  # this machine kind lacks CAP_SYS_RESOURCE: runc fails to start containers whose
  # oom_score_adj is below containerd's own
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$state/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$state/etc/cni"
    max_conf_num = 1
EOF
  cat >"$state/etc/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_name
containerRuntimeEndpoint: unix://$sock
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: $state/etc/resolv.conf
podLogsDir: $state/pod-logs
volumePluginDir: $state/kubelet/volume-plugins
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
}

# make_pause_image: the pods' sandbox image, a docker-archive of the static busybox sleeping.
make_pause_image() {
  local out=$state/images/pause.tar d lsha csha arch
  [ -f "$out" ] && return 0
  case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
  [ -x /bin/busybox ] || die "cannot make the sandbox image: no /bin/busybox (busybox-static)"
  d=$(mktemp -d)
  mkdir -p "$d/root/bin" "$d/out" "$state/images"
  cp /bin/busybox "$d/root/bin/busybox"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/root" -cf "$d/out/layer.tar" .
  lsha=$(sha256sum "$d/out/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"%s","os":"linux","config":{"Cmd":["/bin/busybox","sleep","2147483647"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$lsha" >"$d/out/config.json"
  csha=$(sha256sum "$d/out/config.json" | cut -d' ' -f1)
  mv "$d/out/config.json" "$d/out/$csha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$csha" "${pause_image#docker.io/}" >"$d/out/manifest.json"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/out" -cf "$out.tmp" .
  mv "$out.tmp" "$out"
  rm -rf "$d"
}

# cgroup_dirs: the kubelet's cgroupRoot in every hierarchy.
cgroup_dirs() {
  local c
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    echo "/sys/fs/cgroup/$cgroup_name"
    return
  fi
  for c in /sys/fs/cgroup/*; do
    [ -d "$c" ] && [ ! -L "$c" ] && [ "${c##*/}" != unified ] && echo "$c/$cgroup_name"
  done
}

prepare_cgroups() {
  local c
  for c in $(cgroup_dirs); do
    mkdir -p "$c"
    if [ "${c%/*}" != /sys/fs/cgroup ] && [ -f "${c%/*}/cpuset.cpus" ] && [ -z "$(cat "$c/cpuset.cpus")" ]; then
      cat "${c%/*}/cpuset.cpus" >"$c/cpuset.cpus"
      cat "${c%/*}/cpuset.mems" >"$c/cpuset.mems"
    fi
  done
}

# record_host_dirs: notes which of the hardcoded host paths do not exist yet (so down removes
# them), keeping what an earlier run noted.
record_host_dirs() {
  local d
  mkdir -p "$run"
  for d in "${host_dirs[@]}"; do
    [ -e "$d" ] || grep -qxF "$d" "$run/host-dirs-created" 2>/dev/null || echo "$d" >>"$run/host-dirs-created"
  done
}

apiserver_ready() {
  curl -fsS --max-time 3 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$apiserver_url/readyz" >/dev/null 2>&1
}

# node_ready: the node is Ready by a heartbeat of the running kubelet (not a stale status
# left in etcd by an earlier run).
node_ready() {
  local out ready hb since_s
  out=$(kc get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' 2>/dev/null) || return 1
  ready=${out%% *}
  hb=${out#* }
  [ "$ready" = True ] || return 1
  since_s=$(cat "$run/kubelet.started" 2>/dev/null || echo 0)
  [ "$(date -d "$hb" +%s 2>/dev/null || echo 0)" -ge "$since_s" ]
}

default_sa_ready() {
  kc -n default get serviceaccount default >/dev/null 2>&1 && kc -n default get configmap kube-root-ca.crt >/dev/null 2>&1
}

any_alive() {
  local c
  for c in "${components[@]}"; do alive "$c" && return 0; done
  return 1
}

all_alive() {
  local c
  for c in "${components[@]}"; do alive "$c" || return 1; done
}

answers() { all_alive && apiserver_ready && node_ready; }

cmd_up() {
  need_root "start the cluster"
  local t0 t c
  t0=$(now)
  mkdir -p "$state"
  exec 9>>"$state/.lock"
  flock 9
  if [ -x "$bin/kubectl" ] && [ -f "$kubeconfig" ] && answers; then
    say "already up ($(since "$t0")); kubeconfig: $kubeconfig"
    return 0
  fi
  t=$(now)
  ensure_packages
  say "phase packages: $(since "$t")"
  cmd_build
  if ! any_alive && leftovers; then
    # nothing of ours runs, but an earlier run may have left containers, mounts or a bridge
    say "cleaning up after an earlier run that did not end with down"
    teardown || die "cannot clean up after the earlier run (see above)"
  fi
  t=$(now)
  gen_pki
  write_configs
  make_pause_image
  record_host_dirs
  say "phase certificates and configuration: $(since "$t")"

  t=$(now)
  if ! alive containerd; then
    [ ${#sock} -lt 100 ] || die "cannot start containerd: socket path $sock is too long for a unix socket"
    rm -f "$sock" "$sock.ttrpc"
    start containerd containerd --config "$state/etc/containerd.toml" --log-level warn
    wait_until 30 containerd "containerd answering" ctr --address "$sock" version
  fi
  if ! ctrc images ls -q 2>/dev/null | grep -qxF "$pause_image"; then
    ctrc images import "$state/images/pause.tar" >/dev/null || die "cannot import the sandbox image into containerd"
  fi
  say "phase containerd: $(since "$t")"

  t=$(now)
  if ! alive etcd; then
    port_free 2379 2380 2381
    start etcd "$bin/etcd" --name airlock-kube --data-dir "$state/etcd" \
      --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
      --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
      --initial-cluster airlock-kube=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
      --log-level warn --unsafe-no-fsync
    wait_until 30 etcd "etcd healthy" curl -fsS --max-time 2 http://127.0.0.1:2379/health
  fi
  say "phase etcd: $(since "$t")"

  t=$(now)
  if ! alive kube-apiserver; then
    port_free 6443
    start kube-apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
      --bind-address=127.0.0.1 --secure-port=6443 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
      --service-cluster-ip-range=$svc_cidr \
      --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
      --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
      --kubelet-preferred-address-types=Hostname,InternalIP \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
      --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
      --profiling=false
  fi
  wait_until 120 kube-apiserver "apiserver ready" apiserver_ready
  say "phase kube-apiserver: $(since "$t")"

  t=$(now)
  if ! alive kube-controller-manager; then
    port_free 10257
    start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$pki/controller-manager.kubeconfig" \
      --authentication-kubeconfig="$pki/controller-manager.kubeconfig" --authorization-kubeconfig="$pki/controller-manager.kubeconfig" \
      --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
      --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
      --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
      --flex-volume-plugin-dir="$state/controller-manager/volume-plugins" --profiling=false
  fi
  if ! alive kube-scheduler; then
    port_free 10259
    start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$pki/scheduler.kubeconfig" \
      --authentication-kubeconfig="$pki/scheduler.kubeconfig" --authorization-kubeconfig="$pki/scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  fi
  if ! alive kubelet; then
    port_free 10250 10248
    prepare_cgroups
    date +%s >"$run/kubelet.started"
    start kubelet "$bin/kubelet" --config="$state/etc/kubelet-config.yaml" \
      --kubeconfig="$pki/kubelet.kubeconfig" --root-dir="$state/kubelet" --cert-dir="$state/kubelet/pki" \
      --hostname-override=$node
  fi
  wait_until 120 kubelet "node $node Ready" node_ready
  say "phase kubelet, node Ready: $(since "$t")"

  t=$(now)
  wait_until 60 kube-controller-manager "ServiceAccount default" default_sa_ready
  alive kube-scheduler || fail_log kube-scheduler "cannot start the cluster: kube-scheduler exited"
  say "phase ServiceAccount default: $(since "$t")"
  say "up in $(since "$t0"); kubeconfig: $kubeconfig"
}

### down

# stop NAME [SECONDS]: ends the recorded process (SIGTERM, SIGKILL after SECONDS, default 10)
# and forgets it.
stop() {
  local f=$run/$1.pid pid i
  [ -f "$f" ] || return 0
  if alive "$1"; then
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 $((${2:-10} * 5))); do
      running "$pid" || break
      sleep 0.2
    done
    if running "$pid"; then
      say "$1 (pid $pid) did not end on SIGTERM within ${2:-10} s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 25); do
        running "$pid" || break
        sleep 0.2
      done
    fi
  fi
  rm -f "$f"
}

# our_shims: pids of containerd shims serving this cluster's containerd (their command line
# names its socket).
our_shims() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *containerd-shim* && $cmd == *"-address $sock "* ]] && echo "${p#/proc/}"
  done
  return 0
}

# leftovers: an earlier run left something behind (pids, shims, mounts, bridge, cgroups).
leftovers() {
  local d
  [ -n "$(ls -A "$run" 2>/dev/null)" ] && return 0
  [ -n "$(our_shims)" ] && return 0
  awk -v p="$state/" 'index($2, p) == 1 { f = 1 } END { exit !f }' /proc/self/mounts && return 0
  ip link show "$bridge" >/dev/null 2>&1 && return 0
  for d in /sys/fs/cgroup/*/"$cgroup_name" /sys/fs/cgroup/"$cgroup_name"; do [ -d "$d" ] && return 0; done
  return 1
}

# teardown: ends everything up started and removes what it left on the host, best effort,
# reporting what could not be removed. Keeps certificates, etcd's data and images.
teardown() {
  local c i d m left=()
  # Pods first, through the API, so the kubelet stops their containers and CNI releases their
  # network; with the controllers stopped first nothing recreates them.
  stop kube-scheduler
  stop kube-controller-manager
  if alive kube-apiserver && alive kubelet && [ -x "$bin/kubectl" ]; then
    kc delete pods --all --all-namespaces --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 ||
      say "pods not all deleted through the API within 60 s; killing their containers"
  fi
  stop kubelet
  if alive kube-apiserver; then
    # the node's status would otherwise look Ready to the next up until a new heartbeat
    kc delete node "$node" --wait=false >/dev/null 2>&1 || true
  fi
  # (the apiserver waits for its clients' open watches; its state is in etcd: no need to wait)
  stop kube-apiserver 3
  stop etcd
  if ! alive containerd && [ -n "$(our_shims)" ] && [ -f "$state/etc/containerd.toml" ]; then
    # containers of a run that ended without down: a containerd reconnects to their shims
    start containerd containerd --config "$state/etc/containerd.toml" --log-level warn
    for i in $(seq 1 50); do
      ctr --address "$sock" version >/dev/null 2>&1 && break
      sleep 0.2
    done
  fi
  local ids=
  if alive containerd; then
    ids=$(ctrc containers ls -q 2>/dev/null || true)
    for c in $(ctrc tasks ls -q 2>/dev/null); do ctrc tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    for c in $(ctrc containers ls -q 2>/dev/null); do
      for i in $(seq 1 25); do
        ctrc tasks rm -f "$c" >/dev/null 2>&1 || true
        ctrc tasks ls -q 2>/dev/null | grep -qxF "$c" || break
        sleep 0.2
      done
      ctrc containers rm "$c" >/dev/null 2>&1 || say "cannot remove container $c from containerd"
    done
  fi
  stop containerd
  for i in $(our_shims); do
    say "ending leftover containerd shim $i"
    kill -KILL "$i" 2>/dev/null || true
  done
  # Mounts under the state directory, deepest first (the kubelet's bind of its root directory,
  # secret volumes, network namespaces, container root filesystems).
  awk -v p="$state/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge" || say "cannot delete the bridge $bridge"; fi
  rm -rf "$state/cni/ipam"
  for d in /sys/fs/cgroup/*/"$cgroup_name" /sys/fs/cgroup/"$cgroup_name"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  # What the kubelet and containerd left in the host paths they hardcode.
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/DEPRECATION
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$state/pod-logs/*" -delete
  fi
  rm -f /var/lib/cni/results/"$cni_net"-*
  for c in $ids; do rm -f /var/lib/cni/results/*-"$c"-*; done
  if [ -f "$run/host-dirs-created" ]; then
    # (what cannot be removed yet stays recorded for the next down)
    sort -r "$run/host-dirs-created" | while read -r d; do
      [ -z "$d" ] || rmdir "$d" 2>/dev/null || [ ! -e "$d" ] || echo "$d"
    done >"$run/host-dirs-created.tmp"
    if [ -s "$run/host-dirs-created.tmp" ]; then
      mv -f "$run/host-dirs-created.tmp" "$run/host-dirs-created"
    else
      rm -f "$run/host-dirs-created.tmp" "$run/host-dirs-created"
    fi
  fi
  rm -f "$run/kubelet.started" "$sock" "$sock.ttrpc"
  # report
  for c in "${components[@]}"; do [ ! -f "$run/$c.pid" ] || left+=("process $c"); done
  [ -z "$(our_shims)" ] || left+=("shims $(our_shims | tr '\n' ' ')")
  m=$(awk -v p="$state/" 'index($2, p) == 1' /proc/self/mounts | wc -l)
  [ "$m" = 0 ] || left+=("$m mounts under $state")
  for d in /sys/fs/cgroup/*/"$cgroup_name" /sys/fs/cgroup/"$cgroup_name"; do [ ! -d "$d" ] || left+=("cgroup $d"); done
  ! ip link show "$bridge" >/dev/null 2>&1 || left+=("bridge $bridge")
  if [ ${#left[@]} -gt 0 ]; then
    say "left behind: ${left[*]}"
    return 1
  fi
}

cmd_down() {
  need_root "stop the cluster"
  local t
  t=$(now)
  [ -d "$state" ] || {
    say "not up (no $state)"
    return 0
  }
  exec 9>>"$state/.lock"
  flock 9
  teardown || die "cannot end everything (see above)"
  say "down in $(since "$t")"
}

cmd_clean() {
  cmd_down
  [ -d "$state" ] || return 0
  case $state in /|/var|/var/lib|/tmp|"$HOME") die "cannot remove $state: refusing a system directory" ;; esac
  rm -rf "$state"
  say "removed $state"
}

cmd_status() {
  local c up=() down=()
  for c in "${components[@]}"; do
    if alive "$c"; then up+=("$c"); else down+=("$c"); fi
  done
  if [ ${#down[@]} -eq 0 ] && [ -x "$bin/kubectl" ] && answers; then
    echo "$prog: up: node $node Ready; kubeconfig: $kubeconfig"
    return 0
  fi
  if [ ${#up[@]} -eq 0 ]; then
    echo "$prog: down"
  else
    echo "$prog: not answering; running: ${up[*]}; not running: ${down[*]}"
  fi
  return 1
}

cmd_import() {
  need_root "import an image"
  [ $# -eq 1 ] || die "usage: $prog import IMAGE.tar"
  [ "$1" = - ] || [ -f "$1" ] || die "cannot import $1: no such file"
  alive containerd || die "cannot import $1: the cluster's containerd does not run (scripts/kube.sh up)"
  ctrc images import "$1" || die "cannot import $1 into the cluster's containerd"
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
  exit 2
}

case ${1:-} in
build) cmd_build ;;
up) cmd_up ;;
down) cmd_down ;;
clean) cmd_clean ;;
status) cmd_status ;;
kubeconfig) echo "$kubeconfig" ;;
import)
  shift
  cmd_import "$@"
  ;;
kubectl)
  shift
  [ -x "$bin/kubectl" ] || die "cannot run kubectl: not built (scripts/kube.sh build)"
  exec "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$state/kubectl-cache" "$@"
  ;;
env)
  echo "export KUBECONFIG=$kubeconfig"
  echo "export PATH=$bin:\$PATH"
  ;;
*) usage ;;
esac
