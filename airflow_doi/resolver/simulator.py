"""A local stand-in for the doi.org proxy REST API, with injectable faults.

It behaves like the documented API where the resolver depends on it:

* ``GET /api/handles/<handle>``: the raw request path is percent-decoded (bytes, then
  UTF-8) and looked up case-insensitively by the Z39.84 key (:func:`ascii_upper`, never
  ``str.upper``); response codes 1 (HTTP 200), 2 (500), 100 (404) and 200 (200);
  ``type``/``index`` filters (a value matching any is kept). A shortDOI of a known DOI
  (:meth:`ProxySimulator.short_doi`, ``10/`` and six letters and digits) answers with its
  ``HS_ALIAS`` value naming the DOI, as the shortDOI service's handles do.
* ``GET /doiRA/<d1>,<d2>,...``: Which RA?, split on raw commas before decoding;
* ``GET /<DOI>`` (any other path): DOI content negotiation. With ``Accept:
  application/vnd.citationstyles.csl+json`` a 302 to the DOI's registration agency, one of the
  simulated agencies of :mod:`airflow_doi.resolver.agencies` served on ports of their own
  (:attr:`ProxySimulator.metadata_hosts`); without it, a 302 to the record's URL value (the
  landing page); 404 for a DOI nobody registered. Counted in ``cn_requests``, not in
  ``request_count``, and under the same rate limit.

and misbehaves on purpose where a resolver must cope: latency, a token-bucket rate limit
answering 429 with ``Retry-After``, a 500 every Nth request, a dropped connection every Mth,
slow answers, malformed JSON every Kth, an outage window, 500 for ever, or death (no
connection any more) after the Nth answer.

Side doors, not counted as API requests: ``GET /_simulator/stats`` (``?times=1`` adds the
arrival time of every API request) and ``POST /_simulator/reset``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
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

from airflow_doi.presentation import encode_path
from airflow_doi.resolver.agencies import (
    AGENCIES,
    MEDIA_TYPES,
    agency_path,
    csl_for,
    hostile_body,
    work_from_record,
)
from airflow_doi.resolver.agencies import expected_metadata as expected_of_work
from airflow_doi.syntax import SHORT_DOI_PREFIX, ascii_upper, validate

__all__ = ["Faults", "ProxySimulator", "make_records", "record_url", "short_doi_of"]


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
    #: Die after answering this many API requests: stop listening at the last one (connection
    #: refused from then on); a request on a connection still open is dropped, unanswered.
    die_after: int | None = None

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


def short_doi_of(doi: str) -> str:
    """The shortDOI (``10/xxxxxx``) the simulator serves for ``doi``: six characters of base 32
    of a digest of its key, so the same in every run (the real service hands codes out as it
    goes), a letter among them."""
    digest = hashlib.sha256(ascii_upper(doi).encode("utf-8")).digest()
    code = base64.b32encode(digest).decode("ascii").lower()[:6]
    return SHORT_DOI_PREFIX + ("a" + code[1:] if code.isdigit() else code)


def _alias_record(doi: str) -> dict[str, Any]:
    """A shortDOI's record: an ``HS_ALIAS`` value naming ``doi``, and its admin value."""
    return {"values": [
        {"index": 1, "type": "HS_ALIAS", "data": {"format": "string", "value": doi},
         "ttl": 86400, "timestamp": "2011-06-01T12:00:00Z"},
        {"index": 100, "type": "HS_ADMIN",
         "data": {"format": "admin", "value": {"handle": "0.NA/10", "index": 200,
                                               "permissions": "011111111111"}},
         "ttl": 86400, "timestamp": "2011-06-01T12:00:00Z"},
    ]}


def _retry_after(wait: float) -> dict[str, str]:
    """The ``Retry-After`` header of a 429: whole seconds until a token is back, at least 1."""
    return {"Retry-After": str(max(1, math.ceil(wait)))}


def _too_many_requests(wait: float) -> web.Response:
    """The plain-text 429 of doi.org's content negotiation and of an agency host."""
    return web.Response(status=429, text="Too many requests\n", headers=_retry_after(wait))


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
        agencies: bool = True,
        agency_rate_limit: float | None = None,
    ) -> None:
        self.records = _load(records)
        #: shortDOI key -> (the shortDOI, the DOI it aliases): one for each known DOI.
        self._shorts: dict[str, tuple[str, str]] = {}
        for stored, _ in self.records.values():
            self.short_doi(stored)
        #: Serve the simulated agencies (content negotiation) beside the proxy.
        self.agencies = agencies
        #: Requests/second each agency answers before 429 (a token bucket of its own).
        self.agency_rate_limit = agency_rate_limit
        self._agency_ports: dict[str, int] = {}
        self._elsewhere_port = 0
        self._agency_runners: list[web.ServerRunner] = []
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
        self._site: web.TCPSite | None = None
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
            #: Content negotiation requests at the proxy, and per key.
            self.cn_requests = 0
            self.cn_by_key: Counter[str] = Counter()
            #: Requests each simulated agency received, per agency and per key.
            self.agency_requests: Counter[str] = Counter()
            self.agency_requests_by_key: Counter[str] = Counter()
            self.agency_user_agents: Counter[str] = Counter()
            #: Authorization headers the agencies saw (credentials must never reach them).
            self.agency_authorizations: Counter[str] = Counter()
            self.agency_throttled = 0
            #: The "elsewhere" server: a host no client may be sent to (off the allowlist).
            self.elsewhere_requests = 0
            self.elsewhere_user_agents: Counter[str] = Counter()
            self._throttle_seen: Counter[str] = Counter()
            self._agency_buckets: dict[str, tuple[float, float]] = {}

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
                "cn_requests": self.cn_requests,
                "agency_requests": dict(self.agency_requests),
                "agency_throttled": self.agency_throttled,
                "elsewhere_requests": self.elsewhere_requests,
            }
            if times:
                document["times"] = [t for t, _ in self.request_log]
        return document

    # -- life cycle -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def metadata_hosts(self) -> tuple[str, ...]:
        """The simulated agencies' origins: the allowlist a client needs (``metadata_hosts``)."""
        return tuple(self.agency_url(name) for name in self._agency_ports)

    def agency_url(self, agency: str) -> str:
        return f"http://{self.host}:{self._agency_ports[agency]}"

    @property
    def elsewhere_url(self) -> str:
        """A server on no allowlist: hostile redirects point here; it counts what arrives."""
        return f"http://{self.host}:{self._elsewhere_port}"

    def work(self, doi: str) -> Any:
        """The :class:`~airflow_doi.resolver.agencies.Work` the simulator serves for ``doi``
        (None when the DOI is not registered here)."""
        found = self._record(doi)
        return None if found is None else work_from_record(found[0], found[1])

    def expected_metadata(self, doi: str) -> dict[str, Any] | None:
        """The typed columns a correct client makes of ``doi``'s record (None: no CSL)."""
        work = self.work(doi)
        return None if work is None else expected_of_work(work)

    def short_doi(self, doi: str) -> str:
        """The shortDOI that aliases ``doi`` here (:func:`short_doi_of`), served from now on
        (with ``auto_records`` a DOI is only known once asked about, so ask here first)."""
        short = short_doi_of(doi)
        self._shorts[ascii_upper(short)] = (short, doi)
        return short

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
        self._site = site
        self.port = _bound_port(site, self.port)
        if self.agencies:
            for name in AGENCIES:
                self._agency_ports[name] = await self._serve(
                    lambda request, name=name: self._agency(name, request))
            self._elsewhere_port = await self._serve(self._elsewhere)

    async def _serve(self, handler: Any) -> int:
        runner = web.ServerRunner(web.Server(handler, access_log=None), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, 0, reuse_address=True)
        await site.start()
        self._agency_runners.append(runner)
        return _bound_port(site, 0)

    async def _shutdown(self) -> None:
        for runner in self._agency_runners:
            await runner.cleanup()
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
        elif len(raw_path) > 1 and self.agencies:
            kind, raw_target = "cn", raw_path[1:]
        else:
            return web.Response(status=404, text="not found\n")
        try:
            target = unquote_to_bytes(raw_target).decode("utf-8")
        except UnicodeDecodeError:
            target = None
        now = time.monotonic()
        if kind == "cn":
            return await self._negotiate(request, target, raw_target, now)
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
                _retry_after(wait),
            )
        faults = self.faults
        if faults.die_after is not None and number >= faults.die_after:
            if number > faults.die_after:
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError  # dead: nothing more is answered
            if self._site is not None:
                await self._site.stop()  # this one is answered; no connection after it
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
        alias = self._shorts.get(ascii_upper(handle))
        found = (alias[0], _alias_record(alias[1])) if alias else self._record(handle)
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

    # -- content negotiation ------------------------------------------------------------------
    async def _negotiate(self, request: web.BaseRequest, target: str | None, raw_target: str,
                         now: float) -> web.StreamResponse:
        """doi.org's answer to a content negotiation request: a redirect to the agency."""
        with self._lock:
            self.cn_requests += 1
            self.cn_by_key[ascii_upper(target) if target is not None else raw_target] += 1
            self.user_agents[request.headers.get("User-Agent", "")] += 1
            wait = self._take_token(now)
            if wait is not None:
                self.throttled += 1
        if wait is not None:
            return _too_many_requests(wait)
        if self.latency:
            await asyncio.sleep(self.latency)
        found = self._record(target) if target is not None else None
        if found is None:
            return web.Response(status=404, text="DOI Not Found\n", content_type="text/html")
        stored, record = found
        if CSL_MEDIA_TYPE not in request.headers.get("Accept", ""):
            landing = _url_value(record) or record_url(stored)
            return web.Response(status=302, headers={"Location": landing})
        work = work_from_record(stored, record)
        path = agency_path(work.agency, encode_path(stored))
        if work.fault == "redirect_http":
            return web.Response(status=302, headers={"Location": self.elsewhere_url + path})
        return web.Response(status=302, headers={"Location": self.agency_url(work.agency) + path})

    def _agency_token(self, agency: str) -> float | None:
        """The agency's own token bucket: None to pass, else seconds until a token."""
        limit = self.agency_rate_limit
        if not limit:
            return None
        burst = max(1.0, math.ceil(limit / 4))
        now = time.monotonic()
        tokens, refilled = self._agency_buckets.get(agency, (burst, now))
        tokens = min(burst, tokens + (now - refilled) * limit)
        if tokens >= 1.0:
            self._agency_buckets[agency] = (tokens - 1.0, now)
            return None
        self._agency_buckets[agency] = (tokens, now)
        return (1.0 - tokens) / limit

    async def _agency(self, agency: str, request: web.BaseRequest) -> web.StreamResponse:
        """One simulated agency's metadata service."""
        raw_path = request.raw_path.partition("?")[0]
        raw_doi = _agency_doi(agency, raw_path)
        try:
            doi = unquote_to_bytes(raw_doi).decode("utf-8") if raw_doi else None
        except UnicodeDecodeError:
            doi = None
        key = ascii_upper(doi) if doi is not None else raw_path
        with self._lock:
            self.agency_requests[agency] += 1
            self.agency_requests_by_key[key] += 1
            self.agency_user_agents[request.headers.get("User-Agent", "")] += 1
            if "Authorization" in request.headers:
                self.agency_authorizations[request.headers["Authorization"]] += 1
            wait = self._agency_token(agency)
            if wait is not None:
                self.agency_throttled += 1
        if wait is not None:
            return _too_many_requests(wait)
        if agency == "nocn":
            return web.Response(status=406, text="Not Acceptable\n")
        found = self._record(doi) if doi is not None else None
        if found is None:
            return web.Response(status=404, text="Not Found\n")
        work = work_from_record(*found)
        if work.agency != agency:
            return web.Response(status=404, text="Not Found\n")
        here = self.agency_url(agency) + agency_path(agency, raw_doi)
        if work.fault == "throttle":
            with self._lock:
                self._throttle_seen[key] += 1
                first = self._throttle_seen[key] <= 2
            if first:
                return web.Response(status=429, text="Slow down\n", headers={"Retry-After": "1"})
        elif work.fault == "redirect_loop":
            return web.Response(status=302, headers={"Location": here})
        elif work.fault == "redirect_offlist":
            return web.Response(status=302, headers={"Location": self.elsewhere_url + "/record"})
        elif work.fault == "huge":
            return await _huge(request)
        elif work.fault is not None:
            status, body, media = hostile_body(work)
            return web.Response(status=status, body=body, headers={"Content-Type": media})
        body = json.dumps(csl_for(work), ensure_ascii=False).encode("utf-8")
        return web.Response(status=200, body=body,
                            headers={"Content-Type": MEDIA_TYPES.get(agency, CSL_MEDIA_TYPE)})

    async def _elsewhere(self, request: web.BaseRequest) -> web.StreamResponse:
        with self._lock:
            self.elsewhere_requests += 1
            self.elsewhere_user_agents[request.headers.get("User-Agent", "")] += 1
        return web.Response(status=200, text="<html>somewhere else</html>",
                            content_type="text/html")

    def _side_door(self, request: web.BaseRequest, path: str, query: str) -> web.Response:
        if path == "/_simulator/stats" and request.method == "GET":
            return _json(200, self.stats(times="times=1" in query.split("&")))
        if path == "/_simulator/reset" and request.method == "POST":
            self.reset_counts()
            return _json(200, {"reset": True})
        return web.Response(status=404, text="unknown simulator endpoint\n")


#: The media type of CSL-JSON (what content negotiation asks for).
CSL_MEDIA_TYPE = "application/vnd.citationstyles.csl+json"


def _bound_port(site: web.TCPSite, default: int) -> int:
    sockets = getattr(site._server, "sockets", None) or []
    return int(sockets[0].getsockname()[1]) if sockets else default


def _url_value(record: Mapping[str, Any]) -> str | None:
    """The record's lowest-index URL value (where the proxy sends a browser)."""
    urls = [v for v in record.get("values", []) if isinstance(v, dict) and v.get("type") == "URL"]
    urls.sort(key=lambda v: v.get("index", 0) if isinstance(v.get("index"), int) else 0)
    for value in urls:
        data = value.get("data")
        if isinstance(data, dict) and isinstance(data.get("value"), str):
            return str(data["value"])
    return None


def _agency_doi(agency: str, raw_path: str) -> str:
    """The percent-encoded DOI in an agency's request path ("" when the path is not one)."""
    if agency == "crossref":
        prefix, suffix = "/v1/works/", "/transform"
        if raw_path.startswith(prefix) and raw_path.endswith(suffix):
            return raw_path[len(prefix):-len(suffix)]
        return ""
    if agency == "datacite":
        prefix = "/application/vnd.citationstyles.csl+json/"
        return raw_path[len(prefix):] if raw_path.startswith(prefix) else ""
    return raw_path[1:]


async def _huge(request: web.BaseRequest) -> web.StreamResponse:
    """A 10 MB JSON body, streamed (a client must stop reading long before the end)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": CSL_MEDIA_TYPE})
    await response.prepare(request)
    try:
        await response.write(b'{"title": "')
        chunk = b"x" * 65536
        for _ in range(160):
            await response.write(chunk)
        await response.write(b'"}')
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client hung up, as it should
        pass
    return response
