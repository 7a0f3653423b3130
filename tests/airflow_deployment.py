"""A real Airflow deployment for system tests: api-server, scheduler and dag-processor.

:class:`Deployment` runs the three components as separate processes, as teams run them: the
LocalExecutor (``[core] parallelism`` 4), a fresh PostgreSQL metadata database of its own
(``airflow_sys_<random>``, created on the server of ``AIRFLOW_DOI_TEST_POSTGRES_DSN`` and
dropped afterwards), the api-server on a free loopback port serving both the REST API and the
execution API the task processes talk to, a random JWT secret, the simple auth manager with
every user an admin, and ``examples/dags`` as the DAGs folder.

Connections are made through the REST API at run time (:meth:`Deployment.set_connection`), so
one deployment serves several tests; environment variables (``AIRFLOW_CONN_*`` among them)
can also be given at start. Task processes are forked by the LocalExecutor's supervisor; their
OS process id is in the task instance (:meth:`Deployment.task_pid`, checked against the
process title ``airflow worker -- <ti id>`` in ``/proc``), so a test can SIGKILL one.

Use it as a context manager::

    with Deployment(tmp_path, admin_dsn=POSTGRES_DSN) as airflow:
        run_id = airflow.trigger("doi_resolve_mapped", {"batch_size": 100})
        assert airflow.wait("doi_resolve_mapped", run_id, timeout=120) == "success"

The component logs are files under ``<root>/logs``; :meth:`Deployment.log_tails` gives the last
lines of each, printed when starting fails, when the ``with`` block raises, and (from the
test module's fixture) when a test fails.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse, urlunparse

import httpx

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAGS = ROOT / "examples" / "dags"
EXAMPLE_DAGS = ("doi_resolve_mapped", "doi_enrich_catalogue")
COMPONENTS = ("api-server", "scheduler", "dag-processor")
#: Run and task states after which nothing more happens to them.
RUN_DONE = frozenset({"success", "failed"})
TASK_DONE = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})

#: What makes a small deployment pick up work fast without burning the test machine's CPU
#: while it waits. Measured on 2 cores, an idle deployment (no run) over 60 s: with the
#: scheduler's idle sleep at 0.1 s and DAG files re-parsed every 10 s, the scheduler took
#: 12.7 s of CPU and the dag-processor 5.6 s (30% of a core, the whole time a test waits on a
#: run); with 0.5 s and a re-parse every 2 minutes, 3.1 s and 0.7 s. A hand-off waits at most
#: 0.5 s longer. The DAG files never change while a deployment runs: they are parsed at start.
FAST_SETTINGS = {
    # The DAG files are parsed at start; nothing in the tests edits them afterwards.
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "60",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
    "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
    "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
    # The scheduler loop sleeps 1 s when idle by default: every task hand-off waits on it.
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
    "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    "AIRFLOW__SCHEDULER__PARSING_CLEANUP_INTERVAL": "300",
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "300",
    "AIRFLOW__SCHEDULER__POOL_METRICS_INTERVAL": "60",
}


@dataclass(frozen=True)
class TaskInstance:
    """One row of ``GET .../taskInstances``, the fields the tests read."""

    task_id: str
    map_index: int
    state: str | None
    try_number: int
    pid: int | None
    hostname: str | None
    id: str
    start_date: str | None
    end_date: str | None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _with_database(dsn: str, database: str, *, driver: str | None = None) -> str:
    url = urlparse(dsn)
    scheme = f"postgresql+{driver}" if driver else url.scheme
    return urlunparse(url._replace(scheme=scheme, path="/" + quote(database)))


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        return f"({error})"
    return "\n".join(line if len(line) <= 600 else line[:600] + " [...]"
                     for line in text.splitlines()[-lines:])


class DeploymentError(RuntimeError):
    """Starting or talking to the deployment failed; the message holds the log tails."""


class Deployment:
    """api-server + scheduler + dag-processor on a fresh PostgreSQL metadata database.

    :param root: an empty directory: ``AIRFLOW_HOME`` and the component logs go there.
    :param admin_dsn: a PostgreSQL DSN whose user may create databases (its database is only
        used to connect; the metadata database is created beside it).
    :param env: extra environment variables for every component (and so for the task
        processes): ``AIRFLOW_CONN_*`` and the ``AIRFLOW_DOI_EXAMPLE_*`` settings.
    :param dag_ids: DAGs that must be parsed (and are unpaused) before :meth:`start` returns.
    """

    def __init__(self, root: Path, *, admin_dsn: str, env: Mapping[str, str] | None = None,
                 dags_folder: Path = DAGS, dag_ids: Iterable[str] = EXAMPLE_DAGS,
                 parallelism: int = 4) -> None:
        self.root = Path(root)
        self.home = self.root / "airflow_home"
        self.log_dir = self.root / "logs"
        self.admin_dsn = admin_dsn
        self.database = f"airflow_sys_{secrets.token_hex(5)}"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.dags_folder = dags_folder
        self.dag_ids = tuple(dag_ids)
        self.parallelism = parallelism
        self.extra_env = dict(env or {})
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.client: httpx.Client | None = None
        self._database_created = False
        from cryptography.fernet import Fernet

        self._fernet_key = Fernet.generate_key().decode()
        self._secret = secrets.token_hex(16)
        self._jwt_secret = secrets.token_urlsafe(32)
        #: Seconds each start phase took (migrate, healthy, parsed).
        self.timings: dict[str, float] = {}

    # -- life cycle ---------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """The environment of every component: the caller's minus any Airflow settings."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_",
                                    "AIRFLOW_DOI_EXAMPLE_"))
               and k not in ("AIRFLOW_HOME", "AIRFLOW_CONFIG")}
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": _with_database(
                self.admin_dsn, self.database, driver="psycopg2"),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__FERNET_KEY": self._fernet_key,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__SECRET_KEY": self._secret,
            "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
            **FAST_SETTINGS,
        })
        env.update(self.extra_env)
        return env

    def __enter__(self) -> Deployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is not None:
            print(self.log_tails(), file=sys.stderr)
        self.stop()

    def start(self, timeout: float = 180.0) -> Deployment:
        """Create and migrate the metadata database, start the components, wait until the
        api-server is healthy, the scheduler and dag-processor have heartbeated and
        :attr:`dag_ids` are parsed (then unpause them)."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = self.environment()
        clock = time.monotonic()
        self._create_database()
        migrate = subprocess.run([AIRFLOW, "db", "migrate"], env=env, cwd=self.home,
                                 capture_output=True, text=True, timeout=300, check=False)
        (self.log_dir / "db-migrate.log").write_text(migrate.stdout + migrate.stderr,
                                                     encoding="utf-8")
        if migrate.returncode != 0:
            raise DeploymentError("airflow db migrate failed:\n"
                                  + (migrate.stdout + migrate.stderr)[-4000:])
        self.timings["migrate"] = time.monotonic() - clock
        for component in COMPONENTS:
            command = [AIRFLOW, component]
            if component == "api-server":
                command += ["--host", "127.0.0.1", "--port", str(self.port)]
            with (self.log_dir / f"{component}.log").open("wb") as log:
                self.processes[component] = subprocess.Popen(
                    command, env=env, cwd=self.home, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                    preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        self._wait_healthy(deadline)
        self.timings["healthy"] = time.monotonic() - clock
        self._wait_parsed(deadline)
        self.timings["parsed"] = time.monotonic() - clock
        for dag_id in self.dag_ids:
            self.unpause(dag_id)
        return self

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise DeploymentError(f"{name} exited with {process.returncode}\n"
                                      + self.log_tails())

    def _wait_healthy(self, deadline: float) -> None:
        last: object = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                response = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
                last = response.text
                health = response.json()
                if response.status_code == 200 and all(
                    (health.get(part) or {}).get("status") == "healthy"
                    for part in ("metadatabase", "scheduler", "dag_processor")
                ):
                    break
            except (httpx.HTTPError, ValueError) as error:
                last = error
            time.sleep(0.25)
        else:
            raise DeploymentError(f"not healthy in time ({last})\n" + self.log_tails())
        # With every user an admin a request needs no token (a middleware adds one); a
        # client outside the server still takes one, as a script would.
        token = httpx.get(f"{self.base_url}/auth/token", timeout=10)
        if token.status_code != 201:
            raise DeploymentError(f"GET /auth/token: {token.status_code} {token.text}")
        self.client = httpx.Client(
            base_url=f"{self.base_url}/api/v2", timeout=30,
            headers={"Authorization": f"Bearer {token.json()['access_token']}"})

    def _wait_parsed(self, deadline: float) -> None:
        missing = list(self.dag_ids)
        while missing and time.monotonic() < deadline:
            self._check_alive()
            missing = [d for d in missing if self.request("GET", f"/dags/{d}",
                                                          ok=(200, 404)).status_code != 200]
            if missing:
                errors = self.request("GET", "/importErrors").json()["import_errors"]
                if errors:
                    raise DeploymentError("import errors in the DAGs folder:\n" + "\n".join(
                        f"{e['filename']}: {e['stack_trace']}" for e in errors))
                time.sleep(0.25)
        if missing:
            raise DeploymentError(f"DAGs not parsed in time: {missing}\n" + self.log_tails())

    def stop(self) -> None:
        """SIGTERM each component's process group (and any task process they forked into a
        group of its own), SIGKILL what is left after 15 s; drop the metadata database."""
        import psutil

        if self.client is not None:
            self.client.close()
            self.client = None
        descendants: list[psutil.Process] = []
        for process in self.processes.values():
            try:
                descendants += psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for process in self.processes.values():
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(10)
        for process in self.processes.values():  # whatever is left of each group
            _signal_group(process.pid, signal.SIGKILL)
        for child in descendants:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        self.processes.clear()
        self._drop_database()

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')
        self._database_created = True

    def create_assets(self, assets: Iterable[tuple[str, str]], alias: str | None = None) -> None:
        """Make the asset rows ``(name, uri)`` exist, and their link to ``alias``, as an
        earlier run that emitted them through that alias would have. Airflow 3.3 creates an
        asset emitted through an alias, and its link to the alias, with a check, then an INSERT
        (``TaskInstance.register_asset_changes_in_db``): two tasks emitting one new asset in
        the same instant both insert (``idx_asset_name_uri_unique``, then
        ``asset_alias_asset_pkey``), and the loser's task is set to failed, without a retry,
        though its work succeeded. A test about something else creates them first."""
        import psycopg

        with psycopg.connect(_with_database(self.admin_dsn, self.database),
                             autocommit=True) as conn:
            for name, uri in assets:
                conn.execute(
                    'INSERT INTO asset (name, uri, "group", extra, created_at, updated_at) '
                    "VALUES (%s, %s, 'asset', '{}', now(), now()) ON CONFLICT DO NOTHING",
                    (name, uri))
            if alias is None:
                return
            conn.execute('INSERT INTO asset_alias (name, "group") VALUES (%s, %s) '
                         "ON CONFLICT DO NOTHING", (alias, "asset"))
            for name, uri in assets:
                conn.execute(
                    "INSERT INTO asset_alias_asset (alias_id, asset_id) SELECT a.id, s.id "
                    "FROM asset_alias a, asset s WHERE a.name = %s AND s.name = %s "
                    "AND s.uri = %s ON CONFLICT DO NOTHING", (alias, name, uri))

    def _drop_database(self) -> None:
        if not self._database_created:
            return
        import psycopg

        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        self._database_created = False

    def log_tails(self, lines: int = 40) -> str:
        """The last ``lines`` lines of each component's log file."""
        parts = []
        for name in ("db-migrate", *COMPONENTS):
            path = self.log_dir / f"{name}.log"
            if path.exists():
                parts.append(f"----- {name} ({path}), last {lines} lines -----\n"
                             + _tail(path, lines))
        return "\n".join(parts)

    # -- REST API -----------------------------------------------------------------------------
    def request(self, method: str, path: str, *, ok: Iterable[int] = (200, 201, 204),
                **kwargs: Any) -> httpx.Response:
        """One REST API call (``path`` under ``/api/v2``); a status not in ``ok`` raises."""
        if self.client is None:
            raise DeploymentError("the deployment is not started")
        response = self.client.request(method, path, **kwargs)
        if response.status_code not in tuple(ok):
            raise DeploymentError(f"{method} {path}: {response.status_code} {response.text}")
        return response

    def set_connection(self, conn_id: str, connection: Mapping[str, Any]) -> None:
        """Create (or replace) a connection given in the JSON form of ``AIRFLOW_CONN_*``."""
        body = {"connection_id": conn_id, **connection}
        extra = body.get("extra")
        if extra is not None and not isinstance(extra, str):
            body["extra"] = json.dumps(extra)
        if "port" in body and body["port"] is not None:
            body["port"] = int(body["port"])
        self.request("DELETE", f"/connections/{quote(conn_id, safe='')}", ok=(204, 404))
        self.request("POST", "/connections", json=body)

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, *,
                run_id: str | None = None) -> str:
        """Trigger a run through ``POST /dags/{dag_id}/dagRuns``; its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": dict(conf or {})}
        if run_id is not None:
            body["dag_run_id"] = run_id
        response = self.request("POST", f"/dags/{dag_id}/dagRuns", json=body)
        return str(response.json()["dag_run_id"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        response = self.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")
        return str(response.json()["state"])

    def wait(self, dag_id: str, run_id: str, timeout: float = 180.0) -> str:
        """The run's state once it is success or failed, or its state when ``timeout`` ends."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.run_state(dag_id, run_id)
            if state in RUN_DONE or time.monotonic() >= deadline:
                return state
            self._check_alive()
            time.sleep(0.3)

    def task_instances(self, dag_id: str, run_id: str) -> list[TaskInstance]:
        """Every task instance of the run (mapped ones one per map index)."""
        rows: list[TaskInstance] = []
        offset = 0
        while True:
            page = self.request(
                "GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances",
                params={"limit": 100, "offset": offset}).json()
            for ti in page["task_instances"]:
                rows.append(TaskInstance(
                    task_id=ti["task_id"], map_index=int(ti["map_index"]), state=ti["state"],
                    try_number=int(ti["try_number"] or 0), pid=ti.get("pid"),
                    hostname=ti.get("hostname"), id=ti["id"], start_date=ti["start_date"],
                    end_date=ti["end_date"]))
            offset += len(page["task_instances"])
            if not page["task_instances"] or offset >= page["total_entries"]:
                return rows

    def task_instance(self, dag_id: str, run_id: str, task_id: str,
                      map_index: int = -1) -> TaskInstance | None:
        path = f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
        if map_index >= 0:
            path += f"/{map_index}"
        response = self.request("GET", path, ok=(200, 404))
        if response.status_code == 404:
            return None
        ti = response.json()
        return TaskInstance(
            task_id=ti["task_id"], map_index=int(ti["map_index"]), state=ti["state"],
            try_number=int(ti["try_number"] or 0), pid=ti.get("pid"), hostname=ti.get("hostname"),
            id=ti["id"], start_date=ti["start_date"], end_date=ti["end_date"])

    def wait_for_task(self, dag_id: str, run_id: str, task_id: str, states: Iterable[str], *,
                      map_index: int = -1, timeout: float = 120.0,
                      poll: float = 0.1) -> TaskInstance:
        """Poll until the task instance is in one of ``states`` (``TimeoutError`` if not)."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        ti = None
        while time.monotonic() < deadline:
            ti = self.task_instance(dag_id, run_id, task_id, map_index)
            if ti is not None and ti.state in wanted:
                return ti
            if self.run_state(dag_id, run_id) in RUN_DONE:
                break
            time.sleep(poll)
        raise TimeoutError(f"{dag_id}/{run_id}/{task_id}[{map_index}] never reached {wanted}: "
                           f"{ti}\n{self.describe(dag_id, run_id)}")

    def describe(self, dag_id: str, run_id: str) -> str:
        """A line per task instance, and the end of each failed try's log: for assertion
        messages (a failure on CI says why, not only which task)."""
        lines = []
        for ti in sorted(self.task_instances(dag_id, run_id),
                         key=lambda t: (t.start_date or "", t.task_id, t.map_index)):
            lines.append(f"  {ti.task_id}[{ti.map_index}] {ti.state} try {ti.try_number} "
                         f"pid {ti.pid}")
            if ti.state in ("failed", "up_for_retry") and ti.try_number:
                try:
                    log = self.logs(dag_id, run_id, ti.task_id, ti.map_index, ti.try_number)
                except Exception as error:
                    log = f"(its log could not be read: {error})"
                lines += [f"      | {line[:400]}" for line in log.splitlines()[-25:]]
        return "\n".join(lines)

    def logs(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1,
             try_number: int = 1) -> str:
        """A task try's log, through the REST API, one line per event."""
        response = self.request(
            "GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}"
            f"/logs/{try_number}", params={"map_index": map_index, "full_content": True},
            headers={"Accept": "application/json"})
        content = response.json().get("content", [])
        lines = []
        for event in content:
            if isinstance(event, str):
                lines.append(event)
                continue
            text = " ".join(str(event.get(k, "")) for k in ("timestamp", "level", "event")
                            if event.get(k))
            for error in event.get("error_detail") or []:
                if isinstance(error, dict):
                    text += f" {error.get('exc_type')}: {error.get('exc_value')}"
            lines.append(text)
        return "\n".join(lines)

    def failed_tries(self, dag_id: str, run_id: str) -> list[str]:
        """One line per earlier, failed try of the run's task instances (retried ones): the
        task, the try and the error its log ends with. Empty when every task ran once."""
        found = []
        for ti in self.task_instances(dag_id, run_id):
            for attempt in range(1, ti.try_number):
                log = self.logs(dag_id, run_id, ti.task_id, ti.map_index, attempt)
                errors = [line for line in log.splitlines()
                          if " error " in line or "failed" in line.lower()]
                found.append(f"{ti.task_id}[{ti.map_index}] try {attempt}: "
                             + (errors[-1] if errors else log[-300:]))
        return found

    # -- task processes -----------------------------------------------------------------------
    def task_pid(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> int:
        """OS pid of the running task process (the child the supervisor forked).

        The task instance row holds it once the task started; it is checked against the
        process title the task runner sets (``airflow worker -- <task instance id>``), else
        that title is looked for in ``/proc``.
        """
        ti = self.task_instance(dag_id, run_id, task_id, map_index)
        if ti is None or ti.state != "running":
            raise DeploymentError(f"{task_id}[{map_index}] is not running: {ti}")
        title = f"airflow worker -- {ti.id}"
        if ti.pid and title in _cmdline(ti.pid):
            return ti.pid
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and title in _cmdline(int(entry.name)):
                return int(entry.name)
        raise DeploymentError(f"no process titled {title!r} (task instance pid {ti.pid})")

    def kill_task(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1,
                  sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (SIGKILL) to the running task process; its pid."""
        pid = self.task_pid(dag_id, run_id, task_id, map_index)
        os.kill(pid, sig)
        return pid


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (a killed pytest leaves no
    api-server, scheduler or dag-processor behind; Linux's PR_SET_PDEATHSIG)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: clean-up stays with stop()
        pass


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace")


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class CeleryDeployment(Deployment):
    """The same deployment on the CeleryExecutor, as the README's Celery section sets it up:
    a Redis broker (``broker_url``: a database number of its own) and a queue of its own (so
    runs of this suite elsewhere on the same Redis never take each other's tasks), task
    results in the metadata database, and ``workers`` ``airflow celery worker`` processes of
    ``worker_concurrency`` tasks each (``w1``, ``w2``...), started after the other components.

    :meth:`kill_worker` SIGKILLs a worker's whole process tree (the worker, its pool children,
    the task supervisors and the task processes they forked), as a lost machine would end it.
    """

    def __init__(self, root: Path, *, admin_dsn: str, broker_url: str, workers: int = 2,
                 worker_concurrency: int = 2, **kwargs: Any) -> None:
        super().__init__(root, admin_dsn=admin_dsn, **kwargs)
        self.broker_url = broker_url
        self.queue = f"airflow_doi_{secrets.token_hex(4)}"
        self.workers = [f"w{n}" for n in range(1, workers + 1)]
        self.worker_concurrency = worker_concurrency
        #: Components this test killed on purpose (not a failure of the deployment).
        self.killed: set[str] = set()

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env.update({
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + _with_database(
                self.admin_dsn, self.database, driver="psycopg2"),
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": self.queue,
        })
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 180.0) -> Deployment:
        super().start(timeout)
        env = self.environment()
        for name in self.workers:
            with (self.log_dir / f"worker-{name}.log").open("wb") as log:
                self.processes[f"worker-{name}"] = subprocess.Popen(
                    [AIRFLOW, "celery", "worker", "--celery-hostname", f"{name}@%h",
                     "--queues", self.queue, "--skip-serve-logs"],
                    env=env, cwd=self.home, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                    preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        for name in self.workers:  # celery says "<name>@host ready." once it consumes
            while " ready." not in _tail(self.log_dir / f"worker-{name}.log", 400):
                self._check_alive()
                if time.monotonic() > deadline:
                    raise DeploymentError(f"worker {name} not ready in time\n"
                                          + self.log_tails())
                time.sleep(0.25)
        self.timings["workers"] = time.monotonic() - (deadline - timeout)
        return self

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None and name not in self.killed:
                raise DeploymentError(f"{name} exited with {process.returncode}\n"
                                      + self.log_tails())

    def worker_tree(self, name: str) -> list[int]:
        """The pids of worker ``name`` and every process below it."""
        import psutil

        main = psutil.Process(self.processes[f"worker-{name}"].pid)
        return [main.pid, *(child.pid for child in main.children(recursive=True))]

    def task_processes(self, name: str) -> list[str]:
        """The task instance ids whose task process runs under worker ``name``."""
        found = []
        for pid in self.worker_tree(name):
            command = _cmdline(pid)
            if command.startswith("airflow worker -- "):
                found.append(command.removeprefix("airflow worker -- ").strip())
        return found

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL worker ``name``'s whole process tree at once; the pids killed."""
        import psutil

        pids = self.worker_tree(name)
        self.killed.add(f"worker-{name}")
        processes = []
        for pid in pids:
            try:
                process = psutil.Process(pid)
                process.suspend()  # none of them may act on another's death meanwhile
                processes.append(process)
            except psutil.NoSuchProcess:
                pass
        for process in processes:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=10)
        return pids

    def log_tails(self, lines: int = 40) -> str:
        parts = [super().log_tails(lines)]
        for name in self.workers:
            path = self.log_dir / f"worker-{name}.log"
            if path.exists():
                parts.append(f"----- worker {name} ({path}), last {lines} lines -----\n"
                             + _tail(path, lines))
        return "\n".join(parts)
