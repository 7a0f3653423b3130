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
  (:attr:`ProxySimulator.metadata_hosts`: free ports, or ``agency_base_port`` and the ports
  after it, so that a deployment's allowlist stays valid across restarts); without it, a 302
  to the record's URL value (the landing page); 404 for a DOI nobody registered. Counted in
  ``cn_requests``, not in ``request_count``, and under the same rate limit.
* the agencies' batch APIs, on their ports: Crossref's list query ``GET /works?filter=doi:A,
  doi:B,...&rows=N`` (its records as Crossref's REST API writes them, the rate limit announced
  in ``x-rate-limit-limit`` / ``x-rate-limit-interval``) and DataCite's ``GET /dois?query=
  doi:("A" OR "B")`` (JSON:API records), under a bucket of their own (``list_rate_limit``,
  429 past it), with faults: records left out, bodies cut short, records of the wrong shape.
  Which RA? names each work's agency.

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
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, unquote_to_bytes

from aiohttp import web

from airflow_doi.metadata.config import CROSSREF_POOLS
from airflow_doi.presentation import encode_path
from airflow_doi.resolver.agencies import (
    AGENCIES,
    MEDIA_TYPES,
    RA_NAMES,
    agency_path,
    crossref_item_for,
    csl_for,
    datacite_record_for,
    hostile_body,
    work_from_record,
)
from airflow_doi.resolver.agencies import expected_metadata as expected_of_work
from airflow_doi.syntax import SHORT_DOI_PREFIX, ascii_upper, validate

__all__ = ["Faults", "ProxySimulator", "make_records", "read_records", "record_url",
           "short_doi_of"]


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
    #: The agencies' batch APIs (list queries): leave out every Nth record a query asked for
    #: that the agency holds; cut every Nth answer's body short; put a record of the wrong
    #: shape (not an object) in place of every Nth record.
    list_missing_every: int | None = None
    list_truncated_every: int | None = None
    list_bad_record_every: int | None = None
    #: Which RA?: call every Nth DOI asked (over the run) an ``Invalid DOI`` although it is
    #: registered (the real proxy does so for DOIs it parses otherwise than the handle API).
    which_ra_invalid_every: int | None = None
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


def read_records(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The records a ``--records`` file holds, in either form:

    - a JSON object of handle -> record (a list of values, or an object with ``values``);
    - a list of DOIs: one a line, in any presentation form (``doi:``, a doi.org URL...),
      blank lines and lines starting with ``#`` skipped (what the demo ships,
      ``examples/data/simulated_registry.txt``), or a JSON array of them. Each gets
      :func:`make_records`' record, under its normalized DOI.

    Raises ``ValueError`` saying what is wrong and where (the line of a cell that is not a
    DOI), ``OSError`` when the file cannot be read."""
    text = Path(path).read_bytes().decode("utf-8-sig", errors="strict")
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ValueError(f"starts like JSON but is not JSON ({error})") from None
        if isinstance(data, dict):
            return data
        lines = [(number, item) for number, item in enumerate(data, 1)]
        where = "item"
    else:
        lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
                 if line.strip() and not line.lstrip().startswith("#")]
        where = "line"
    dois = []
    for number, value in lines:
        found = validate(value) if isinstance(value, str) else None
        if found is None or not found.valid or found.doi is None:
            reason = found.reason if found is not None else "not text"
            raise ValueError(f"{where} {number}, {value!r}, is not a DOI ({reason})")
        dois.append(found.doi)
    if not dois:
        raise ValueError("holds no DOI")
    return make_records(dois)


def _load(
    records: Mapping[str, Any] | str | os.PathLike[str] | None,
) -> dict[str, tuple[str, dict[str, Any]]]:
    if records is None:
        data: Mapping[str, Any] = {}
    elif isinstance(records, Mapping):
        data = records
    else:
        try:
            data = read_records(records)
        except ValueError as error:
            raise ValueError(f"{records}: {error}") from None
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
        agency_base_port: int = 0,
        list_rate_limit: float | None = None,
        cursor_ttl: float = 300.0,
        crossref_pools: bool = False,
    ) -> None:
        #: Crossref's pools since December 2025 (:data:`~airflow_doi.metadata.config.
        #: CROSSREF_POOLS`): its list queries limited (and announced, with ``x-api-pool``) by
        #: the pool a contact address puts the client in, whatever ``list_rate_limit`` says.
        self.crossref_pools = crossref_pools
        self.records = _load(records)
        #: Seconds a Crossref deep-paging cursor lives unused (Crossref's: about five minutes);
        #: an expired or unknown one is answered 404.
        self.cursor_ttl = cursor_ttl
        self._cursors: dict[str, tuple[str, int, float]] = {}
        #: List queries each agency's batch API answers in any second before 429 (a limit
        #: of its own), announced on Crossref's answers as its ``x-rate-limit-limit`` /
        #: ``x-rate-limit-interval``.
        self.list_rate_limit = list_rate_limit
        #: The first agency's port, the others' after it in :data:`AGENCIES` order, then the
        #: "elsewhere" server's; 0 picks free ports.
        self.agency_base_port = agency_base_port
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
            #: Requests to the proxy's API: handle lookups and Which RA? (``ra_requests``).
            self.request_count = 0
            self.ra_requests = 0
            self._which_ra_asked = 0
            #: The valid DOIs Which RA? requests named, per key.
            self.which_ra_by_key: Counter[str] = Counter()
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
            #: The batch APIs: list queries and the DOIs they named, per agency; the queries
            #: answered 429; those sent over the announced limit (more than it in the
            #: interval before them); each query's arrival time.
            self.list_requests: Counter[str] = Counter()
            self.list_dois: Counter[str] = Counter()
            self.list_dois_by_key: Counter[str] = Counter()
            self.list_throttled = 0
            self.list_over_announced = 0
            self.list_times: dict[str, list[float]] = {}
            self._list_answered: dict[str, list[float]] = {}
            self._list_records = 0
            #: The update streams: pages asked per agency, records they sent, 404s for
            #: expired cursors.
            self.stream_pages: Counter[str] = Counter()
            self.stream_records: Counter[str] = Counter()
            self.expired_cursors = 0

    def stats(self, *, times: bool = False) -> dict[str, Any]:
        with self._lock:
            document: dict[str, Any] = {
                "requests": self.request_count,
                "ra_requests": self.ra_requests,
                "by_key": dict(self.requests_by_key),
                "throttled": self.throttled,
                "errors": self.errors,
                "dropped": self.dropped,
                "bad_json": self.bad_json,
                "slow": self.slow,
                "cn_requests": self.cn_requests,
                "agency_requests": dict(self.agency_requests),
                "agency_throttled": self.agency_throttled,
                "list_requests": dict(self.list_requests),
                "list_dois": dict(self.list_dois),
                "list_throttled": self.list_throttled,
                "list_over_announced": self.list_over_announced,
                "stream_pages": dict(self.stream_pages),
                "stream_records": dict(self.stream_records),
                "expired_cursors": self.expired_cursors,
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

    @property
    def crossref_url(self) -> str:
        """The simulated Crossref REST API (its list queries): ``crossref_url``."""
        return self.agency_url("crossref")

    @property
    def datacite_url(self) -> str:
        """The simulated DataCite REST API (its ``/dois`` batch lookup): ``datacite_url``."""
        return self.agency_url("datacite")

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

    def revise(self, doi: str, when: datetime | str, **changes: Any) -> None:
        """Change a registered work at ``when`` (its record's ``updated``): every path serves
        the new version from now on, and the agencies' update streams list it from that
        time. ``changes`` are :class:`~airflow_doi.resolver.agencies.Work` fields (``title``,
        ``updated_by``...)."""
        found = self._record(doi)
        if found is None:
            raise KeyError(f"{doi} is not registered here")
        stored, record = found
        work = replace(work_from_record(stored, record), **changes)
        revised = {**record, "work": work,
                   "updated": when if isinstance(when, str) else _iso(when)}
        with self._lock:
            self.records[ascii_upper(stored)] = (stored, revised)

    def updated_since(self, agency: str, since: str) -> list[tuple[str, Any]]:
        """``(updated, work)`` of the agency's registered works changed on or after the day
        ``since``, in the stream's order (time, then key)."""
        found = []
        for stored, record in list(self.records.values()):
            when = record.get("updated")
            if not isinstance(when, str) or when[:10] < since[:10]:
                continue
            work = work_from_record(stored, record)
            if work.agency == agency and work.fault is None:
                found.append((when, ascii_upper(stored), work))
        return [(when, work) for when, _, work in sorted(found, key=lambda f: f[:2])]

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
            base = self.agency_base_port
            for number, name in enumerate(AGENCIES):
                self._agency_ports[name] = await self._serve(
                    lambda request, name=name: self._agency(name, request),
                    base + number if base else 0)
            self._elsewhere_port = await self._serve(
                self._elsewhere, base + len(AGENCIES) if base else 0)

    async def _serve(self, handler: Any, port: int = 0) -> int:
        runner = web.ServerRunner(web.Server(handler, access_log=None), handle_signals=False)
        await runner.setup()
        self._agency_runners.append(runner)
        site = web.TCPSite(runner, self.host, port, reuse_address=True)
        await site.start()
        return _bound_port(site, port)

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
            record = make_records([handle])[handle]
            record["ra"] = RA_NAMES[work_from_record(handle, record).agency]
            return handle, record
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
            else:
                self.ra_requests += 1
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
            with self._lock:
                self._which_ra_asked += 1
                asked = self._which_ra_asked
                self.which_ra_by_key[ascii_upper(doi)] += 1
            every = self.faults.which_ra_invalid_every
            if every and asked % every == 0:
                entries.append({"DOI": doi, "status": "Invalid DOI"})
                continue
            found = self._record(doi)
            if found is None:
                entries.append({"DOI": doi, "status": "DOI does not exist"})
            else:
                entries.append({"DOI": found[0], "RA": _ra_of(*found)})
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
        raw_path, _, raw_query = request.raw_path.partition("?")
        if (agency, raw_path) in (("crossref", "/works"), ("datacite", "/dois")):
            return await self._agency_list(agency, request, raw_query)
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

    def _list_limit(self, agency: str, request: web.BaseRequest,
                    raw_query: str) -> tuple[float | None, str]:
        """``(list queries a second, pool)`` of a batch API query: with ``crossref_pools``,
        Crossref's by the pool a contact address (``mailto``) puts the client in; else
        ``list_rate_limit`` for every agency."""
        if agency == "crossref" and self.crossref_pools:
            polite = ("mailto=" in raw_query
                      or "mailto:" in request.headers.get("User-Agent", ""))
            pool = "polite" if polite else "public"
            return CROSSREF_POOLS[pool][1], pool
        return self.list_rate_limit, ""

    def _list_token(self, agency: str, now: float, limit: float | None = None,
                    pool: str = "") -> float | None:
        """The batch API's limit as it announces it, no more: at most ``limit`` queries
        answered in any second (those refused do not count). None to pass, else the seconds
        until the oldest answered query of the last second leaves it."""
        if not limit:
            return None
        answered = self._list_answered.setdefault(f"{agency}{pool}", [])
        while answered and now - answered[0] >= 1.0:
            answered.pop(0)
        if len(answered) + 1 <= limit:
            answered.append(now)
            return None
        return 1.0 - (now - answered[0])

    def _announced(self, limit: float | None = None, pool: str = "") -> dict[str, str]:
        """Crossref's announcement of its limit (and of the pool it put the client in), on
        every answer of its batch API."""
        limit = self.list_rate_limit if limit is None else limit
        if not limit:
            return {}
        said = ({"x-api-pool": pool, "x-rate-limit-type": "list"} if pool else {})
        if limit == int(limit):
            return {**said, "x-rate-limit-limit": str(int(limit)), "x-rate-limit-interval": "1s"}
        return {**said, "x-rate-limit-limit": str(round(limit * 10)),
                "x-rate-limit-interval": "10s"}

    async def _agency_list(self, agency: str, request: web.BaseRequest,
                           raw_query: str) -> web.StreamResponse:
        """A batch API: Crossref's ``/works?filter=doi:...`` or DataCite's
        ``/dois?query=doi:(...)``, with the faults of :class:`Faults`; or a page of its update
        stream (:meth:`_stream_page`)."""
        since = _stream_since(agency, raw_query)
        dois = _listed_dois(agency, raw_query) if since is None else []
        now = time.monotonic()
        limit, pool = self._list_limit(agency, request, raw_query)
        headers = self._announced(limit, pool) if agency == "crossref" else {}
        with self._lock:
            self.list_requests[agency] += 1
            number = self.list_requests[agency]
            self.list_dois[agency] += len(dois)
            for doi in dois:
                self.list_dois_by_key[ascii_upper(doi)] += 1
            self.agency_user_agents[request.headers.get("User-Agent", "")] += 1
            times = self.list_times.setdefault(agency, [])
            times.append(now)
            if headers:  # an announced limit: a query past it is one over it
                recent = sum(1 for t in times if now - t < 1.0)
                if recent > (limit or 0):
                    self.list_over_announced += 1
            wait = self._list_token(agency, now, limit, pool)
            if wait is not None:
                self.list_throttled += 1
        if wait is not None:
            return web.Response(status=429, text="Too many list queries\n",
                                headers={**headers, **_retry_after(wait)})
        if self.latency:
            await asyncio.sleep(self.latency)
        if since is not None:
            return self._stream_page(agency, request, raw_query, since, headers)
        faults = self.faults
        records: list[Any] = []
        field = _datacite_field(raw_query) if agency == "datacite" else None
        for doi in dict.fromkeys(dois):
            found = self._record(doi)
            if found is None:
                continue
            # DataCite's index is case-sensitive (datacite#2115): "doi" holds the DOI upper-
            # cased and "id" lower-cased; a term in another case matches nothing.
            if field == "doi" and doi != found[0].upper():
                continue
            if field == "id" and doi != found[0].lower():
                continue
            work = work_from_record(*found)
            if work.agency != agency or work.fault is not None:
                continue  # a work whose fault is in its single answer: not in lists
            with self._lock:
                self._list_records += 1
                seen = self._list_records
            if faults.list_missing_every and seen % faults.list_missing_every == 0:
                continue
            if faults.list_bad_record_every and seen % faults.list_bad_record_every == 0:
                records.append(["not", "a", "record", work.doi])
                continue
            records.append(crossref_item_for(work) if agency == "crossref"
                           else datacite_record_for(work))
        if agency == "crossref":
            document: dict[str, Any] = {
                "status": "ok", "message-type": "work-list", "message-version": "1.0.0",
                "message": {"facets": {}, "total-results": len(records), "items": records,
                            "items-per-page": len(dois), "query": {"start-index": 0,
                                                                  "search-terms": None}},
            }
            media = "application/json"
        else:
            document = {"data": records, "meta": {"total": len(records), "totalPages": 1,
                                                  "page": 1},
                        "links": {"self": str(request.url)}}
            media = "application/vnd.api+json"
        body = json.dumps(document, ensure_ascii=False).encode("utf-8")
        if faults.list_truncated_every and number % faults.list_truncated_every == 0:
            body = body[: len(body) // 2]
        return web.Response(status=200, body=body,
                            headers={**headers, "Content-Type": media})

    def _stream_page(self, agency: str, request: web.BaseRequest, raw_query: str, since: str,
                     headers: Mapping[str, str]) -> web.Response:
        """One page of an agency's update stream: Crossref's deep paging (``rows`` at most
        1,000; ``cursor=*`` then each ``next-cursor``, which lives ``cursor_ttl`` seconds
        unused, 404 after) or DataCite's cursor paging (``page[size]`` at most 1,000;
        ``page[cursor]=1`` then the cursor in ``links.next``)."""
        params = dict(parse_qsl(raw_query, keep_blank_values=True))
        size_name = "rows" if agency == "crossref" else "page[size]"
        cursor_name = "cursor" if agency == "crossref" else "page[cursor]"
        size_text = params.get(size_name, "20")
        if not size_text.isdigit() or not 0 < int(size_text) <= 1000:
            return _json(400, {"status": "failed", "message-type": "validation-failure",
                               "message": [{"type": "integer-not-valid", "value": size_text,
                                            "message": f"{size_name} must be 1 to 1000"}]},
                         headers)
        size, cursor, now = int(size_text), params.get(cursor_name), time.monotonic()
        start = {"crossref": "*", "datacite": "1"}[agency]
        if cursor is None or cursor == start:
            offset = 0
        else:
            with self._lock:
                held = self._cursors.get(f"{agency}:{cursor}")
                expired = held is None or held[0] != since or (
                    agency == "crossref" and now - held[2] > self.cursor_ttl)
                if expired:
                    self.expired_cursors += 1
            if expired or held is None:
                return _json(404, {"status": "error", "message-type": "exception",
                                   "message": "Resource not found."}, headers)
            offset = held[1]
        changed = self.updated_since(agency, since)
        page = changed[offset:offset + size]
        # Opaque, and holding "+", "/" and "=" as Crossref's do: a client must percent-encode
        # it (a bare "+" reads as a space, and the cursor is then unknown: 404).
        token = "Ao+/" + base64.b64encode(hashlib.sha256(
            f"{agency}{since}{offset + size}{now}".encode()).digest()[:22]).decode()
        with self._lock:
            self._cursors[f"{agency}:{token}"] = (since, offset + size, now)
            self.stream_pages[agency] += 1
            self.stream_records[agency] += len(page)
        if agency == "crossref":
            items = [_dated(crossref_item_for(work), when) for when, work in page]
            document: dict[str, Any] = {
                "status": "ok", "message-type": "work-list", "message-version": "1.0.0",
                "message": {"facets": {}, "total-results": len(changed), "items": items,
                            "items-per-page": size, "next-cursor": token,
                            "query": {"start-index": 0, "search-terms": None}}}
            media = "application/json"
        else:
            data = [datacite_record_for(work) for _, work in page]
            for record, (when, _) in zip(data, page, strict=True):
                record["attributes"]["updated"] = when
            links: dict[str, str] = {"self": str(request.url)}
            if offset + size < len(changed):
                links["next"] = (f"{self.agency_url(agency)}/dois?query="
                                 f"{quote(params.get('query', ''), safe='')}&page%5Bsize%5D="
                                 f"{size}&page%5Bcursor%5D={quote(token, safe='')}")
            document = {"data": data, "meta": {"total": len(changed)}, "links": links}
            media = "application/vnd.api+json"
        return web.Response(status=200, body=json.dumps(document).encode("utf-8"),
                            headers={**headers, "Content-Type": media})

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


def _ra_of(doi: str, record: Mapping[str, Any]) -> str:
    """What Which RA? says of a record: its work's agency when the record names one (or a
    work), else its ``ra``."""
    if isinstance(record.get("agency"), str) or "work" in record or "ra" not in record:
        return RA_NAMES.get(work_from_record(doi, record).agency, "Unknown")
    return str(record["ra"])


#: A quoted term of DataCite's query language (``\"`` and ``\\`` escaped inside).
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _listed_dois(agency: str, raw_query: str) -> list[str]:
    """The DOIs a list query names (Crossref: each ``doi:`` filter; DataCite: each quoted
    term of ``query``), as the agencies read a query string (``+`` is a space)."""
    params = parse_qsl(raw_query, keep_blank_values=True)
    if agency == "crossref":
        raw = next((v for k, v in _raw_params(raw_query) if k == "filter"), "")
        return [unquote_plus(part[4:]) for part in raw.split(",") if part.startswith("doi:")]
    query = next((v for k, v in params if k == "query"), "")
    return [re.sub(r"\\(.)", r"\1", term) for term in _QUOTED.findall(query)]


_UPDATED = re.compile(r"updated:\[(\d{4}-\d{2}-\d{2})[^ ]*\s+TO\s+\*\]")


def _stream_since(agency: str, raw_query: str) -> str | None:
    """The day an update stream request starts from (Crossref's ``from-update-date`` filter,
    DataCite's ``updated:[D TO *]`` query), or None for any other request."""
    params = parse_qsl(raw_query, keep_blank_values=True)
    if agency == "crossref":
        raw = next((v for k, v in params if k == "filter"), "")
        for part in raw.split(","):
            if part.startswith("from-update-date:"):
                return part.partition(":")[2][:10]
        return None
    query = next((v for k, v in params if k == "query"), "")
    found = _UPDATED.search(query)
    return found.group(1) if found else None


def _dated(item: dict[str, Any], when: str) -> dict[str, Any]:
    """A Crossref record as the stream sends it: indexed and deposited when it changed."""
    stamp = {"date-parts": [[int(when[:4]), int(when[5:7]), int(when[8:10])]],
             "date-time": when}
    return {**item, "indexed": stamp, "deposited": stamp}


def _iso(when: datetime) -> str:
    moment = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _datacite_field(raw_query: str) -> str | None:
    """The field a DataCite batch lookup names (``doi`` or ``id``: ``doi:("A" OR "B")``)."""
    query = next((v for k, v in parse_qsl(raw_query, keep_blank_values=True) if k == "query"),
                 "")
    found = re.match(r"\s*(\w+)\s*:", query)
    return found.group(1) if found else None


def _raw_params(raw_query: str) -> list[tuple[str, str]]:
    """``name=value`` pairs of a query string, values still percent-encoded (Crossref splits a
    filter on its raw commas before decoding)."""
    return [tuple(pair.partition("=")[::2]) for pair in raw_query.split("&") if pair]  # type: ignore[misc]


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
