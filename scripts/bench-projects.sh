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
# Usage: scripts/bench-projects.sh [PROJECT...]   (default: redislock cache sqlx pq; redis_rate fails on Redis 7.0 on both sides)
# Environment: RUNS (default 10); PQ_RACE (0: lib/pq without -race); PROJECTS_DIR (checkouts, default /var/tmp/airlock-projects);
# AIRLOCK_MIRROR (a folder of <owner>+<name>/repo git mirrors to clone from, default
# /work/.mirror; else https://github.com is used). Each project is checked out at a pinned commit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-10}
# PQ_RACE=0 runs lib/pq's tests without -race: with it, its listener tests (100 ms to
# connect) time out on a loaded 2-CPU machine, in the floor as in airlock.
pq_race="-race "
[ "${PQ_RACE:-1}" != 0 ] || pq_race=""
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

# job NAME: the command airlock runs (the project's CI test command).
job() {
  case $1 in
  pq) echo "go test $pq_race-count=1 ./..." ;;
  redislock) echo 'go test -count=1 ./...' ;;
  sqlx) echo 'go test -v -race -count=1 ./...' ;;
  cache | redis_rate) echo 'go test -count=1 ./... && go test -count=1 ./... -short -race' ;;
  esac
}

declare -A repo=([pq]=lib/pq [redislock]=bsm/redislock [cache]=go-redis/cache [redis_rate]=go-redis/redis_rate [sqlx]=jmoiron/sqlx)
declare -A commit=([pq]=f4654a41a62bc974ea825de270c44f577721205e [redislock]=76760bd8b28471f9c2a71f27406b7e825c912b95 [cache]=6cf8788019b8e22bc03ca782c54474f595764a0c [redis_rate]=8eadf45ee4d9d7a53189c2a968ead40521a76322 [sqlx]=41dac167fdad5e3fd81d66cafba0951dc6823a30)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# timed NAME SIDE: one run; prints "ms code failed-tests".
timed() {
  local out start end code
  out=$(mktemp)
  start=$(date +%s%N)
  if [ "$2" = airlock ]; then
    (cd "$dir/$1" && "$airlock" run -- sh -c "$(job "$1")") >"$out" 2>&1 && code=0 || code=$?
  else
    floor "$1" >"$out" 2>&1 && code=0 || code=$?
  fi
  end=$(date +%s%N)
  local failed
  failed=$(grep -oE '^--- FAIL: [A-Za-z0-9_/]+' "$out" | awk '{print $3}' | sort -u | tr '\n' ' ' || true)
  [ "$code" = 0 ] || echo "--- $1 $2 exit $code: $failed" >>"$log"
  rm -f "$out"
  echo "$(((end - start) / 1000000)) $code $failed"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

projects=("$@")
[ ${#projects[@]} -gt 0 ] || projects=(redislock cache sqlx pq)
echo "| project (CI test command) | airlock run (median of $runs) | one-container floor (median) | ratio | failed runs: airlock / floor |"
echo "|---|---|---|---|---|"
for name in "${projects[@]}"; do
  checkout "$name" "${repo[$name]}" "${commit[$name]}"
  if [ "$name" = pq ]; then chown -R 1001:1001 "$dir/$name"; fi # the CI's checkout belongs to its runner
  timed "$name" airlock >/dev/null
  timed "$name" floor >/dev/null
  : >"$log"
  a=() f=() af=0 ff=0
  for _ in $(seq "$runs"); do
    read -r ms code _ < <(timed "$name" airlock)
    a+=("$ms")
    [ "$code" = 0 ] || af=$((af + 1))
    read -r ms code _ < <(timed "$name" floor)
    f+=("$ms")
    [ "$code" = 0 ] || ff=$((ff + 1))
  done
  am=$(printf '%s\n' "${a[@]}" | median)
  fm=$(printf '%s\n' "${f[@]}" | median)
  ratio=$(awk -v a="$am" -v f="$fm" 'BEGIN {printf "%.2f", a / f}')
  echo "| ${repo[$name]} (\`$(job "$name")\`) | $am ms | $fm ms | ${ratio}× | $af / $ff |"
  sed 's/^/    /' "$log" >&2
done
