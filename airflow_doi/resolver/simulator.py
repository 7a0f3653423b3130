"""A local stand-in for the doi.org proxy REST API, with injectable faults.

It behaves like the documented API where the resolver depends on it:

* ``GET /api/handles/<handle>``: the raw request path is percent-decoded (bytes, then
  UTF-8) and looked up case-insensitively by the Z39.84 key (:func:`ascii_upper`, never
  ``str.upper``); response codes 1 (HTTP 200), 2 (500), 100 (404) and 200 (200);
  ``type``/``index`` filters (a value matching any is kept).
* ``GET /doiRA/<d1>,<d2>,...``: Which RA?, split on raw commas before decoding.

and misbehaves on purpose where a resolver must cope: latency, a token-bucket rate limit
answering 429 with ``Retry-After``, a 500 every Nth request, a dropped connection every Mth,
slow answers, malformed JSON every Kth, an outage window, or 500 for ever.

Side doors, not counted as API requests: ``GET /_simulator/stats`` (``?times=1`` adds the
arrival time of every API request) and ``POST /_simulator/reset``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

from aiohttp import web

from airflow_doi.syntax import ascii_upper, validate

__all__ = ["Faults", "ProxySimulator", "make_records", "record_url"]


@dataclass(frozen=True)
class Faults:
    """Injected misbehaviour; every counter is on the API request number (1-based)."""

    #: Answer HTTP 500 (responseCode 2) to every Nth request.
    error_every: int | None = None
    #: Close the connection without any response on every Mth request.
    drop_every: int | None = None
    #: Answer HTTP 200 with truncated JSON on every Kth request.
    bad_json_every: int | None = None
    #: Delay every Sth answer by ``slow_seconds`` on top of the latency.
    slow_every: int | None = None
    slow_seconds: float = 1.0
    #: Answer 500 to everything during the first ``outage_seconds`` after start/reset.
    outage_seconds: float = 0.0
    #: Answer 500 to everything, for ever.
    always_500: bool = False

    @classmethod
    def coerce(cls, value: Faults | Mapping[str, Any] | None) -> Faults:
        if value is None:
            return cls()
        if isinstance(value, Faults):
            return value
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise TypeError(f"unknown fault(s): {', '.join(unknown)}")
        return cls(**value)


def record_url(doi: str) -> str:
    """The URL value :func:`make_records` gives a DOI (tests compare against it)."""
    return "https://records.example/" + quote(doi, safe="")


def make_records(
    dois: Iterable[str], *, ttl: int | str = 86400, ra: str = "DataCite"
) -> dict[str, Any]:
    """A record with an HS_ADMIN value and a URL value (index 1) for each DOI."""
    records: dict[str, Any] = {}
    for doi in dois:
        records[doi] = {
            "ra": ra,
            "values": [
                {
                    "index": 100,
                    "type": "HS_ADMIN",
                    "data": {
                        "format": "admin",
                        "value": {
                            "handle": "0.NA/" + doi.partition("/")[0],
                            "index": 200,
                            "permissions": "011111111111",
                        },
                    },
                    "ttl": ttl,
                    "timestamp": "2000-04-13T15:08:57Z",
                },
                {
                    "index": 1,
                    "type": "URL",
                    "data": {"format": "string", "value": record_url(doi)},
                    "ttl": ttl,
                    "timestamp": "2004-09-10T19:49:59Z",
                },
            ],
        }
    return records


def _load(
    records: Mapping[str, Any] | str | os.PathLike[str] | None,
) -> dict[str, tuple[str, dict[str, Any]]]:
    if records is None:
        data: Mapping[str, Any] = {}
    elif isinstance(records, Mapping):
        data = records
    else:
        data = json.loads(Path(records).read_text(encoding="utf-8"))
        if not isinstance(data, Mapping):
            raise ValueError(f"{records}: expected a JSON object of handle -> record")
    table: dict[str, tuple[str, dict[str, Any]]] = {}
    for handle, record in data.items():
        if isinstance(record, list):
            record = {"values": record}
        if not isinstance(record, Mapping) or not isinstance(record.get("values", []), list):
            raise ValueError(f"record for {handle!r} must be a list of values or an object")
        table[ascii_upper(handle)] = (handle, dict(record))
    return table


def _json(status: int, document: object, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(document, ensure_ascii=False).encode("utf-8"),
        content_type="application/json",
        headers=headers,
    )


class ProxySimulator:
    """The simulated proxy, served by aiohttp on a background thread (a context manager)."""

    def __init__(
        self,
        records: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        rate_limit: float | None = None,
        rate_burst: int | None = None,
        faults: Faults | Mapping[str, Any] | None = None,
        auto_records: bool = False,
    ) -> None:
        self.records = _load(records)
        self.host = host
        self.port = port
        self.latency = latency
        self.rate_limit = rate_limit
        #: Token-bucket size; a quarter of a second's worth by default.
        self.rate_burst = rate_burst or (max(1, math.ceil(rate_limit / 4)) if rate_limit else 1)
        self.faults = Faults.coerce(faults)
        self.auto_records = auto_records
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.ServerRunner | None = None
        self._stopped: asyncio.Event | None = None
        self.reset_counts()

    # -- counters ---------------------------------------------------------------------------
    def reset_counts(self) -> None:
        with self._lock:
            self.request_count = 0
            self.requests_by_key: Counter[str] = Counter()
            #: ``(wall-clock time, key)`` of every API request, in arrival order.
            self.request_log: list[tuple[float, str]] = []
            #: Wall-clock times of the requests answered 429.
            self.throttled_times: list[float] = []
            #: User-Agent headers seen, with counts (clients should name themselves).
            self.user_agents: Counter[str] = Counter()
            self.throttled = 0
            self.errors = 0
            self.dropped = 0
            self.bad_json = 0
            self.slow = 0
            self.started_at = time.monotonic()
            self._tokens = float(self.rate_burst)
            self._refilled = time.monotonic()

    def stats(self, *, times: bool = False) -> dict[str, Any]:
        with self._lock:
            document: dict[str, Any] = {
                "requests": self.request_count,
                "by_key": dict(self.requests_by_key),
                "throttled": self.throttled,
                "errors": self.errors,
                "dropped": self.dropped,
                "bad_json": self.bad_json,
                "slow": self.slow,
            }
            if times:
                document["times"] = [t for t, _ in self.request_log]
        return document

    # -- life cycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ProxySimulator:
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as error:  # reported to the starting thread
                failure.append(error)
                ready.set()
                return
            ready.set()
            assert self._stopped is not None
            loop.run_until_complete(self._stopped.wait())
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=serve, name="proxy-simulator", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        return self

    async def _start(self) -> None:
        self._stopped = asyncio.Event()
        server = web.Server(self._handle, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(30)
            self._thread = None

    def __enter__(self) -> ProxySimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling -------------------------------------------------------------------
    def _take_token(self, now: float) -> float | None:
        """None if the request may pass, else the seconds until a token is available."""
        if not self.rate_limit:
            return None
        self._tokens = min(
            float(self.rate_burst), self._tokens + (now - self._refilled) * self.rate_limit
        )
        self._refilled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        return (1.0 - self._tokens) / self.rate_limit

    def _record(self, handle: str) -> tuple[str, dict[str, Any]] | None:
        found = self.records.get(ascii_upper(handle))
        if found is not None:
            return found
        if self.auto_records and validate(handle, decode="never").valid:
            return handle, make_records([handle])[handle]
        return None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        raw_path, _, raw_query = request.raw_path.partition("?")
        if raw_path.startswith("/_simulator/"):
            return self._side_door(request, raw_path, raw_query)
        if raw_path.startswith("/api/handles/"):
            kind, raw_target = "handle", raw_path[len("/api/handles/") :]
        elif raw_path.startswith("/doiRA/"):
            kind, raw_target = "ra", raw_path[len("/doiRA/") :]
        else:
            return web.Response(status=404, text="not found\n")
        try:
            target = unquote_to_bytes(raw_target).decode("utf-8")
        except UnicodeDecodeError:
            target = None
        now = time.monotonic()
        with self._lock:
            self.request_count += 1
            number = self.request_count
            key = ascii_upper(target) if target is not None else raw_target
            self.request_log.append((time.time(), key))
            self.user_agents[request.headers.get("User-Agent", "")] += 1
            if kind == "handle":
                self.requests_by_key[key] += 1
            wait = self._take_token(now)
            if wait is not None:
                self.throttled += 1
                self.throttled_times.append(self.request_log[-1][0])
        if wait is not None:
            return _json(
                429,
                {"responseCode": 2, "message": "Too many requests"},
                {"Retry-After": str(max(1, math.ceil(wait)))},
            )
        faults = self.faults
        if self.latency:
            await asyncio.sleep(self.latency)
        if faults.slow_every and number % faults.slow_every == 0:
            with self._lock:
                self.slow += 1
            await asyncio.sleep(faults.slow_seconds)
        if faults.drop_every and number % faults.drop_every == 0:
            with self._lock:
                self.dropped += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError  # no response at all: the client sees a dropped line
        failing = faults.always_500 or (
            faults.outage_seconds and now - self.started_at < faults.outage_seconds
        )
        if failing or (faults.error_every and number % faults.error_every == 0):
            with self._lock:
                self.errors += 1
            return _json(500, {"responseCode": 2, "message": "Simulated failure"})
        if faults.bad_json_every and number % faults.bad_json_every == 0:
            with self._lock:
                self.bad_json += 1
            return web.Response(
                status=200,
                body=b'{"responseCode": 1, "handle": "10.',
                content_type="application/json",
            )
        if target is None:
            return _json(400, {"responseCode": 2, "message": "Bad percent-encoding in handle"})
        if kind == "ra":
            return self._which_ra(raw_target)
        return self._answer(target, raw_query)

    def _answer(self, handle: str, raw_query: str) -> web.Response:
        found = self._record(handle)
        if found is None:
            return _json(
                404, {"responseCode": 100, "handle": handle, "message": "Handle Not Found"}
            )
        stored, record = found
        values = [v for v in record.get("values", []) if isinstance(v, dict)]
        types: list[str] = []
        indexes: list[int] = []
        for pair in raw_query.split("&") if raw_query else []:
            name, _, value = pair.partition("=")
            if name == "type":
                types.append(unquote(value))
            elif name == "index" and value.isdigit():
                indexes.append(int(value))
        if types or indexes:
            values = [v for v in values if v.get("type") in types or v.get("index") in indexes]
        if not values:
            return _json(
                200, {"responseCode": 200, "handle": stored, "message": "Values Not Found"}
            )
        return _json(200, {"responseCode": 1, "handle": stored, "values": values})

    def _which_ra(self, raw_list: str) -> web.Response:
        entries: list[dict[str, str]] = []
        for raw in raw_list.split(","):
            try:
                doi = unquote_to_bytes(raw).decode("utf-8")
            except UnicodeDecodeError:
                entries.append({"DOI": raw, "status": "Invalid DOI"})
                continue
            if not validate(doi, decode="never").valid:
                entries.append({"DOI": doi, "status": "Invalid DOI"})
                continue
            found = self._record(doi)
            if found is None:
                entries.append({"DOI": doi, "status": "DOI does not exist"})
            else:
                entries.append({"DOI": found[0], "RA": str(found[1].get("ra", "Unknown"))})
        return _json(200, entries)

    def _side_door(self, request: web.BaseRequest, path: str, query: str) -> web.Response:
        if path == "/_simulator/stats" and request.method == "GET":
            return _json(200, self.stats(times="times=1" in query.split("&")))
        if path == "/_simulator/reset" and request.method == "POST":
            self.reset_counts()
            return _json(200, {"reset": True})
        return web.Response(status=404, text="unknown simulator endpoint\n")
