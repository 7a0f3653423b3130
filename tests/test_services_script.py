"""scripts/services.sh decides right on a stock Debian, as root and as a user with sudo, and
on a machine whose services are already there (CI's), without hiding a failed step.

The system commands it calls (apt-get, pg_ctlcluster, psql, the MariaDB client, sudo, id...)
are stand-ins that keep the state of the machine in files and log every call, so the script's
own decisions run for real in bash: which packages it installs, that PostgreSQL started by
apt is reloaded after pg_hba.conf is edited, that MariaDB's test login is made through the
socket when root cannot log in over TCP, that every root step goes through sudo for a user and
never for root. The real services of this machine are checked by the suite's own fixtures
(and scripts/test.sh runs this script before them).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: Real programs the script uses that are no system change (linked into the stand-ins' PATH).
TOOLS = ("bash", "sed", "grep", "ls", "sort", "tail", "seq", "sleep", "mkdir", "cat", "env",
         "cp", "rm", "touch", "head", "test", "python3", "chmod", "dirname", "tr", "wc")

#: The stand-ins: a shell body each. $STATE is the machine's state, $LOG the calls made.
STUBS: dict[str, str] = {
    "id": 'echo "${FAKE_UID:-0}"',
    "sudo": 'echo "sudo $*" >> "$LOG"; FAKE_UID=0 exec "$@"',
    "apt-get": r'''
echo "apt-get $*" >> "$LOG"
[[ ${FAKE_UID:-0} -eq 0 ]] || { echo "E: are you root?" >&2; exit 100; }
[[ $1 == update ]] && exit 0
for package in "$@"; do
  case $package in
    postgresql)  # Debian's postinst creates a cluster and starts it, before any edit
      mkdir -p "$PG_CONF_DIR/15/main"
      echo "host all all 127.0.0.1/32 scram-sha-256" > "$PG_CONF_DIR/15/main/pg_hba.conf"
      cp "$LATER"/pg_ctlcluster "$LATER"/pg_isready "$LATER"/psql "$BIN"/
      touch "$STATE/pg_running"; cp "$PG_CONF_DIR/15/main/pg_hba.conf" "$STATE/pg_loaded";;
    redis-server) cp "$LATER"/redis-server "$LATER"/redis-cli "$BIN"/;;
    mariadb-server) cp "$LATER"/mariadbd "$LATER"/mariadb "$BIN"/;;
    mariadb-client) cp "$LATER"/mariadb "$BIN"/;;
    default-jre-headless) cp "$LATER"/java "$BIN"/;;
    gcc) cp "$LATER"/cc "$BIN"/;;
    chromium) cp "$LATER"/chromium "$BIN"/;;
  esac
done''',
    "install": 'echo "install $*" >> "$LOG"',
    "start-stop-daemon": r'''
echo "start-stop-daemon $*" >> "$LOG"
[[ ${FAKE_UID:-0} -eq 0 ]] || exit 4
python3 -c "import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $MYSQL_PORT_FOR_TESTS)); s.listen(); time.sleep(120)" \
  < /dev/null > /dev/null 2>&1 &
echo $! > "$STATE/mariadb.pid"; sleep 0.5''',
}
#: Stand-ins a package brings (copied into PATH by apt-get install).
LATER: dict[str, str] = {
    "pg_isready": '[[ -f "$STATE/pg_running" ]]',
    "psql": r'''
echo "psql $*" >> "$LOG"
[[ -f "$STATE/pg_running" ]] && grep -q "airflow-doi tests" "$STATE/pg_loaded" || exit 2
case "$*" in
  *"datname='test'"*) [[ -f "$STATE/pg_db_test" ]] && echo 1; exit 0;;
  *"create database test"*) touch "$STATE/pg_db_test";;
esac''',
    "pg_ctlcluster": r'''
echo "pg_ctlcluster $*" >> "$LOG"
[[ ${FAKE_UID:-0} -eq 0 ]] || exit 1
hba="$PG_CONF_DIR/$2/main/pg_hba.conf"
case $4 in
  status) [[ -f "$STATE/pg_running" ]] || exit 3;;
  start) touch "$STATE/pg_running"; cp "$hba" "$STATE/pg_loaded";;
  reload) [[ -f "$STATE/pg_fail_reload" ]] && { echo "reload failed" >&2; exit 1; }
          [[ -f "$STATE/pg_running" ]] || exit 1; cp "$hba" "$STATE/pg_loaded";;
esac''',
    "redis-cli": '[[ -f "$STATE/redis" ]] && echo PONG',
    "redis-server": 'echo "redis-server $*" >> "$LOG"; touch "$STATE/redis"',
    "mariadbd": "exit 0",
    "mariadb": r'''
echo "mariadb $(printf '%s' "$*" | tr -s '\n ' '  ') [uid ${FAKE_UID:-0}]" >> "$LOG"
if [[ " $* " == *" -h "* ]]; then  # over TCP
  [[ -f "$STATE/mariadb_root_tcp" ]] || { echo "ERROR 1698 (28000): Access denied" >&2; exit 1; }
else  # through the socket: only the system's root is let in
  [[ ${FAKE_UID:-0} -eq 0 ]] || { echo "ERROR 1698 (28000): Access denied" >&2; exit 1; }
fi''',
    "java": "exit 0",
    "cc": "exit 0",
    "chromium": "exit 0",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Machine:
    """A machine for the script: stand-ins on PATH, state in files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin, self.later, self.state = root / "bin", root / "later", root / "state"
        self.pg_conf = root / "etc-postgresql"
        for folder in (self.bin, self.later, self.state, self.pg_conf):
            folder.mkdir()
        self.log = root / "calls.log"
        self.log.touch()
        self.mysql_port = _free_port()
        for name in TOOLS:
            found = sys.executable if name == "python3" else shutil.which(name)
            assert found, name
            (self.bin / name).symlink_to(os.path.realpath(found))
        for folder, stubs in ((self.bin, STUBS), (self.later, LATER)):
            for name, body in stubs.items():
                (folder / name).write_text("#!/usr/bin/env bash\n" + body + "\n")
                (folder / name).chmod(0o755)

    def has(self, *names: str) -> None:
        """The packages that bring ``names`` are installed already."""
        for name in names:
            shutil.copy(self.later / name, self.bin / name)

    def run(self, uid: int = 0, sudo: bool = False) -> subprocess.CompletedProcess[str]:
        if not sudo:
            (self.bin / "sudo").unlink()
        env = {"PATH": str(self.bin), "STATE": str(self.state), "LOG": str(self.log),
               "BIN": str(self.bin), "LATER": str(self.later), "PG_CONF_DIR": str(self.pg_conf),
               "MARIADBD": str(self.bin / "mariadbd"), "FAKE_UID": str(uid),
               "MYSQL_PORT_FOR_TESTS": str(self.mysql_port), "HOME": str(self.root)}
        return subprocess.run(["bash", str(ROOT / "scripts" / "services.sh")], env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()

    def stop(self) -> None:
        pid = self.state / "mariadb.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture()
def machine(tmp_path: Path) -> Machine:
    made = Machine(tmp_path)
    yield made
    made.stop()


@pytest.mark.parametrize("uid", [0, 1000], ids=["root", "user-with-sudo"])
def test_a_stock_debian_gets_every_service(machine: Machine, uid: int) -> None:
    done = machine.run(uid=uid, sudo=uid != 0)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = machine.calls()
    # One apt-get update, then each package only because it was missing.
    assert [c for c in calls if c.startswith("apt-get update")] == ["apt-get update -qq"]
    installed = " ".join(c for c in calls if c.startswith("apt-get install"))
    for package in ("postgresql", "postgresql-client", "redis-server", "mariadb-server",
                    "default-jre-headless", "gcc", "libc6-dev", "chromium", "fonts-dejavu-core"):
        assert f" {package}" in installed, installed
    # apt started PostgreSQL before pg_hba.conf had our lines: reloaded after the edit.
    hba = (machine.pg_conf / "15" / "main" / "pg_hba.conf").read_text().splitlines()
    assert hba[:3] == ["# airflow-doi tests", "host all all 127.0.0.1/32 trust",
                       "host all all ::1/128 trust"]
    assert "pg_ctlcluster --skip-systemctl-redirect 15 main reload" in calls
    assert "pg_ctlcluster --skip-systemctl-redirect 15 main start" not in calls
    assert (machine.state / "pg_db_test").exists()
    # MariaDB's root logs in only through the socket: the test login is made there.
    socket_calls = [c for c in calls if c.startswith("mariadb -e")]
    assert len(socket_calls) == 1 and "[uid 0]" in socket_calls[0]
    assert "CREATE USER IF NOT EXISTS 'airflow_doi_tests'@'127.0.0.1'" in socket_calls[0]
    assert "CREATE DATABASE IF NOT EXISTS test" in socket_calls[0]
    assert ("services: the tests reach MariaDB as AIRFLOW_DOI_TEST_MARIADB_DSN=mysql://"
            f"airflow_doi_tests@127.0.0.1:{machine.mysql_port}/test") in done.stdout
    # Root steps through sudo for a user, never for root; the rest never through it.
    through_sudo = [c for c in calls if c.startswith("sudo ")]
    if uid:
        for step in ("apt-get install", "sed -i", "pg_ctlcluster", "start-stop-daemon",
                     "mariadb -e"):
            assert any(step in c for c in through_sudo), (step, through_sudo)
        assert not any(c.startswith("sudo psql") for c in calls)
    else:
        assert through_sudo == []
    assert done.stdout.splitlines()[-1] == ("services: PostgreSQL, MariaDB, Redis, Java, a C "
                                            "compiler and Chromium ready")


def test_a_user_without_sudo_is_told_what_to_do(machine: Machine) -> None:
    done = machine.run(uid=1000, sudo=False)
    assert done.returncode == 1
    assert done.stderr.strip().endswith("needs root: run scripts/services.sh as root, or "
                                        "install sudo")


def test_a_machine_with_its_services_ready_is_left_alone(machine: Machine) -> None:
    """CI's machines: every service up and set (PostgreSQL trusting loopback, MariaDB's root
    over TCP without a password): nothing installed, edited or started, no root needed."""
    machine.has("pg_isready", "psql", "pg_ctlcluster", "redis-cli", "redis-server", "mariadbd",
                "mariadb", "java", "cc", "chromium")
    (machine.pg_conf / "15" / "main").mkdir(parents=True)
    hba = machine.pg_conf / "15" / "main" / "pg_hba.conf"
    hba.write_text("# airflow-doi tests\nhost all all 127.0.0.1/32 trust\n")
    for flag in ("pg_running", "pg_db_test", "redis", "mariadb_root_tcp"):
        (machine.state / flag).touch()
    shutil.copy(hba, machine.state / "pg_loaded")
    with socket.socket() as mariadb:  # MariaDB listening
        mariadb.bind(("127.0.0.1", machine.mysql_port))
        mariadb.listen()
        done = machine.run(uid=1000, sudo=False)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = machine.calls()
    assert not [c for c in calls if c.startswith(("apt-get", "sudo", "pg_ctlcluster",
                                                  "start-stop-daemon", "redis-server"))], calls
    assert [c for c in calls if c.startswith("mariadb")] == [
        f"mariadb -h 127.0.0.1 -P {machine.mysql_port} -u root -e select 1 [uid 1000]",
        f"mariadb -h 127.0.0.1 -P {machine.mysql_port} -u root -e create database if not "
        "exists test [uid 1000]"]
    assert done.stdout.splitlines() == ["services: PostgreSQL, MariaDB, Redis, Java, a C "
                                        "compiler and Chromium ready"]


def test_a_failed_step_stops_the_script_with_its_reason(machine: Machine) -> None:
    (machine.state / "pg_fail_reload").touch()
    done = machine.run(uid=0)
    assert done.returncode != 0
    assert "reload failed" in done.stderr
    assert not [c for c in machine.calls() if "redis" in c or "mariadb" in c]  # stopped there


def test_the_script_hides_no_failure() -> None:
    text = (ROOT / "scripts" / "services.sh").read_text()
    assert "|| true" not in text and "|| :" not in text
