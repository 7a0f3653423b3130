"""Commands the tests run hundreds of times, as processes forked from a warm interpreter.

``python -m airflow_doi ...`` spends ~0.5 s of its ~0.6 s of CPU importing (pyarrow above all),
``airflow dags test`` ~12 of its ~17 s (Airflow, then its in-process execution API), ``dbt``
~2 s. A fork
server does those imports once; each command is then a child forked from it, with its own pid,
file descriptors (the caller's pipes as 0, 1 and 2), working directory, environment, ``argv``
and exit status, as the exec'ed command has: only the imports are shared.

What keeps that faithful:

- the server only *imports*: nothing that reads a per-test setting runs before the fork;
- the environment the imports read (``AIRFLOW_HOME``, ``AIRFLOW__*``, ``PYTHON*``, the locale,
  ``TMPDIR``, ``TZ``, ``HOME``) is part of a server's identity: a command whose environment
  differs there gets a server of its own; ``AIRFLOW_CONN_*``, ``AIRFLOW_VAR_*`` and
  ``AIRFLOW_DOI_*`` are read when used;
- what differs, known: the children of one server share its string-hash seed, and warnings the
  imports gave went to the server, once;
- ``random`` is reseeded in each child (CPython does it at fork); the child runs the module as
  ``__main__``, then the interpreter's own shutdown steps (threads joined, ``atexit``), then
  exits with the command's status;
- the caller's umask travels with the command, as a child inherits it;
- a command this cannot run (another program, ``-c`` code) runs as a real subprocess.

Tests that signal, kill or time a command, or check what a fresh process imports, use real
processes (``subprocess``), as do the README's blocks.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Console scripts the server knows, by file name: their entry point (``module:function``).
SCRIPTS = {"airflow-doi": "airflow_doi.cli:main", "airflow": "airflow.__main__:main",
           "dbt": "dbt.cli.main:cli"}

#: Modules run with ``python -m``, by the kind of server that runs them.
MODULES = {"airflow_doi": "airflow_doi", "airflow": "airflow", "dbt.cli.main": "dbt"}

#: What each kind of server imports before it forks: what the command imports anyway.
PRELOAD = {
    "airflow_doi": ["airflow_doi.cli", *(f"airflow_doi.cli.{name}" for name in (
        "_proxy", "demo", "enrich", "normalize", "repair", "report", "resolve", "simulator",
        "sql")), "airflow_doi.files.read", "airflow_doi.files.write", "airflow_doi.native.arrow",
        "airflow_doi.repair.damage", "pyarrow", "pyarrow.csv", "pyarrow.compute"],
    # ``python -c CODE`` that runs one of the provider's operators or hooks
    "provider": [f"airflow_doi.provider.{name}" for name in (
        "operators.resolve", "operators.enrich", "operators.normalize", "hooks.sql",
        "hooks.claims", "hooks.snapshots")],
    "dbt": ["dbt.cli.main", "dbt.adapters.duckdb", "dbt.adapters.postgres"],
    "airflow": ["airflow.cli.cli_parser", "airflow.cli.commands.dag_command",
                "airflow.sdk.execution_time.supervisor", "airflow.sdk",
                "airflow.api_fastapi.execution_api.app"],
}


def _reads_at_import(name: str) -> bool:
    """Whether a variable can shape what the preloaded imports did (then it names the server)."""
    if name.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_", "AIRFLOW_DOI_")):
        return False
    return name.startswith(("AIRFLOW", "PYTHON", "LC_", "LANG", "SQLALCHEMY", "_AIRFLOW",
                            "DBT_PACKAGE_HUB_URL", "TMPDIR", "TEMP", "TMP", "TZ", "HOME",
                            "NO_COLOR", "FORCE_COLOR"))


def _module(argv: Sequence[str]) -> tuple[str, str] | None:
    """(server kind, what runs: ``-m module`` or an entry point) for a command a server runs."""
    name = Path(argv[0]).name
    if name in SCRIPTS and Path(argv[0]).parent == Path(sys.executable).parent:
        entry = SCRIPTS[name]
        return entry.split(".")[0].split(":")[0], entry
    if argv[0] != sys.executable or len(argv) < 3:
        return None
    if argv[1] == "-m" and argv[2] in MODULES:
        return MODULES[argv[2]], "-m"
    if argv[1] == "-c" and "airflow_doi.provider" in argv[2]:
        return "provider", "-c"
    return None


class _Server:
    """One warm interpreter, started with ``env``, answering on a Unix socket."""

    def __init__(self, module: str, env: Mapping[str, str], timeout: float = 300) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="forked-"))
        self.address = str(self.folder / "socket")
        # Its standard streams are pipes, as a captured subprocess's are: the children's
        # sys.stdin/stdout/stderr are those objects over the caller's descriptors. Its own
        # stderr (import-time warnings, a crash) is drained into self.said, never blocking it.
        self._stdin_r, self._stdin_w = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forked", self.address, module],
            env=dict(env), stdin=self._stdin_r, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parent.parent)
        os.close(self._stdin_r)
        self.said = b""
        self._ready = threading.Event()
        threading.Thread(target=self._listen, daemon=True).start()
        if not self._ready.wait(timeout) or self.process.poll() is not None:
            self.close()
            raise RuntimeError(f"the fork server for {module} did not start in {timeout:g} s: "
                               f"{self.said.decode(errors='replace')[-3000:]}")

    def _listen(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.strip() == b"ready" and not self._ready.is_set():
                self._ready.set()
            else:
                self.said += line
        self._ready.set()  # EOF: the server is gone (poll() says so)

    def start(self, entry: str, argv: list[str], env: Mapping[str, str], cwd: str,
              stdin: bytes | None, new_session: bool, merged: bool = False) -> Popen:
        """Fork the command; ``merged`` sends its stderr down its stdout pipe."""
        umask = os.umask(0o022)  # what a child inherits: read it, put it back
        os.umask(umask)
        request = json.dumps({"entry": entry, "argv": argv, "env": dict(env), "cwd": cwd,
                              "umask": umask, "new_session": new_session}).encode()
        in_r, in_w = os.pipe() if stdin is not None else (os.dup(0), -1)
        out_r, out_w = os.pipe()
        err_r, err_w = (-1, os.dup(out_w)) if merged else os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.address)
        socket.send_fds(conn, [len(request).to_bytes(4, "big") + request], [in_r, out_w, err_w])
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        return Popen(argv, conn, out_r, err_r, in_w, stdin)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        os.close(self._stdin_w)
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
    except BrokenPipeError:
        pass


class Popen:
    """A command a server forked, as :class:`subprocess.Popen` with ``stdout=PIPE,
    stderr=PIPE`` has it: ``pid``, ``poll``, ``wait``, ``communicate``, ``send_signal``,
    ``kill``, ``returncode``. A ``start_new_session`` child leads its process group
    (for ``os.killpg``)."""

    text = False
    merged = False

    def __init__(self, argv: list[str], conn: socket.socket, out_r: int, err_r: int,
                 in_w: int, stdin: bytes | None) -> None:
        self.args = argv
        self._conn = conn
        self._received = b""
        self.pid = int(self._line(None))
        self.returncode: int | None = None
        self._read: list[bytes] = [b"", b""]
        self._threads = [threading.Thread(target=self._drain, args=(i, fd), daemon=True)
                         for i, fd in enumerate((out_r, err_r)) if fd >= 0]
        if stdin is not None:
            self._threads.append(threading.Thread(target=_feed, args=(in_w, stdin), daemon=True))
        for thread in self._threads:
            thread.start()

    def _drain(self, index: int, fd: int) -> None:
        with os.fdopen(fd, "rb") as stream:
            self._read[index] = stream.read()

    def _line(self, timeout: float | None) -> bytes:
        """The server's next line (the pid, then the exit status), waiting up to ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._received:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (left <= 0 or not select.select([self._conn], [], [], left)[0]):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError(f"the fork server went away while running {self.args}")
            self._received += chunk
        line, _, self._received = self._received.partition(b"\n")
        return line

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self._line(timeout))
            self._conn.close()
        return self.returncode

    def output(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Wait for the exit and the end of both streams (``timeout`` covers both, as in
        ``communicate``): (stdout, stderr)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.wait(timeout)
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():  # a grandchild still holds the pipe
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._read[0], self._read[1]

    def send_signal(self, sig: int) -> None:
        """As ``subprocess.Popen.send_signal``: nothing once it has exited."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        out, err = self.output(timeout)
        if self.merged:  # stderr=STDOUT: no stderr of its own
            return (_text(out) if self.text else out), None
        return (_text(out), _text(err)) if self.text else (out, err)




def _text(data: bytes) -> str:
    """Bytes as ``subprocess`` decodes them in text mode: the locale's encoding, universal
    newlines."""
    return io.TextIOWrapper(io.BytesIO(data)).read()


def popen(argv: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None, text: bool = False,
          start_new_session: bool = False, merged: bool = False) -> Any:
    """A running command with its output captured (``merged``: stderr into stdout, as
    ``stderr=STDOUT``): forked from a warm server when it is one a server runs, a real
    ``subprocess.Popen`` with the same pipes otherwise."""
    command, environment, found = _resolve(argv, env)
    if found is None:
        return subprocess.Popen(command, env=environment, cwd=cwd, text=text,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                                start_new_session=start_new_session)
    kind, entry = found
    started = _server(kind, environment).start(entry, command, environment,
                                               os.fspath(cwd or os.getcwd()), None,
                                               start_new_session, merged)
    started.text, started.merged = text, merged
    return started


_servers: dict[tuple[str, tuple[tuple[str, str], ...]], _Server] = {}
_lock = threading.Lock()


def _server(module: str, env: Mapping[str, str]) -> _Server:
    identity = (module, tuple(sorted((k, v) for k, v in env.items() if _reads_at_import(k))))
    with _lock:
        if identity not in _servers:
            _servers[identity] = _Server(module, env)
        return _servers[identity]


@atexit.register
def _close_all() -> None:
    for server in _servers.values():
        server.close()


def warm(argv: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None) -> None:
    """Start the server ``argv`` would use, now: commands that must run at the same moment
    then start together (a server's first start takes seconds)."""
    _command, environment, found = _resolve(argv, env)
    if found is not None:
        _server(found[0], environment)


def run(argv: Sequence[str | os.PathLike[str]], *, input: bytes | str | None = None,
        env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
        text: bool = False, timeout: float | None = None, check: bool = False,
        capture_output: bool = True) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run` with ``capture_output``, the command forked from a warm server
    when it is one a server runs (see the module's docstring), a real subprocess otherwise."""
    assert capture_output, "forked.run captures the output, as the tests' helpers all do"
    command, environment, found = _resolve(argv, env)
    if found is None:
        return subprocess.run(command, input=input, env=environment, cwd=cwd, text=text,
                              timeout=timeout, check=check, capture_output=True)
    kind, entry = found
    data = input.encode() if isinstance(input, str) else input
    started = _server(kind, environment).start(entry, command, environment,
                                               os.fspath(cwd or os.getcwd()), data, False)
    try:
        out, err = started.output(timeout)
    except subprocess.TimeoutExpired:
        started.kill()
        started.wait()
        raise
    stdout: Any = _text(out) if text else out
    stderr: Any = _text(err) if text else err
    done = subprocess.CompletedProcess(command, started.wait(), stdout, stderr)
    if check:
        done.check_returncode()
    return done


def _resolve(argv: Sequence[str | os.PathLike[str]], env: Mapping[str, str] | None
             ) -> tuple[list[str], dict[str, str], tuple[str, str] | None]:
    """The command as strings, its whole environment, and (server kind, entry) when a server
    runs it (``AIRFLOW_DOI_TESTS_FORK=0`` runs every command as a real subprocess)."""
    command = [os.fspath(part) for part in argv]
    environment = dict(os.environ if env is None else env)
    found = _module(command) if os.environ.get("AIRFLOW_DOI_TESTS_FORK", "1") != "0" else None
    return command, environment, found


# --- the server side ------------------------------------------------------------------------

def _warm(module: str) -> None:
    """Import what the commands import (nothing is called: a child builds its own state)."""
    for name in PRELOAD[module]:
        __import__(name)
    # A module the commands run with ``python -m`` must not be in sys.modules already (runpy
    # warns, the exec'ed command does not): its dependencies stay imported, it runs afresh.
    for name in MODULES:
        if "." in name:
            sys.modules.pop(name, None)


def _child(request: dict[str, Any], fds: list[int], ready: int) -> None:
    """In the forked child: become the command, run it, exit with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if request["new_session"]:
        os.setsid()
    os.write(ready, b"1")
    os.close(ready)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again, as a new process does
    time.tzset()
    argv, entry = request["argv"], request["entry"]
    code = 0
    try:
        if entry == "-m":  # python -m MODULE ARGS: sys.path[0] is the working directory
            import runpy

            sys.argv = [argv[2], *argv[3:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        elif entry == "-c":  # python -c CODE ARGS: sys.path[0] is ''
            import types

            sys.argv = ["-c", *argv[3:]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(argv[2], "<string>", "exec"), main.__dict__)
        else:  # a console script: sys.path[0] is its folder; it runs sys.exit(main())
            import importlib

            sys.argv = list(argv)
            sys.path[0] = str(Path(argv[0]).parent)
            module, function = entry.split(":")
            sys.exit(getattr(importlib.import_module(module), function)())
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # What the interpreter does on its way out: join non-daemon threads, run atexit.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _serve(address: str, module: str) -> None:
    _warm(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    sys.stderr.write("ready\n")
    sys.stderr.flush()
    while True:
        # The caller holds the other end of our stdin: its end closing (the test process is
        # gone) ends the server.
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:
            os._exit(0)
        conn, _ = listener.accept()
        message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
        size = int.from_bytes(message[:4], "big")
        while len(message) < 4 + size:
            message += conn.recv(1 << 20)
        request = json.loads(message[4:4 + size])
        if os.fork() == 0:  # the manager: forks the command, reports its pid and status
            listener.close()
            ready_r, ready_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                conn.close()
                os.close(ready_r)
                _child(request, fds, ready_w)
            for fd in (*fds, ready_w):
                os.close(fd)
            os.read(ready_r, 1)  # set up (its own session if asked), as exec'ed: say its pid
            os.close(ready_r)
            conn.sendall(f"{pid}\n".encode())
            _, status = os.waitpid(pid, 0)
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os._exit(0)
        for fd in fds:
            os.close(fd)
        conn.close()
        while True:  # reap finished managers
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
