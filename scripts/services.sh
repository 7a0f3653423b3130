#!/usr/bin/env bash
# Make sure the real services the test suite talks to are up: PostgreSQL, Redis, a Java
# runtime for Spark, a C compiler for the native DuckDB extension, Chromium for the report,
# and MariaDB. Where one is missing (a fresh machine) it is installed from Debian's packages
# and started. DSNs come from AIRFLOW_DOI_TEST_POSTGRES_DSN / AIRFLOW_DOI_TEST_REDIS_URL /
# AIRFLOW_DOI_TEST_MARIADB_DSN; only a server on this machine is ever installed or started.
set -euo pipefail

PG_HOST=${PGHOST_FOR_TESTS:-127.0.0.1}
PG_PORT=${PGPORT_FOR_TESTS:-5432}
REDIS_PORT=${REDIS_PORT_FOR_TESTS:-6379}

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
apt_updated=0
apt_install() {
  if [[ $apt_updated -eq 0 ]]; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- PostgreSQL ---------------------------------------------------------------------------
if ! pg_isready -q -h "$PG_HOST" -p "$PG_PORT" 2>/dev/null; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [[ -z $(ls /etc/postgresql 2>/dev/null) ]]; then
    echo "services: installing PostgreSQL from Debian's packages"
    apt_install postgresql postgresql-client
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  if ! $SUDO grep -q "airflow-doi tests" "$hba"; then
    # Trust auth on loopback only, as on the project's CI machines.
    $SUDO sed -i '1i # airflow-doi tests\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  echo "services: starting PostgreSQL $version"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h "$PG_HOST" -p "$PG_PORT" && break; sleep 1; done
fi
if ! psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -tAc "select 1 from pg_database where datname='test'" | grep -q 1; then
  psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -qc "create database test"
fi

# --- Redis --------------------------------------------------------------------------------
if ! (command -v redis-cli >/dev/null 2>&1 && redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG); then
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "services: installing Redis from Debian's packages"
    apt_install redis-server
  fi
  echo "services: starting Redis"
  mkdir -p /tmp/airflow-doi-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /tmp/airflow-doi-redis --logfile /tmp/airflow-doi-redis/redis.log
  for _ in $(seq 1 30); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.5; done
fi

# --- MariaDB ------------------------------------------------------------------------------
MYSQL_PORT=${MYSQL_PORT_FOR_TESTS:-3306}
mysql_up() { (exec 3<>"/dev/tcp/127.0.0.1/$MYSQL_PORT") 2>/dev/null; }
if ! mysql_up; then
  if [[ ! -x /usr/sbin/mariadbd ]]; then
    echo "services: installing MariaDB from Debian's packages"
    apt_install mariadb-server
  fi
  echo "services: starting MariaDB"
  $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  for _ in $(seq 1 30); do mysql_up && break; sleep 1; done
fi
if ! command -v mariadb >/dev/null 2>&1; then
  # The tests install the generated MariaDB file with the client, as its header says to.
  echo "services: installing the MariaDB client from Debian's packages"
  apt_install mariadb-client
fi
if command -v mariadb >/dev/null 2>&1; then
  mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e "create database if not exists test" || true
fi

# --- Java (Spark runs the generated Spark SQL for real) ------------------------------------
if ! command -v java >/dev/null 2>&1; then
  echo "services: installing a Java runtime from Debian's packages"
  apt_install default-jre-headless
fi
# --- A C compiler (the native DuckDB extension is built from source) ------------------------
if ! command -v cc >/dev/null 2>&1 && [[ -z ${CC:-} ]]; then
  echo "services: installing a C compiler from Debian's packages"
  apt_install gcc libc6-dev
fi
# --- Chromium (the HTML quality report is checked in a real browser) -------------------------
if ! command -v chromium >/dev/null 2>&1; then
  echo "services: installing Chromium from Debian's packages"
  apt_install chromium fonts-dejavu-core
fi
echo "services: PostgreSQL, MariaDB, Redis, Java, a C compiler and Chromium ready"
