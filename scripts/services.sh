#!/usr/bin/env bash
# Make sure the real services the test suite talks to are up: PostgreSQL, Redis, MariaDB, a
# Java runtime for Spark, a C compiler for the native DuckDB extension and Chromium for the
# report. Where one is missing (a fresh machine) it is installed from Debian's packages and
# started; where it is there it is only checked. Runs as root, or as a user with sudo (used
# only for a step that needs root). Every step that fails stops the script with its reason.
#
# What it changes on a machine that lacks them (the README lists the same):
# - packages: postgresql postgresql-client redis-server mariadb-server mariadb-client
#   default-jre-headless gcc libc6-dev chromium fonts-dejavu-core;
# - PostgreSQL's pg_hba.conf: two lines at the top, marked "# airflow-doi tests", trusting
#   every local user over 127.0.0.1 and ::1 (the tests log in as postgres without a password),
#   then the cluster is reloaded (apt has started it before the lines were there);
# - MariaDB: where root cannot log in over TCP without a password (stock Debian: root logs in
#   only through the socket), a user airflow_doi_tests@127.0.0.1/localhost without a password
#   and with every privilege (the tests create and drop databases of their own), created
#   through the socket; AIRFLOW_DOI_TEST_MARIADB_DSN names it (exported when this script is
#   sourced, as scripts/test.sh does; printed otherwise);
# - a database test in PostgreSQL and in MariaDB.
#
# DSNs come from AIRFLOW_DOI_TEST_POSTGRES_DSN / AIRFLOW_DOI_TEST_REDIS_URL /
# AIRFLOW_DOI_TEST_MARIADB_DSN; only a server on this machine is ever installed or started.
set -euo pipefail

PG_HOST=${PGHOST_FOR_TESTS:-127.0.0.1}
PG_PORT=${PGPORT_FOR_TESTS:-5432}
REDIS_PORT=${REDIS_PORT_FOR_TESTS:-6379}
MYSQL_PORT=${MYSQL_PORT_FOR_TESTS:-3306}
# Where Debian keeps things (overridable for the script's own tests).
PG_CONF_DIR=${PG_CONF_DIR:-/etc/postgresql}
MARIADBD=${MARIADBD:-/usr/sbin/mariadbd}
MARIADB_TEST_USER=airflow_doi_tests

services_die() { echo "services: error: $*" >&2; exit 1; }

# A step that needs root: run by root itself, else through sudo.
as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    services_die "'$*' needs root: run scripts/services.sh as root, or install sudo"
  fi
}

apt_updated=0
apt_install() {
  echo "services: installing $* from Debian's packages"
  if [[ $apt_updated -eq 0 ]]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- PostgreSQL ---------------------------------------------------------------------------
pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" >/dev/null 2>&1; }
pg_trusts() {
  psql -w -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -tAc "select 1" >/dev/null 2>&1
}
if ! pg_ready || ! pg_trusts; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [[ -z $(ls "$PG_CONF_DIR" 2>/dev/null) ]]; then
    apt_install postgresql postgresql-client  # Debian's postinst creates and starts a cluster
  fi
  version=$(ls "$PG_CONF_DIR" | sort -V | tail -n 1)
  hba=$PG_CONF_DIR/$version/main/pg_hba.conf
  [[ -n $version ]] && as_root test -f "$hba" || services_die "no PostgreSQL cluster in $PG_CONF_DIR"
  edited=0
  if ! as_root grep -q "airflow-doi tests" "$hba"; then
    # Trust auth on loopback only, as on the project's CI machines.
    echo "services: trusting local connections over 127.0.0.1 and ::1 in $hba"
    as_root sed -i '1i # airflow-doi tests\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    edited=1
  fi
  if as_root pg_ctlcluster --skip-systemctl-redirect "$version" main status >/dev/null 2>&1; then
    if [[ $edited -eq 1 ]]; then
      echo "services: reloading PostgreSQL $version (it was started before $hba was edited)"
      as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
    fi
  else
    echo "services: starting PostgreSQL $version"
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  fi
  for _ in $(seq 1 30); do pg_ready && pg_trusts && break; sleep 1; done
  pg_trusts || services_die "PostgreSQL at $PG_HOST:$PG_PORT does not let postgres in without" \
    "a password: see $hba and the server's log"
fi
if ! psql -w -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres \
    -tAc "select 1 from pg_database where datname='test'" | grep -q 1; then
  psql -w -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -qc "create database test"
fi

# --- Redis --------------------------------------------------------------------------------
redis_up() {
  command -v redis-cli >/dev/null 2>&1 \
    && redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG
}
if ! redis_up; then
  if ! command -v redis-server >/dev/null 2>&1; then
    apt_install redis-server
  fi
  echo "services: starting Redis"
  mkdir -p /tmp/airflow-doi-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /tmp/airflow-doi-redis --logfile /tmp/airflow-doi-redis/redis.log
  for _ in $(seq 1 30); do redis_up && break; sleep 0.5; done
  redis_up || services_die "Redis did not start: see /tmp/airflow-doi-redis/redis.log"
fi

# --- MariaDB ------------------------------------------------------------------------------
mysql_up() { (exec 3<>"/dev/tcp/127.0.0.1/$MYSQL_PORT") 2>/dev/null; }
if ! mysql_up; then
  if [[ ! -x $MARIADBD ]]; then
    apt_install mariadb-server
  fi
  if ! mysql_up; then
    echo "services: starting MariaDB"
    as_root install -d -o mysql -g mysql /run/mysqld
    as_root start-stop-daemon --start --oknodo --background --exec "$MARIADBD" -- --user=mysql
    for _ in $(seq 1 30); do mysql_up && break; sleep 1; done
    mysql_up || services_die "MariaDB did not start on 127.0.0.1:$MYSQL_PORT"
  fi
fi
if ! command -v mariadb >/dev/null 2>&1; then
  # The tests install the generated MariaDB file with the client, as its header says to.
  apt_install mariadb-client
fi
if [[ -n ${AIRFLOW_DOI_TEST_MARIADB_DSN:-} ]]; then
  : # the tests' login is given: it is theirs to have set up
elif mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e "select 1" >/dev/null 2>&1; then
  mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e "create database if not exists test"
else
  # Stock Debian: root logs in only through the socket, as the system's root.
  echo "services: creating the MariaDB user $MARIADB_TEST_USER (127.0.0.1 and localhost, no" \
    "password, every privilege) and the database test, through the server's socket"
  as_root mariadb -e "
    CREATE USER IF NOT EXISTS '$MARIADB_TEST_USER'@'127.0.0.1';
    CREATE USER IF NOT EXISTS '$MARIADB_TEST_USER'@'localhost';
    GRANT ALL PRIVILEGES ON *.* TO '$MARIADB_TEST_USER'@'127.0.0.1';
    GRANT ALL PRIVILEGES ON *.* TO '$MARIADB_TEST_USER'@'localhost';
    CREATE DATABASE IF NOT EXISTS test;"
  export AIRFLOW_DOI_TEST_MARIADB_DSN="mysql://$MARIADB_TEST_USER@127.0.0.1:$MYSQL_PORT/test"
  echo "services: the tests reach MariaDB as AIRFLOW_DOI_TEST_MARIADB_DSN=$AIRFLOW_DOI_TEST_MARIADB_DSN"
fi

# --- Java (Spark runs the generated Spark SQL for real) ------------------------------------
if ! command -v java >/dev/null 2>&1; then
  apt_install default-jre-headless
fi
# --- A C compiler (the native DuckDB extension is built from source) ------------------------
if ! command -v cc >/dev/null 2>&1 && [[ -z ${CC:-} ]]; then
  apt_install gcc libc6-dev
fi
# --- Chromium (the HTML quality report is checked in a real browser) -------------------------
if ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium fonts-dejavu-core
fi
echo "services: PostgreSQL, MariaDB, Redis, Java, a C compiler and Chromium ready"
