#!/usr/bin/env bash
# Real projects' test suites through airlock (issue 24's proof), not part of `make bench`
# (it takes about 15 minutes): for each project, RUNS interleaved pairs of
#   airlock run -- <the project's CI test command>     (examples/realprojects/<name>/sandbox.toml)
#   its one-container floor: one `docker run --rm` of the same image that starts the server
#   in the background, waits for it, and runs the same command with the same caches
# after one untimed warm-up of each, and prints a Markdown table: medians, the ratio, and
# every run that failed with the tests that failed (the same flaky test on both sides is the
# suite's, not airlock's). The table is for docs/benchmarks.md "## Real projects' test suites" (copied there by hand).
#
# A project whose CI runs `docker compose up -d` of its own compose file and then its tests on
# the runner, dialing the published port on 127.0.0.1 (watermill-redisstream: issue 45's
# "watermill shape", a chatty Go client against a service), has a third side in each round:
#   docker-compose: `docker-compose up -d` of the project's compose file (with an override
#   file in examples/realprojects/<name>/ that changes only the image: no registry here), then
#   the CI's wait and test command in a `docker run --rm` of the floor's image with the same
#   caches, in the network namespace of the service (`--network container:<its container>`,
#   compose's `network_mode: service:redis`, as scripts/bench-redis.sh's compose job): the
#   tests' 127.0.0.1:PORT is the service's own loopback, with no relay between them.
#   COMPOSE_NET=host runs the tests on the host's network instead, as on the CI's runner:
#   127.0.0.1:PORT is then the published port, through the Engine's docker-proxy (a userspace
#   relay, as the supervisor's port forwarding has been).
#   Its `docker-compose down` follows each run, untimed (as airlock's removal after its command).
# docker-compose 1.29 (a baseline only) is installed with apt when missing, as `make bench`
# does (scripts/bench-redis.sh); without it that column is "–".
#
# Usage: scripts/bench-projects.sh [PROJECT...]   (default: redislock cache sqlx pq; redis_rate fails on
# Redis 7.0 on both sides; watermill-redisstream, about 3 minutes a round, is run when named)
# Environment: RUNS (default 10; 5 for watermill-redisstream); PQ_RACE (0: lib/pq without -race);
# COMPOSE_NET (service, the default, or host: where the docker-compose side's tests run);
# PROJECTS_DIR (checkouts, default /var/tmp/airlock-projects);
# AIRLOCK_MIRROR (a folder of <owner>+<name>/repo git mirrors to clone from, default
# /work/.mirror; else https://github.com is used). Each project is checked out at a pinned commit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# runs NAME: the number of timed rounds of NAME.
runs() {
  case $1 in
  watermill-redisstream) echo "${RUNS:-5}" ;;
  *) echo "${RUNS:-10}" ;;
  esac
}
# PQ_RACE=0 runs lib/pq's tests without -race: with it, its listener tests (100 ms to
# connect) time out on a loaded 2-CPU machine, in the floor as in airlock.
pq_race="-race "
[ "${PQ_RACE:-1}" != 0 ] || pq_race=""
compose_net=${COMPOSE_NET:-service}
case $compose_net in
service | host) ;;
*) echo "bench-projects.sh: COMPOSE_NET is service or host, not $compose_net" >&2; exit 2 ;;
esac
dir=${PROJECTS_DIR:-/var/tmp/airlock-projects}
mirror=${AIRLOCK_MIRROR:-/work/.mirror}
airlock=$root/bin/airlock
make build >/dev/null
./scripts/engine.sh

goroot=$(go env GOROOT)
gocache=$(go env GOCACHE)
gomodcache=$(go env GOMODCACHE)
runner_cache=$HOME/.cache/airlock-bench/go-build-1001
mkdir -p "$runner_cache" "$dir"
chmod 777 "$runner_cache"

# Images: Debian bookworm built locally (no registry is reachable here).
./scripts/debian-image.sh airlock-bench/debian-redis:bookworm-1 redis-server redis-tools make
./scripts/debian-image.sh airlock-bench/debian-redis-go:bookworm-1 redis-server redis-tools gcc libc6-dev make ca-certificates
./scripts/debian-image.sh airlock-bench/debian-pg-go:bookworm-1 postgresql bash gcc libc6-dev ca-certificates make
docker image inspect airlock-bench/postgres-official:bookworm-1 >/dev/null 2>&1 ||
  docker build -q -t airlock-bench/postgres-official:bookworm-1 examples/realprojects/postgres-image >/dev/null
docker image inspect airlock-bench/redis-official:bookworm-1 >/dev/null 2>&1 ||
  docker build -q -t airlock-bench/redis-official:bookworm-1 examples/realprojects/redis-image >/dev/null

# Projects with a docker-compose side (their CI brings their own compose file up).
declare -A composed=([watermill-redisstream]=1)
projects=("$@")
[ ${#projects[@]} -gt 0 ] || projects=(redislock cache sqlx pq)
compose=
for name in "${projects[@]}"; do
  [ -n "${composed[$name]:-}" ] || continue
  if ! command -v docker-compose >/dev/null 2>&1; then
    echo "bench-projects.sh: installing docker-compose (baseline only)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq docker-compose >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq docker-compose >/dev/null; } ||
      echo "bench-projects.sh: docker-compose unavailable; its column is left out" >&2
  fi
  compose=$(command -v docker-compose || true)
  break
done

# checkout NAME OWNER/REPO COMMIT: a clone at COMMIT in $dir/NAME, with the project's manifest.
checkout() {
  local name=$1 repo=$2 commit=$3 src
  src="$mirror/${repo/\//+}/repo"
  [ -d "$src" ] || src="https://github.com/$repo"
  if [ ! -d "$dir/$name/.git" ]; then
    git clone -q "$src" "$dir/$name"
  fi
  git -c safe.directory="*" -C "$dir/$name" -c advice.detachedHead=false checkout -q -f "$commit"
  git -c safe.directory="*" -C "$dir/$name" clean -qfdx
  cp "examples/realprojects/$name/sandbox.toml" "$dir/$name/sandbox.toml"
  (cd "$dir/$name" && go mod download)
}

gopath_env="/airlock/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# floor NAME: the project's one-container floor.
floor() {
  local p="$dir/$1"
  case $1 in
  pq)
    docker run --rm -v "$p:$p" -w "$p" -v "$p/testdata/postgres:/init:ro" -v "$p/testdata/ssl:/ssl:ro" \
      -v "$goroot:/airlock/go:ro" -v "$runner_cache:/home/runner/.cache/go-build" --shm-size 128m \
      --add-host postgres:127.0.0.1 --add-host postgres-invalid:127.0.0.1 \
      -e POSTGRES_USER=pqgo -e POSTGRES_PASSWORD=unused -e GOCACHE=/home/runner/.cache/go-build \
      -e PATH="/airlock/go/bin:/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --entrypoint sh airlock-bench/postgres-official:bookworm-1 -c '
        echo runner:x:1001:1001::/home/runner:/bin/sh >>/etc/passwd
        /init/entry.sh >/tmp/pg.log 2>&1 &
        until pg_isready -q -h 127.0.0.1 -U pqgo -d pqgo; do sleep 0.01; done
        exec setpriv --reuid=1001 --regid=1001 --clear-groups env HOME=/home/runner '"$(job pq)"
    ;;
  sqlx)
    docker run --rm -v "$p:$p" -w "$p" -v "$goroot:/airlock/go:ro" \
      -v "$gocache:/var/cache/airlock/go-build" -v "$gomodcache:/var/cache/airlock/go-mod" \
      -e GOCACHE=/var/cache/airlock/go-build -e GOMODCACHE=/var/cache/airlock/go-mod -e CGO_ENABLED=1 \
      -e SQLX_POSTGRES_DSN="postgres://postgres:@127.0.0.1/sqlxtest?sslmode=disable" -e SQLX_SQLITE_DSN=/tmp/sqlxtest.db \
      -e PATH="$gopath_env" airlock-bench/debian-pg-go:bookworm-1 sh -c '
        b=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
        su postgres -s /bin/sh -c "$b/initdb -D /tmp/pgdata -U postgres --auth=trust >/dev/null && $b/pg_ctl -D /tmp/pgdata -o \"-c listen_addresses=127.0.0.1 -k /tmp\" -l /tmp/pg.log start >/dev/null"
        until $b/pg_isready -q -h 127.0.0.1; do sleep 0.01; done
        $b/createdb -h 127.0.0.1 -U postgres sqlxtest
        '"$(job sqlx)"
    ;;
  watermill-redisstream)
    # Redis as the service's image runs it (redis-image/Dockerfile: no config file, protected
    # mode off, default save rules), its files in /tmp rather than the checkout.
    docker run --rm -v "$p:$p" -w "$p" -v "$goroot:/airlock/go:ro" \
      -v "$gocache:/var/cache/airlock/go-build" -v "$gomodcache:/var/cache/airlock/go-mod" \
      -e GOCACHE=/var/cache/airlock/go-build -e GOMODCACHE=/var/cache/airlock/go-mod -e CGO_ENABLED=1 \
      -e PATH="$gopath_env" airlock-bench/debian-redis-go:bookworm-1 sh -c '
        redis-server --protected-mode no --dir /tmp --daemonize yes >/dev/null
        until redis-cli ping 2>/dev/null | grep -q PONG; do sleep 0.01; done
        '"$(job "$1")"
    ;;
  redislock | cache | redis_rate)
    local image=airlock-bench/debian-redis:bookworm-1 cgo=0 cmd='go test -count=1 ./...'
    if [ "$1" != redislock ]; then
      image=airlock-bench/debian-redis-go:bookworm-1 cgo=1 cmd='go test -count=1 ./... && go test -count=1 ./... -short -race'
    fi
    docker run --rm -v "$p:$p" -w "$p" -v "$goroot:/airlock/go:ro" \
      -v "$gocache:/var/cache/airlock/go-build" -v "$gomodcache:/var/cache/airlock/go-mod" \
      -e GOCACHE=/var/cache/airlock/go-build -e GOMODCACHE=/var/cache/airlock/go-mod -e CGO_ENABLED=$cgo \
      -e PATH="$gopath_env" "$image" sh -c '
        redis-server --save "" --appendonly no --bind 127.0.0.1 --port 6379 --hz 100 --daemonize yes >/dev/null
        until redis-cli ping 2>/dev/null | grep -q PONG; do sleep 0.01; done
        '"$cmd"
    ;;
  esac
}

# compose_cmd NAME ARG...: docker-compose on NAME's own compose file with its override (the image).
compose_cmd() {
  local name=$1
  shift
  "$compose" -p "airlockbench${name//[^a-z0-9]/}" --ansi never -f "$dir/$name/docker-compose.yaml" \
    -f "$root/examples/realprojects/$name/docker-compose.override.yaml" "$@"
}

# composed NAME: NAME's CI with its own compose file: the file's services up (detached), then
# the CI's wait for the port and its test command in the floor's image with the same caches, in
# the service's network namespace (COMPOSE_NET=service) or on the host's (host: the runner's
# 127.0.0.1, the published port).
composed() {
  local p="$dir/$1" net=host
  compose_cmd "$1" up -d
  case $1 in
  watermill-redisstream)
    [ "$compose_net" = host ] || net="container:$(compose_cmd "$1" ps -q redis)"
    # make wait (ThreeDotsLabs/wait-for on localhost:6379) as a redis PING every 10 ms, as the floor's.
    docker run --rm --network "$net" -v "$p:$p" -w "$p" -v "$goroot:/airlock/go:ro" \
      -v "$gocache:/var/cache/airlock/go-build" -v "$gomodcache:/var/cache/airlock/go-mod" \
      -e GOCACHE=/var/cache/airlock/go-build -e GOMODCACHE=/var/cache/airlock/go-mod -e CGO_ENABLED=1 \
      -e PATH="$gopath_env" airlock-bench/debian-redis-go:bookworm-1 sh -c '
        until redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; do sleep 0.01; done
        '"$(job "$1")"
    ;;
  esac
}

# job NAME: the command airlock runs (the project's CI test command).
job() {
  case $1 in
  pq) echo "go test $pq_race-count=1 ./..." ;;
  redislock) echo 'go test -count=1 ./...' ;;
  sqlx) echo 'go test -v -race -count=1 ./...' ;;
  cache | redis_rate) echo 'go test -count=1 ./... && go test -count=1 ./... -short -race' ;;
  # The CI's steps after make up and make wait (make test_stress runs on pushes to main only,
  # for up to 45 minutes); -count=1 as the others' (the runs share one build and test cache).
  watermill-redisstream) echo 'GOFLAGS=-count=1 make test test_short test_race' ;;
  esac
}

declare -A repo=([pq]=lib/pq [redislock]=bsm/redislock [cache]=go-redis/cache [redis_rate]=go-redis/redis_rate [sqlx]=jmoiron/sqlx
  [watermill-redisstream]=ThreeDotsLabs/watermill-redisstream)
declare -A commit=([pq]=f4654a41a62bc974ea825de270c44f577721205e [redislock]=76760bd8b28471f9c2a71f27406b7e825c912b95 [cache]=6cf8788019b8e22bc03ca782c54474f595764a0c [redis_rate]=8eadf45ee4d9d7a53189c2a968ead40521a76322 [sqlx]=41dac167fdad5e3fd81d66cafba0951dc6823a30
  [watermill-redisstream]=b9bac80ec750a462d3eae991460e7f5f18c014db)

log=$(mktemp)
downs=()
cleanup() {
  rm -f "$log"
  local name
  for name in "${downs[@]}"; do compose_cmd "$name" down --timeout 10 >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# timed NAME SIDE: one run; prints "ms code failed-tests".
timed() {
  local out start end code
  out=$(mktemp)
  start=$(date +%s%N)
  case $2 in
  airlock) (cd "$dir/$1" && "$airlock" run -- sh -c "$(job "$1")") >"$out" 2>&1 && code=0 || code=$? ;;
  floor) floor "$1" >"$out" 2>&1 && code=0 || code=$? ;;
  compose) composed "$1" >"$out" 2>&1 && code=0 || code=$? ;;
  esac
  end=$(date +%s%N)
  [ "$2" != compose ] || compose_cmd "$1" down --timeout 10 >/dev/null 2>&1 || true
  local failed
  failed=$(grep -oE '^--- FAIL: [A-Za-z0-9_/]+' "$out" | awk '{print $3}' | sort -u | tr '\n' ' ' || true)
  [ "$code" = 0 ] || echo "--- $1 $2 exit $code: $failed" >>"$log"
  rm -f "$out"
  echo "$(((end - start) / 1000000)) $code $failed"
}

# median: the median of the numbers read (one or more a line).
median() { tr -s ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

echo "| project (CI test command) | airlock run (median) | one-container floor (median) | ratio | docker-compose, tests $([ "$compose_net" = host ] && echo "on the host's network" || echo "in the service's network namespace") (median; airlock / it) | failed runs of N: airlock / floor / compose |"
echo "|---|---|---|---|---|---|"
for name in "${projects[@]}"; do
  checkout "$name" "${repo[$name]}" "${commit[$name]}"
  if [ "$name" = pq ]; then chown -R 1001:1001 "$dir/$name"; fi # the CI's checkout belongs to its runner
  sides=(airlock floor)
  if [ -n "${composed[$name]:-}" ] && [ -n "$compose" ]; then
    sides+=(compose)
    downs+=("$name")
    compose_cmd "$name" down --timeout 10 >/dev/null 2>&1 || true # a run left by an interrupted bench
  fi
  n=$(runs "$name")
  for side in "${sides[@]}"; do timed "$name" "$side" >/dev/null; done
  : >"$log"
  declare -A times=() fails=()
  for side in "${sides[@]}"; do times[$side]="" fails[$side]=0; done
  for _ in $(seq "$n"); do
    for side in "${sides[@]}"; do
      read -r t code _ < <(timed "$name" "$side")
      times[$side]+="$t "
      [ "$code" = 0 ] || fails[$side]=$((fails[$side] + 1))
    done
  done
  am=$(median <<<"${times[airlock]}")
  fm=$(median <<<"${times[floor]}")
  ratio=$(awk -v a="$am" -v f="$fm" 'BEGIN {printf "%.2f", a / f}')
  cm="–" cf=""
  if [ -n "${times[compose]:-}" ]; then
    cm=$(median <<<"${times[compose]}")
    cm="$cm ms ($(awk -v a="$am" -v c="$cm" 'BEGIN {printf "%.2f", a / c}')×)"
    cf=" / ${fails[compose]}"
  fi
  echo "| ${repo[$name]} (\`$(job "$name")\`) | $am ms | $fm ms | ${ratio}× | $cm | ${fails[airlock]} / ${fails[floor]}$cf of $n |"
  for side in "${sides[@]}"; do echo "    $name $side: ${times[$side]}ms" >&2; done
  sed 's/^/    /' "$log" >&2
  unset times fails
done
