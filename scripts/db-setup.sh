#!/usr/bin/env bash
# scripts/db-setup.sh: prepares the machine's PostgreSQL and MariaDB for the guard's
# measurements: room for 300 connections (the poll-cost benchmark opens
# 200) and, on MariaDB, the METADATA_LOCK_INFO plugin (the guard ties a
# metadata-lock waiter to its holders only with a lock view). Idempotent;
# restarts PostgreSQL only when the setting changes.
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
	# The plugin ships with the server package; INSTALL SONAME persists it
	# in mysql.plugin, so it survives restarts.
	mdl=$(mariadb -h 127.0.0.1 -u root -N -e "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'")
	if [ "$mdl" -eq 0 ]; then
		mariadb -h 127.0.0.1 -u root -e "INSTALL SONAME 'metadata_lock_info'"
		echo "mariadb: METADATA_LOCK_INFO installed"
	else
		echo "mariadb: METADATA_LOCK_INFO present"
	fi
fi
