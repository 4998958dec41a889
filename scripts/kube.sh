#!/usr/bin/env bash
# kube.sh: a real two-node Kubernetes (v1.34.2) on this one machine for airlock's tests, built
# from the Go module proxy and run as plain processes beside (never inside) the Docker Engine.
# Linux, root (but for build), Debian packages.
#
#   scripts/kube.sh build       builds hyperkube (kube-apiserver, kube-controller-manager,
#                               kube-scheduler, kubelet and kubectl in one binary dispatching on
#                               argv[0]; source scripts/kube/hyperkube) and etcd v3.6
#                               (scripts/kube/etcd) into the cache; a no-op when they are there and
#                               their sources did not change. Uses the normal Go build cache.
#   scripts/kube.sh up          installs missing Debian packages, builds when needed, makes the
#                               certificates (openssl), makes the bridges and the iptables rule for
#                               Pod-to-Pod traffic (Network, below), starts each node's containerd,
#                               etcd, the apiserver and its proxy on each bridge, the
#                               controller-manager, scheduler and each node's kubelet, and
#                               waits until the nodes "localhost" and "airlock-node2" are Ready and
#                               the ServiceAccount "default" (and the ConfigMap kube-root-ca.crt)
#                               exist in namespace "default". Prints the time of each phase. A quick
#                               no-op when the cluster answers; starts only what is missing when part
#                               of it runs. AIRLOCK_KUBE_NODES=1 starts node 1 only (default 2).
#   scripts/kube.sh down        ends what up started and nothing else: pods (through the API, then
#                               whatever containers remain, through each node's containerd), the
#                               processes whose pids it recorded, mounts under the state directory
#                               (node 2's mount namespace with them), the bridges, node 2's link, the
#                               iptables rule (and the chain, if up made it), the cgroups and the
#                               kubelet's and CNI's leftovers in fixed host paths.
#                               Keeps certificates, etcd's data and imported images, so a later up
#                               resumes the same cluster with the same kubeconfig.
#   scripts/kube.sh clean       down, then removes the state directory (not the build cache).
#   scripts/kube.sh status      says whether the cluster answers (exit 0) or not (exit 1).
#   scripts/kube.sh node stop 2 node 2 lost: kills (SIGKILL) its kubelet and containerd; its
#                               containers run on, as on a machine cut off the network (the cluster
#                               sees the same either way; a partition is the harder case: the kubelet,
#                               back, must end what was evicted meanwhile).
#   scripts/kube.sh node start 2  starts them again and waits until the node is Ready.
#   scripts/kube.sh kubeconfig  prints the admin kubeconfig's path.
#   scripts/kube.sh import TAR  imports an image archive (docker save / docker-archive tar) into every
#                               running node's containerd, namespace k8s.io. There is no registry:
#                               pods name such images with imagePullPolicy: Never (or IfNotPresent).
#   scripts/kube.sh kubectl ARG...  runs the built kubectl with the admin kubeconfig.
#   scripts/kube.sh env         prints export lines for KUBECONFIG and a PATH holding kubectl.
#
# Paths:
#   ${AIRLOCK_KUBE_CACHE:-$HOME/.cache/airlock-kube}/v1.34.2/bin   hyperkube, its symlinks
#       (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl), etcd
#   ${AIRLOCK_KUBE_STATE:-/var/lib/airlock-kube}   the cluster:
#       kubeconfig              admin kubeconfig (certificates embedded)
#       pki/                    CA, serving and client certificates and kubeconfigs (kubelet-2.* is
#                               node 2's), service-account key
#       etc/                    node 1's containerd.toml, kubelet-config.yaml and cni/ (bridge
#                               conflist); resolv.conf; hosts (the apiserver's /etc/hosts)
#       logs/NAME.log           each component's log (the previous run's in NAME.log.1); node 2's
#                               are containerd-2.log and kubelet-2.log
#       run/                    NAME.pid of every process up started; host paths it created; nodes;
#                               iptables-chain-created when up made DOCKER-USER
#       containerd.sock         node 1's own containerd (config, root, state and runc root below
#                               containerd/; never the Docker Engine's containerd)
#       etcd/ kubelet/ pod-logs/ cni/ images/   component data; images/pause.tar is the sandbox image
#       node2/                  node 2: the same layout (etc/, containerd.sock, containerd/, kubelet/,
#                               pod-logs/, cni/), ns/mnt (its mount namespace, bound there) and
#                               host/ (what it sees as /var/lib/kubelet/device-plugins,
#                               /var/log/containers and /var/lib/cni)
# Network: the control plane listens on 127.0.0.1 only: apiserver 6443, etcd 2379-2381,
#   controller-manager 10257, scheduler 10259. Node 1 ("localhost"): kubelet 127.0.0.1:10250 and
#   10248, Pods on 10.244.0.0/24 on the bridge airlockkube0 (gateway 10.244.0.1 is the host). Node
#   2 ("airlock-node2"): kubelet 10.244.255.2:10250 and 10248, an address on airlockkube-n2, a
#   bridge without ports standing in for a dummy link (this machine kind's kernel has no dummy
#   links); Pods on 10.244.1.0/24 on the bridge airlockkube1 (gateway 10.244.1.1). up makes both
#   bridges with their gateway addresses before the CNI bridge plugin would (it takes them as they
#   are); down deletes them. The kubelet refuses a loopback node IP: node 1 is reached by its
#   hostname, localhost; node 2 by its hostname too (the apiserver prefers Hostname), which resolves
#   in the apiserver's own mount namespace, whose /etc/hosts is etc/hosts (the host's is not
#   changed).
#   The API from Pods: on each node a socat ("apiserver-proxy", "apiserver-proxy-2") listens on its
#   bridge's gateway, 10.244.0.1:6443 and 10.244.1.1:6443, and forwards each connection to
#   127.0.0.1:6443 (TLS goes through: the serving certificate names both gateways; one made by an
#   earlier version without them is renewed, by the same CA). Nothing else listens on a host
#   address other than 127.0.0.1 but node 2's kubelet, on its own link.
#   Pod to Pod: Pods get a route to the other node's subnet through their gateway (the host has
#   both bridges), no masquerade, no default route. The Docker Engine sets the host's FORWARD
#   policy to DROP, and br_netfilter passes even bridged traffic between two Pods of one node
#   through FORWARD; so up inserts one rule, and the host's iptables get no other change from this
#   script:
#     iptables -I DOCKER-USER 1 -i airlockkube+ -o airlockkube+ -s 10.244.0.0/23 -d 10.244.0.0/23 \
#       -m comment --comment "airlock-kube: Pod to Pod (scripts/kube.sh)" -j ACCEPT
#   (DOCKER-USER is the chain Docker keeps for its user's rules, jumped to first from FORWARD;
#   10.244.0.0/23 is both Pod subnets). Where no DOCKER-USER exists (no Docker Engine made it), up
#   makes it and a jump to it at the top of FORWARD, noted in run/iptables-chain-created. down
#   deletes the rule (every copy: the comment marks it), then the chain and jump if up made them
#   and no other rule went into the chain since; it flushes no chain and touches no other rule.
#   Nothing is masqueraded or translated, and there is no kube-proxy (no ClusterIP Services: the
#   "kubernetes" Service's 10.96.0.1 leads nowhere) and no cluster DNS; the kubelets have
#   makeIPTablesUtilChains: false and CNI no ipMasq. (The CNI bridge plugin, as gateway, sets
#   net.ipv4.ip_forward to 1, as the Docker Engine already has.)
# Node loss: the controller-manager's --node-monitor-grace-period is 12 s and --node-monitor-period
#   2 s; kubelets hold a 10 s lease renewed every 2.5 s (nodeLeaseDurationSeconds) and post status
#   every 4 s. A stopped node is Unknown ~13 s later and tainted unreachable:NoExecute; airlock's
#   Pods tolerate that 20 s (backend/kube/podsettings.go).
# Host paths the kubelet and containerd use whatever they are told (down removes what node 1 left;
#   node 2 has its own, bind-mounted in its mount namespace, because a kubelet empties
#   device-plugins when it starts): /var/lib/kubelet/device-plugins, /var/log/containers (symlinks
#   into pod-logs), /var/lib/cni (CNI results), the cgroups /sys/fs/cgroup/*/airlock-kube and
#   airlock-kube-2. Node 2's mount namespace is private (the host's / is): it holds copies of the
#   host's mounts at its making, which is why up makes it before any container runs.
# Facts of this machine kind behind the choices: Kubernetes stays on 1.34 (1.35's kubelet refuses
# cgroup v1); containerd needs restrict_oom_score_adj (no CAP_SYS_RESOURCE).
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
svc_cidr=10.96.0.0/24
cni_bin=/usr/lib/cni
pause_image=docker.io/airlock-kube/pause:1
apiserver_url=https://127.0.0.1:6443
# node 2's address, on a link of its own without ports (the kubelet refuses a loopback one)
node2_ip=10.244.255.2
node2_link=airlockkube-n2
# Both nodes' Pod subnets (10.244.0.0/24 and 10.244.1.0/24): the host forwards between them.
pods_cidr=10.244.0.0/23
# The one iptables rule up adds (and down deletes): forwarded traffic from a Pod to a Pod, between
# or on the cluster's bridges, accepted before the Docker Engine's FORWARD rules and DROP policy.
# In DOCKER-USER, the chain Docker keeps for its user's rules and jumps to first from FORWARD.
fw_chain=DOCKER-USER
fw_rule=(-i airlockkube+ -o airlockkube+ -s "$pods_cidr" -d "$pods_cidr" -m comment --comment "airlock-kube: Pod to Pod (scripts/kube.sh)" -j ACCEPT)
# The port Pods reach the apiserver on, at their bridge's gateway (a socat forwarder to 127.0.0.1).
apiserver_port=6443
# The apiserver's serving certificate is for these names and addresses (the bridges' gateways
# among them, for Pods).
apiserver_sans="DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:10.244.0.1,IP:10.244.1.1"
# The node-monitor grace period (controller-manager) and the kubelets' lease (renewed every
# quarter of its duration): a lost node is marked within grace + monitor period.
node_monitor_grace=12s
node_monitor_period=2s
node_lease_seconds=10
control_components=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# Host paths the kubelet and containerd hardcode; up records which of them it created.
host_dirs=(/var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers /var/lib/cni /var/lib/cni/results)

# node_vars N: the facts of node N (1 or 2) in n_* variables. Node 1 keeps the layout of the
# single-node cluster (its files right in the state directory); node 2's are under node2/.
node_vars() {
  case $1 in
  1)
    n_name=localhost n_sfx= n_dir=$state n_addr=127.0.0.1 n_ns=
    n_bridge=airlockkube0 n_net=airlock-kube n_cidr=10.244.0.0/24 n_gw=10.244.0.1 n_other=10.244.1.0/24 n_cgroup=airlock-kube
    ;;
  2)
    n_name=airlock-node2 n_sfx=-2 n_dir=$state/node2 n_addr=$node2_ip n_ns=$state/node2/ns/mnt
    n_bridge=airlockkube1 n_net=airlock-kube-2 n_cidr=10.244.1.0/24 n_gw=10.244.1.1 n_other=10.244.0.0/24 n_cgroup=airlock-kube-2
    ;;
  *) die "cannot use node $1: the test cluster has nodes 1 and 2" ;;
  esac
  n_sock=$n_dir/containerd.sock
}
all_nodes=(1 2)
# wanted_nodes: the nodes up starts: AIRLOCK_KUBE_NODES (1 or 2, default 2), else what the
# running cluster was started with.
wanted_nodes() {
  local k=${AIRLOCK_KUBE_NODES:-}
  [ -n "$k" ] || k=$(cat "$run/nodes" 2>/dev/null || echo 2)
  case $k in 1) echo 1 ;; 2) echo 1 2 ;; *) die "cannot start $k nodes: AIRLOCK_KUBE_NODES is 1 or 2" ;; esac
}

say() { echo "$prog: $*" >&2; }
die() {
  say "$*"
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
need_root() { [ "$(id -u)" = 0 ] || die "cannot $1: must run as root"; }
kc() { "$bin/kubectl" --kubeconfig "$kubeconfig" --cache-dir "$state/kubectl-cache" --request-timeout=10s "$@"; }
# ctrc SOCKET ARG...: ctr on one node's containerd, namespace k8s.io.
ctrc() { ctr --address "$1" --namespace k8s.io "${@:2}"; }

# running PID: the process exists and is not a zombie.
running() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# cmdline PID: the command line of PID, read again while it reads empty, as it does for a moment
# while the process execs (CI once failed "exited before apiserver ready" with the apiserver
# running); fails when the process is gone.
cmdline() {
  local i c
  for ((i = 0; i < 100; i++)); do
    c=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
    [ -z "$c" ] || {
      printf '%s' "$c"
      return 0
    }
    running "$1" || return 1
    sleep 0.01
  done
  return 1
}

# alive NAME: the process up recorded for NAME (containerd-2 and kubelet-2 are node 2's) runs and is still that process (its command line
# names the component and this state directory, or for an apiserver proxy is that socat: a recycled
# pid is not ours).
alive() {
  local f=$run/$1.pid pid cmd
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && running "$pid" || return 1
  cmd=$(cmdline "$pid") || return 1
  case $1 in
  apiserver-proxy*) [[ $cmd == "socat -lpairlock-kube-$1 "* ]] ;;
  *) [[ $cmd == *"${1%-2}"* && $cmd == *"$state/"* ]] ;;
  esac
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
  local pid=$! i
  echo "$pid" >"$run/$name.pid"
  # Until it execs, the child is a copy of this script, which alive does not take for NAME
  # (CI once failed "exited before apiserver ready" with an empty log): wait for the exec.
  for ((i = 0; i < 100; i++)); do
    [[ $(cmdline "$pid") == *"$prog"* ]] || break
    sleep 0.01
  done
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

# port_free PORT...: fails naming the process of another program listening on a loopback port we
# need (on 127.0.0.1 or every address; not one on another address, such as node 2's kubelet's or
# an apiserver proxy's).
port_free() {
  local p taken
  for p in "$@"; do
    taken=$(ss -Hltnp "sport = :$p" 2>/dev/null | awk '$4 ~ /^(127\.0\.0\.1|0\.0\.0\.0|\*|\[::\]|\[::ffff:127\.0\.0\.1\]):/')
    if [ -n "$taken" ]; then
      die "cannot start the cluster: 127.0.0.1:$p is taken by another program ($(grep -o 'users:.*' <<<"$taken" | head -1))"
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
  # (the apiserver proxies on the bridges' gateways; the host's rule for Pod-to-Pod traffic)
  command -v socat >/dev/null 2>&1 || need+=(socat)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
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

# apiserver_cert_current: the apiserver's serving certificate holds every name and address of
# apiserver_sans.
apiserver_cert_current() {
  local txt san
  txt=$(openssl x509 -in "$pki/apiserver.crt" -noout -text 2>/dev/null) || return 1
  txt=$(grep -A1 'Subject Alternative Name' <<<"$txt" | tail -n 1 | tr -d ' ')
  for san in ${apiserver_sans//,/ }; do
    san=${san/#IP:/IPAddress:}
    [[ ",$txt," == *",$san,"* ]] || return 1
  done
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

# gen_pki: CA, certificates and kubeconfigs (once; all or nothing), then each node's kubelet
# client certificate (system:node:NAME, which the NodeRestriction admission checks) when missing.
gen_pki() {
  local d=$state/pki.tmp client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth" server="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=$apiserver_sans" k
  if ! [ -f "$pki/complete" ] || ! [ -f "$kubeconfig" ]; then
    rm -rf "$d"
    mkdir -p "$d"
    (
      cd "$d"
      umask 077
      genkey ca.key
      openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=airlock-kube-ca" -out ca.crt
      genkey sa.key
      openssl pkey -in sa.key -pubout -out sa.pub
      sign apiserver "/CN=kube-apiserver" "$server"
      sign admin "/O=system:masters/CN=airlock-kube-admin" "$client"
      sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
      sign controller-manager "/CN=system:kube-controller-manager" "$client"
      sign scheduler "/CN=system:kube-scheduler" "$client"
      for c in admin controller-manager scheduler; do kubeconfig_for "$c" >"$c.kubeconfig"; done
      touch complete
    )
    rm -rf "$pki"
    mv "$d" "$pki"
    install -m 600 "$pki/admin.kubeconfig" "$kubeconfig"
  fi
  # A serving certificate of an earlier version lacks names or addresses (the gateways): a new one,
  # by the same CA (kubeconfigs and Pods' kube-root-ca.crt stay valid); a running apiserver is
  # restarted for it (up starts it again).
  if ! apiserver_cert_current; then
    say "renewing the apiserver's serving certificate for $apiserver_sans"
    (
      cd "$pki"
      umask 077
      sign apiserver-new "/CN=kube-apiserver" "$server"
      mv -f apiserver-new.key apiserver.key
      mv -f apiserver-new.crt apiserver.crt
    )
    if alive kube-apiserver; then
      say "restarting kube-apiserver for its new certificate"
      stop kube-apiserver 3
    fi
  fi
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    [ -f "$pki/kubelet$n_sfx.kubeconfig" ] && continue
    (
      cd "$pki"
      umask 077
      sign "kubelet$n_sfx" "/O=system:nodes/CN=system:node:$n_name" "$client"
      kubeconfig_for "kubelet$n_sfx" >"kubelet$n_sfx.kubeconfig.tmp"
      mv "kubelet$n_sfx.kubeconfig.tmp" "kubelet$n_sfx.kubeconfig"
    )
  done
}

# write_configs: the control plane's files (resolv.conf, the apiserver's hosts file).
write_configs() {
  mkdir -p "$state/etc" "$state/controller-manager/volume-plugins" "$state/etcd"
  chmod 700 "$state/etcd"
  echo "nameserver 127.0.0.1" >"$state/etc/resolv.conf"
  # The apiserver reaches a kubelet by its node's hostname: node 2's resolves in the apiserver's
  # own mount namespace, where this file is /etc/hosts (the host's is not changed).
  { cat /etc/hosts && echo "$node2_ip airlock-node2"; } >"$state/etc/hosts"
}

# write_node_configs N: node N's CNI, containerd and kubelet configuration (node_vars N).
write_node_configs() {
  node_vars "$1"
  mkdir -p "$n_dir/etc/cni" "$n_dir/containerd/root" "$n_dir/containerd/state" "$n_dir/containerd/runc" \
    "$n_dir/cni/ipam" "$n_dir/pod-logs" "$n_dir/kubelet/volume-plugins"
  # Pods reach the other node's Pods through their gateway (the host routes between the two
  # bridges); they have no default route.
  cat >"$n_dir/etc/cni/10-$n_net.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$n_net",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$n_bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$n_cidr"}]], "routes": [{"dst": "$n_other"}], "dataDir": "$n_dir/cni/ipam"}
    }
  ]
}
EOF
  cat >"$n_dir/etc/containerd.toml" <<EOF
# Node $1's own containerd (scripts/kube.sh); never the Docker Engine's.
version = 2
root = "$n_dir/containerd/root"
state = "$n_dir/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$n_sock"

[ttrpc]
  address = "$n_sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

# containerd 1.6's task service needs the legacy runtime loaded; unused, its root is ours too
[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = "$n_dir/containerd/runc-v1"

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
        Root = "$n_dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$n_dir/etc/cni"
    max_conf_num = 1
EOF
  cat >"$n_dir/etc/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $n_addr
port: 10250
readOnlyPort: 0
healthzBindAddress: $n_addr
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$n_cgroup
containerRuntimeEndpoint: unix://$n_sock
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: $state/etc/resolv.conf
podLogsDir: $n_dir/pod-logs
volumePluginDir: $n_dir/kubelet/volume-plugins
serializeImagePulls: false
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# renewed every quarter of it: the controller-manager's grace ($node_monitor_grace) allows ~4 misses
nodeLeaseDurationSeconds: $node_lease_seconds
nodeStatusUpdateFrequency: 4s
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

# cgroup_dirs NAME: the kubelet's cgroupRoot NAME in every hierarchy.
cgroup_dirs() {
  local c
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    echo "/sys/fs/cgroup/$1"
    return
  fi
  for c in /sys/fs/cgroup/*; do
    [ -d "$c" ] && [ ! -L "$c" ] && [ "${c##*/}" != unified ] && echo "$c/$1"
  done
}

prepare_cgroups() {
  local c
  for c in $(cgroup_dirs "$1"); do
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

# ns2_held: node 2's mount namespace exists (bound on node2/ns/mnt).
ns2_held() { awk -v f="$state/node2/ns/mnt" '$2 == f && $3 == "nsfs" { ok = 1 } END { exit !ok }' /proc/self/mounts; }

# ensure_node2_host: node 2's machine: its address on a dummy link, and a mount namespace of its
# own (kept on node2/ns/mnt, so that containerd-2 finds its containers' mounts after a node stop)
# where the host paths the kubelet and containerd hardcode are node 2's own directories:
# /var/lib/kubelet/device-plugins (a kubelet empties it when it starts), /var/log/containers,
# /var/lib/cni.
ensure_node2_host() {
  local d=$state/node2/ns h=$state/node2/host
  if ! ip link show "$node2_link" >/dev/null 2>&1; then
    # (a bridge without ports: this kernel may lack the dummy link type)
    ip link add "$node2_link" type bridge
    ip addr add "$node2_ip/32" dev "$node2_link"
    ip link set "$node2_link" up
  fi
  ns2_held && return 0
  mkdir -p "$d" "$h/device-plugins" "$h/log-containers" "$h/cni" /var/lib/kubelet/device-plugins /var/log/containers /var/lib/cni
  # (a namespace can be bound only on a private mount)
  awk -v f="$d" '$2 == f { ok = 1 } END { exit !ok }' /proc/self/mounts || mount --bind "$d" "$d"
  mount --make-private "$d"
  touch "$d/mnt"
  unshare --mount="$d/mnt" --propagation private sh -ec "
    mount --bind '$h/device-plugins' /var/lib/kubelet/device-plugins
    mount --bind '$h/log-containers' /var/log/containers
    mount --bind '$h/cni' /var/lib/cni" || die "cannot make node 2's mount namespace"
}

# in_node N CMD...: CMD as node N runs it (node 2's in its mount namespace).
in_node() {
  node_vars "$1"
  if [ -n "$n_ns" ]; then
    nsenter --mount="$n_ns" -- "${@:2}"
  else
    "${@:2}"
  fi
}

# ensure_bridge N: node N's Pod bridge with its gateway address, made before the CNI bridge plugin
# would make it (which takes it as it is) so that node N's apiserver proxy can listen on the gateway.
ensure_bridge() {
  node_vars "$1"
  ip link show "$n_bridge" >/dev/null 2>&1 || ip link add "$n_bridge" type bridge
  ip -o -4 addr show dev "$n_bridge" | grep -qF " $n_gw/24 " || ip addr add "$n_gw/24" dev "$n_bridge"
  ip link set "$n_bridge" up
}

# proxy_listening ADDR: something listens on ADDR:apiserver_port.
proxy_listening() { [ -n "$(ss -Hltn "src $1:$apiserver_port" 2>/dev/null)" ]; }

# start_proxy N: node N's apiserver proxy: socat listening on the gateway of node N's bridge (port
# 6443), each connection forwarded to the apiserver on 127.0.0.1:6443 (TLS end to end: the serving
# certificate names the gateways). The apiserver binds one address, which stays 127.0.0.1.
start_proxy() {
  node_vars "$1"
  local name=apiserver-proxy$n_sfx
  alive "$name" && return 0
  ensure_bridge "$1"
  start "$name" socat "-lpairlock-kube-$name" "TCP4-LISTEN:$apiserver_port,bind=$n_gw,reuseaddr,fork,backlog=128" "TCP4:127.0.0.1:$apiserver_port"
  wait_until 10 "$name" "the apiserver proxy listening on $n_gw:$apiserver_port" proxy_listening "$n_gw"
}

# ipt ARG...: iptables, waiting for the xtables lock; its errors on stderr (without iptables-nft's
# note on legacy tables).
ipt() {
  local out
  out=$(iptables -w 10 "$@" 2>&1) && return 0
  grep -v 'iptables-legacy tables present' <<<"$out" >&2 || true
  return 1
}

# fw_present: the host has up's rule.
fw_present() { iptables -w 10 -C "$fw_chain" "${fw_rule[@]}" >/dev/null 2>&1; }

# open_forward: the host forwards Pod-to-Pod traffic (see the header): up's one rule at the top of
# DOCKER-USER. Without that chain (no Docker Engine made it) up makes it, jumped to first from
# FORWARD, and notes so for down.
open_forward() {
  if ! iptables -w 10 -S "$fw_chain" >/dev/null 2>&1; then
    ipt -N "$fw_chain" || die "cannot make the iptables chain $fw_chain"
    echo "$fw_chain" >"$run/iptables-chain-created"
    ipt -I FORWARD 1 -j "$fw_chain" || die "cannot jump to the iptables chain $fw_chain from FORWARD"
  fi
  fw_present || ipt -I "$fw_chain" 1 "${fw_rule[@]}" || die "cannot add the iptables rule for Pod-to-Pod traffic to $fw_chain"
}

# close_forward: deletes up's rule (every copy: it is ours by its comment), and the chain with its
# jump when up made it and nothing else put a rule in it since (a Docker Engine started meanwhile
# adds its own: the chain is then Docker's and stays).
close_forward() {
  command -v iptables >/dev/null 2>&1 || return 0
  while fw_present; do
    ipt -D "$fw_chain" "${fw_rule[@]}" || {
      say "cannot delete the iptables rule for Pod-to-Pod traffic from $fw_chain"
      return 0
    }
  done
  [ -f "$run/iptables-chain-created" ] || return 0
  if iptables -w 10 -S "$fw_chain" >/dev/null 2>&1; then
    if [ -n "$(iptables -w 10 -S "$fw_chain" 2>/dev/null | grep '^-A')" ]; then
      say "keeping the iptables chain $fw_chain that up made: it holds another program's rules now"
    else
      while iptables -w 10 -C FORWARD -j "$fw_chain" >/dev/null 2>&1; do
        ipt -D FORWARD -j "$fw_chain" || break
      done
      ipt -X "$fw_chain" || say "cannot delete the iptables chain $fw_chain that up made"
    fi
  fi
  rm -f "$run/iptables-chain-created"
}

apiserver_ready() {
  curl -fsS --max-time 3 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$apiserver_url/readyz" >/dev/null 2>&1
}

# node_ready N: node N is Ready by a heartbeat of its running kubelet (not a stale status
# left in etcd by an earlier run).
node_ready() {
  local out ready hb since_s
  node_vars "$1"
  out=$(kc get node "$n_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' 2>/dev/null) || return 1
  ready=${out%% *}
  hb=${out#* }
  [ "$ready" = True ] || return 1
  since_s=$(cat "$run/kubelet$n_sfx.started" 2>/dev/null || echo 0)
  [ "$(date -d "$hb" +%s 2>/dev/null || echo 0)" -ge "$since_s" ]
}

default_sa_ready() {
  kc -n default get serviceaccount default >/dev/null 2>&1 && kc -n default get configmap kube-root-ca.crt >/dev/null 2>&1
}

# components_of N...: the processes of the control plane and of nodes N (with the apiserver proxy
# on each node's bridge).
components_of() {
  local k
  echo "${control_components[@]}"
  for k in "$@"; do
    node_vars "$k"
    echo "containerd$n_sfx kubelet$n_sfx apiserver-proxy$n_sfx"
  done
}

any_alive() {
  local c
  for c in $(components_of "${all_nodes[@]}"); do alive "$c" && return 0; done
  return 1
}

# answers N...: the control plane and nodes N run and the nodes are Ready.
answers() {
  local c k
  for c in $(components_of "$@"); do alive "$c" || return 1; done
  apiserver_ready || return 1
  for k in "$@"; do node_ready "$k" || return 1; done
}

# start_containerd N: node N's containerd, and the sandbox image in it.
start_containerd() {
  node_vars "$1"
  if ! alive "containerd$n_sfx"; then
    [ ${#n_sock} -lt 100 ] || die "cannot start containerd: socket path $n_sock is too long for a unix socket"
    rm -f "$n_sock" "$n_sock.ttrpc"
    if [ -n "$n_ns" ]; then
      start "containerd$n_sfx" nsenter --mount="$n_ns" -- containerd --config "$n_dir/etc/containerd.toml" --log-level warn
    else
      start "containerd$n_sfx" containerd --config "$n_dir/etc/containerd.toml" --log-level warn
    fi
    wait_until 30 "containerd$n_sfx" "containerd of node $1 answering" ctr --address "$n_sock" version
  fi
  if ! ctrc "$n_sock" images ls -q 2>/dev/null | grep -qxF "$pause_image"; then
    ctrc "$n_sock" images import "$state/images/pause.tar" >/dev/null || die "cannot import the sandbox image into node $1's containerd"
  fi
}

# start_kubelet N: node N's kubelet (its containerd runs).
start_kubelet() {
  node_vars "$1"
  alive "kubelet$n_sfx" && return 0
  if [ "$1" = 1 ]; then port_free 10250 10248; fi
  prepare_cgroups "$n_cgroup"
  date +%s >"$run/kubelet$n_sfx.started"
  local args=(--config="$n_dir/etc/kubelet-config.yaml" --kubeconfig="$pki/kubelet$n_sfx.kubeconfig"
    --root-dir="$n_dir/kubelet" --cert-dir="$n_dir/kubelet/pki" --hostname-override="$n_name")
  if [ -n "$n_ns" ]; then
    start "kubelet$n_sfx" nsenter --mount="$n_ns" -- "$bin/kubelet" "${args[@]}" --node-ip="$n_addr"
  else
    start "kubelet$n_sfx" "$bin/kubelet" "${args[@]}"
  fi
}

cmd_up() {
  need_root "start the cluster"
  local t0 t c k nodes
  t0=$(now)
  mkdir -p "$state"
  exec 9>>"$state/.lock"
  flock 9
  read -ra nodes <<<"$(wanted_nodes)"
  if [ -x "$bin/kubectl" ] && [ -f "$kubeconfig" ] && answers "${nodes[@]}" && fw_present && apiserver_cert_current; then
    say "already up with ${#nodes[@]} node(s) ($(since "$t0")); kubeconfig: $kubeconfig"
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
  for k in "${nodes[@]}"; do write_node_configs "$k"; done
  make_pause_image
  record_host_dirs
  echo "${#nodes[@]}" >"$run/nodes"
  # (before any container runs: the namespace copies the host's mounts)
  [ "${#nodes[@]}" = 1 ] || ensure_node2_host
  say "phase certificates and configuration: $(since "$t")"

  t=$(now)
  for k in "${nodes[@]}"; do ensure_bridge "$k"; done
  open_forward
  say "phase network (bridges, iptables rule in $fw_chain): $(since "$t")"

  t=$(now)
  for k in "${nodes[@]}"; do start_containerd "$k"; done
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
    port_free $apiserver_port
    # In a mount namespace of its own whose /etc/hosts names node 2 (see write_configs).
    start kube-apiserver unshare --mount --propagation private sh -ec \
      'mount --bind "$0" /etc/hosts; shift; exec "$@"' "$state/etc/hosts" -- \
      "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
      --bind-address=127.0.0.1 --secure-port=$apiserver_port --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
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
  for k in "${nodes[@]}"; do start_proxy "$k"; done
  say "phase kube-apiserver and its proxies on the bridges: $(since "$t")"

  t=$(now)
  if ! alive kube-controller-manager; then
    port_free 10257
    start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$pki/controller-manager.kubeconfig" \
      --authentication-kubeconfig="$pki/controller-manager.kubeconfig" --authorization-kubeconfig="$pki/controller-manager.kubeconfig" \
      --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
      --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
      --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
      --node-monitor-grace-period=$node_monitor_grace --node-monitor-period=$node_monitor_period \
      --flex-volume-plugin-dir="$state/controller-manager/volume-plugins" --profiling=false
  fi
  if ! alive kube-scheduler; then
    port_free 10259
    start kube-scheduler "$bin/kube-scheduler" --kubeconfig="$pki/scheduler.kubeconfig" \
      --authentication-kubeconfig="$pki/scheduler.kubeconfig" --authorization-kubeconfig="$pki/scheduler.kubeconfig" \
      --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  fi
  for k in "${nodes[@]}"; do start_kubelet "$k"; done
  for k in "${nodes[@]}"; do
    node_vars "$k"
    wait_until 120 "kubelet$n_sfx" "node $n_name Ready" node_ready "$k"
  done
  say "phase kubelets, ${#nodes[@]} node(s) Ready: $(since "$t")"

  t=$(now)
  wait_until 60 kube-controller-manager "ServiceAccount default" default_sa_ready
  alive kube-scheduler || fail_log kube-scheduler "cannot start the cluster: kube-scheduler exited"
  say "phase ServiceAccount default: $(since "$t")"
  say "up with ${#nodes[@]} node(s) in $(since "$t0"); kubeconfig: $kubeconfig"
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

# our_shims SOCKET: pids of containerd shims serving the containerd on SOCKET (their command
# line names it).
our_shims() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $cmd == *containerd-shim* && $cmd == *"-address $1 "* ]] && echo "${p#/proc/}"
  done
  return 0
}

# in_ns2: pids of the processes in node 2's mount namespace.
in_ns2() {
  local ino p
  ns2_held || return 0
  ino=$(stat -L -c %i "$state/node2/ns/mnt" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [ "$(stat -L -c %i "$p/ns/mnt" 2>/dev/null)" = "$ino" ] && echo "${p#/proc/}"
  done
  return 0
}

# leftovers: an earlier run left something behind (pids, shims, mounts, bridges, links, cgroups).
leftovers() {
  local d k
  [ -n "$(ls -A "$run" 2>/dev/null | grep -vx nodes)" ] && return 0
  awk -v p="$state/" 'index($2, p) == 1 { f = 1 } END { exit !f }' /proc/self/mounts && return 0
  ip link show "$node2_link" >/dev/null 2>&1 && return 0
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    [ -n "$(our_shims "$n_sock")" ] && return 0
    ip link show "$n_bridge" >/dev/null 2>&1 && return 0
    for d in /sys/fs/cgroup/*/"$n_cgroup" /sys/fs/cgroup/"$n_cgroup"; do [ -d "$d" ] && return 0; done
  done
  return 1
}

# end_containers N: kills and removes every container of node N through its containerd
# (started again for it when shims of a run that ended without down remain), then ends it.
end_containers() {
  local c i ids=
  node_vars "$1"
  if ! alive "containerd$n_sfx" && [ -n "$(our_shims "$n_sock")" ] && [ -f "$n_dir/etc/containerd.toml" ] &&
    { [ -z "$n_ns" ] || ns2_held; }; then
    start_containerd_only "$1"
  fi
  if alive "containerd$n_sfx"; then
    ids=$(ctrc "$n_sock" containers ls -q 2>/dev/null || true)
    for c in $(ctrc "$n_sock" tasks ls -q 2>/dev/null); do ctrc "$n_sock" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    for c in $ids; do
      for i in $(seq 1 25); do
        ctrc "$n_sock" tasks rm -f "$c" >/dev/null 2>&1 || true
        ctrc "$n_sock" tasks ls -q 2>/dev/null | grep -qxF "$c" || break
        sleep 0.2
      done
      ctrc "$n_sock" containers rm "$c" >/dev/null 2>&1 || say "cannot remove container $c from node $1's containerd"
    done
  fi
  stop "containerd$n_sfx"
  for i in $(our_shims "$n_sock"); do
    say "ending leftover containerd shim $i of node $1"
    kill -KILL "$i" 2>/dev/null || true
  done
  # node 1's CNI results are in the host's /var/lib/cni (node 2's in its own directory)
  if [ -z "$n_ns" ]; then
    rm -f /var/lib/cni/results/"$n_net"-*
    for c in $ids; do rm -f /var/lib/cni/results/*-"$c"-*; done
  fi
}

# stop_proxy N: node N's apiserver proxy, and the connections it forked (its process group: start
# made it a session of its own).
stop_proxy() {
  local name pid=
  node_vars "$1"
  name=apiserver-proxy$n_sfx
  ! alive "$name" || pid=$(cat "$run/$name.pid")
  stop "$name" 3
  [ -z "$pid" ] || kill -KILL -- "-$pid" 2>/dev/null || true
}

# start_containerd_only N: node N's containerd, waited for, without an image import.
start_containerd_only() {
  local i
  node_vars "$1"
  if [ -n "$n_ns" ]; then
    start "containerd$n_sfx" nsenter --mount="$n_ns" -- containerd --config "$n_dir/etc/containerd.toml" --log-level warn
  else
    start "containerd$n_sfx" containerd --config "$n_dir/etc/containerd.toml" --log-level warn
  fi
  for i in $(seq 1 50); do
    ctr --address "$n_sock" version >/dev/null 2>&1 && break
    sleep 0.2
  done
}

# teardown: ends everything up started and removes what it left on the host, best effort,
# reporting what could not be removed. Keeps certificates, etcd's data and images.
teardown() {
  local c i d m k p left=()
  # Pods first, through the API, so the kubelets stop their containers and CNI releases their
  # network; with the controllers stopped first nothing recreates them. (A stopped node's Pods
  # cannot be deleted so: its containers are killed below.)
  stop kube-scheduler
  stop kube-controller-manager
  if alive kube-apiserver && { alive kubelet || alive kubelet-2; } && [ -x "$bin/kubectl" ]; then
    for k in "${all_nodes[@]}"; do
      node_vars "$k"
      alive "kubelet$n_sfx" || kc delete pods --all-namespaces --field-selector "spec.nodeName=$n_name" \
        --grace-period=0 --force >/dev/null 2>&1 || true
    done
    kc delete pods --all --all-namespaces --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 ||
      say "pods not all deleted through the API within 60 s; killing their containers"
  fi
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    stop "kubelet$n_sfx"
    # the node's status would otherwise look Ready to the next up until a new heartbeat
    if alive kube-apiserver; then kc delete node "$n_name" --wait=false >/dev/null 2>&1 || true; fi
  done
  # (the apiserver waits for its clients' open watches; its state is in etcd: no need to wait)
  stop kube-apiserver 3
  for k in "${all_nodes[@]}"; do stop_proxy "$k"; done
  stop etcd
  for k in "${all_nodes[@]}"; do end_containers "$k"; done
  # Node 2's mount namespace goes with its last process and its binding.
  for p in $(in_ns2); do
    say "ending process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60)) left in node 2's mount namespace"
    kill -KILL "$p" 2>/dev/null || true
  done
  # Mounts under the state directory, deepest first (the kubelet's bind of its root directory,
  # secret volumes, network namespaces, container root filesystems, node 2's namespace).
  awk -v p="$state/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
  done
  if ip link show "$node2_link" >/dev/null 2>&1; then ip link del "$node2_link" || say "cannot delete the link $node2_link"; fi
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    if ip link show "$n_bridge" >/dev/null 2>&1; then ip link del "$n_bridge" || say "cannot delete the bridge $n_bridge"; fi
    rm -rf "$n_dir/cni/ipam"
    for d in /sys/fs/cgroup/*/"$n_cgroup" /sys/fs/cgroup/"$n_cgroup"; do
      [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    rm -f "$run/kubelet$n_sfx.started" "$n_sock" "$n_sock.ttrpc"
  done
  # What node 1's kubelet and containerd left in the host paths they hardcode.
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/kubelet/device-plugins/DEPRECATION
  if [ -d /var/log/containers ]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$state/pod-logs/*" -delete
  fi
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
  close_forward
  rm -f "$run/nodes" "$run/node-2.stopped"
  # report
  for c in $(components_of "${all_nodes[@]}"); do [ ! -f "$run/$c.pid" ] || left+=("process $c"); done
  m=$(awk -v p="$state/" 'index($2, p) == 1' /proc/self/mounts | wc -l)
  [ "$m" = 0 ] || left+=("$m mounts under $state")
  ! ip link show "$node2_link" >/dev/null 2>&1 || left+=("link $node2_link")
  ! fw_present || left+=("iptables rule in $fw_chain")
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    [ -z "$(our_shims "$n_sock")" ] || left+=("shims $(our_shims "$n_sock" | tr '\n' ' ')")
    for d in /sys/fs/cgroup/*/"$n_cgroup" /sys/fs/cgroup/"$n_cgroup"; do [ ! -d "$d" ] || left+=("cgroup $d"); done
    ! ip link show "$n_bridge" >/dev/null 2>&1 || left+=("bridge $n_bridge")
  done
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
  local c k up=() down=() nodes ready=()
  read -ra nodes <<<"$(wanted_nodes)"
  for c in $(components_of "${nodes[@]}"); do
    if alive "$c"; then up+=("$c"); else down+=("$c"); fi
  done
  if [ ${#down[@]} -eq 0 ] && [ -x "$bin/kubectl" ] && answers "${nodes[@]}"; then
    for k in "${nodes[@]}"; do
      node_vars "$k"
      ready+=("$n_name")
    done
    echo "$prog: up: node(s) ${ready[*]} Ready; kubeconfig: $kubeconfig"
    return 0
  fi
  if [ ${#up[@]} -eq 0 ]; then
    echo "$prog: down"
  else
    echo "$prog: not answering; running: ${up[*]}; not running: ${down[*]}"
  fi
  return 1
}

# cmd_import TAR: into every running node's containerd (stdin is read once).
cmd_import() {
  need_root "import an image"
  [ $# -eq 1 ] || die "usage: $prog import IMAGE.tar"
  [ "$1" = - ] || [ -f "$1" ] || die "cannot import $1: no such file"
  local f=$1 k done=0
  if [ "$f" = - ]; then
    import_tmp=$(mktemp "${TMPDIR:-/tmp}/airlock-kube-import.XXXXXX")
    trap 'rm -f "$import_tmp"' EXIT
    cat >"$import_tmp"
    f=$import_tmp
  fi
  for k in "${all_nodes[@]}"; do
    node_vars "$k"
    alive "containerd$n_sfx" || continue
    ctrc "$n_sock" images import "$f" || die "cannot import $1 into node $k's containerd"
    done=$((done + 1))
  done
  [ "$done" -gt 0 ] || die "cannot import $1: no containerd of the cluster runs (scripts/kube.sh up)"
}

# cmd_node stop|start 2: node 2 lost (its kubelet and containerd killed, SIGKILL, as a machine
# cut off the network: its containers keep running and nothing tells the cluster), and back.
cmd_node() {
  need_root "change a node"
  [ $# -eq 2 ] && [ "$2" = 2 ] || die "usage: $prog node stop|start 2"
  local t p
  t=$(now)
  exec 9>>"$state/.lock"
  flock 9
  node_vars 2
  case $1 in
  stop)
    for p in kubelet-2 containerd-2; do
      if alive "$p"; then kill -KILL "$(cat "$run/$p.pid")" 2>/dev/null || true; fi
      rm -f "$run/$p.pid"
    done
    touch "$run/node-2.stopped"
    say "node $n_name stopped (kubelet and containerd killed; its containers run on) in $(since "$t")"
    ;;
  start)
    alive kube-apiserver || die "cannot start node 2: the cluster is not up (scripts/kube.sh up)"
    write_node_configs 2
    ensure_node2_host
    start_containerd 2
    start_proxy 2
    start_kubelet 2
    wait_until 120 kubelet-2 "node $n_name Ready" node_ready 2
    rm -f "$run/node-2.stopped"
    say "node $n_name Ready in $(since "$t")"
    ;;
  *) die "usage: $prog node stop|start 2" ;;
  esac
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
node)
  shift
  cmd_node "$@"
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
