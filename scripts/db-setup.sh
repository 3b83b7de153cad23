#!/usr/bin/env bash
# scripts/db-setup.sh: prepares the machine's PostgreSQL and MariaDB for the guard's
# measurements: room for 300 connections (the poll-cost benchmark opens
# 200). Idempotent; restarts the server only when the setting changes.
# Needs the postgres superuser over loopback (trust), as on the CI machine.
set -euo pipefail

PSQL=(psql -h 127.0.0.1 -U postgres -d postgres -Atq)
want=300
have=$("${PSQL[@]}" -c 'SHOW max_connections')
if [ "$have" -lt "$want" ]; then
	"${PSQL[@]}" -c "ALTER SYSTEM SET max_connections = $want"
	for v in $(ls /etc/postgresql); do
		pg_ctlcluster --skip-systemctl-redirect "$v" main restart
	done
	echo "postgresql: max_connections $have -> $want"
else
	echo "postgresql: max_connections $have (>= $want)"
fi

# MariaDB: the same room, at run time (no restart; lost at the next one).
if command -v mariadb >/dev/null 2>&1; then
	mhave=$(mariadb -h 127.0.0.1 -u root -N -e 'SELECT @@max_connections')
	if [ "$mhave" -lt "$want" ]; then
		mariadb -h 127.0.0.1 -u root -e "SET GLOBAL max_connections = $want"
		echo "mariadb: max_connections $mhave -> $want"
	else
		echo "mariadb: max_connections $mhave (>= $want)"
	fi
fi
