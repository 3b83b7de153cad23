#!/bin/sh
# install-db-tools.sh installs the database suites' clients: pgbench
# (postgresql-client / postgresql-contrib), sysbench and pt-kill
# (percona-toolkit). Idempotent: it installs only what is missing.
set -eu
missing=""
command -v pgbench >/dev/null 2>&1 || missing="$missing postgresql-contrib"
command -v sysbench >/dev/null 2>&1 || missing="$missing sysbench"
command -v pt-kill >/dev/null 2>&1 || missing="$missing percona-toolkit"
if [ -z "$missing" ]; then
	echo "install-db-tools: pgbench, sysbench and pt-kill are present"
	exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update
# shellcheck disable=SC2086 # the list splits on purpose
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
