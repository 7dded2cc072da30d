#!/usr/bin/env bash
# What `make test` needs beyond Node.js and npm, on Debian: the packages below, installed when
# their command is missing, and the local PostgreSQL cluster, started when it does not answer.
# Runs as root, or through sudo. One list: a new tool is one line "command package".
set -euo pipefail

# command        Debian package   why
PACKAGES='
redis-server     redis-server     private Redis servers (rate-limit store tests)
haproxy          haproxy          the balancer of the scale and rolling-upgrade tests
promtool         prometheus       the alert rules in deploy/prometheus
prometheus-postgres-exporter prometheus-postgres-exporter  the metrics of the backup alerts (test/drills/runbook.test.ts)
curl             curl             the README walk
ps               procps           the pretty-log test
git              git              releases built from their commit (rolling upgrade)
pgbackrest       pgbackrest       the restore drill (backups and point-in-time restore)
patroni          patroni          the failover drill (Patroni manages the PostgreSQL nodes)
etcd             etcd-server      the failover drill (the leader key of Patroni)
patch            patch            the failover drill (the upstream fix applied to Patroni 3.0.2)
chromium         chromium         the analytics page test (headless, driven by puppeteer-core)
'

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "install-test-deps: run as root (or install sudo) to run: $*" >&2; exit 1
  fi
}

missing=()
while read -r command package _; do
  [ -n "$command" ] || continue
  command -v "$command" >/dev/null || missing+=("$package")
done <<< "$PACKAGES"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-test-deps: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tests' PostgreSQL (TEST_DATABASE_URL's default): the local cluster, never stopped by them.
if [ -z "${TEST_DATABASE_URL:-}" ] && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
  cluster=$(ls /etc/postgresql | head -1)
  echo "install-test-deps: starting PostgreSQL $cluster/main"
  as_root pg_ctlcluster --skip-systemctl-redirect "$cluster" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  pg_isready -h 127.0.0.1 -p 5432 -q || { echo "install-test-deps: PostgreSQL did not start" >&2; exit 1; }
fi
