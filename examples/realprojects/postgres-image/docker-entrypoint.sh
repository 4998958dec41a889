#!/usr/bin/env bash
# A stand-in for the official postgres image's entrypoint, on Debian's PostgreSQL
# (no registry is reachable where airlock's benches run): the conventions real
# projects' compose files rely on. As root it prepares PGDATA and re-runs itself
# as postgres; on an empty PGDATA it runs initdb with POSTGRES_USER (default
# postgres) and POSTGRES_PASSWORD, creates POSTGRES_DB (default: the user), runs
# /docker-entrypoint-initdb.d/* in name order (*.sh executed when executable,
# else sourced; *.sql through psql) against a server on its socket only, then
# starts postgres listening on every address with the arguments given.
set -Eeo pipefail

export PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PATH=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1):$PATH
POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
export POSTGRES_USER POSTGRES_DB

if [ "$1" = postgres ]; then shift; fi

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" postgres "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-postgres}" >"$pwfile"
	initdb --username="$POSTGRES_USER" --pwfile="$pwfile" -D "$PGDATA" >/dev/null
	rm -f "$pwfile"
	auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
	[ -n "${POSTGRES_PASSWORD:-}" ] || auth=trust
	printf 'host all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
	psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" -h /var/run/postgresql)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
		*.sql) "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" >/dev/null ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	echo "PostgreSQL init process complete; ready for start up."
fi

exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
