"""``DoiProxyHook``: the doi.org proxy REST API as an Airflow connection.

The upstream HTTP provider retries nothing on 429 and has no request rate; Airflow pools cap
concurrency, not rate. This hook hands the work to :mod:`airflow_doi.resolver`, which does both,
and reads its knobs from a ``doi_proxy`` connection:

* ``host``: the proxy base URL (``https://doi.org`` when empty); a bare host name takes its
  scheme from ``schema`` (default ``https``) and ``port`` if set;
* extras ``rate`` (requests/s), ``concurrency``, ``timeout`` (s), ``contact`` (mailto for the
  User-Agent), ``redis_url`` (one pace shared by every worker), and any other
  :class:`~airflow_doi.resolver.ResolverConfig` field by name.

With ``redis_url``, the requests a task sends are also counted in Redis under the task (DAG,
run, task, map index: the same key for each of its tries, :func:`request_count_key`), so the
requests of a try that was killed before it could report them are still known to the next
(:func:`requests_counted`).

Point a deployment at a proxy with an environment variable, e.g.
``AIRFLOW_CONN_DOI_PROXY_DEFAULT='{"conn_type": "doi_proxy", "host": "https://doi.org",
"extra": {"rate": 3, "contact": "data-team@your-library.org"}}'``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_doi.resolver.batch import resolve as resolve_batch
from airflow_doi.resolver.config import DEFAULT_PROXY_URL, ResolverConfig, redact_url

if TYPE_CHECKING:
    from airflow_doi.metadata import MetadataConfig, MetadataResult
    from airflow_doi.resolver import ProgressEvent, ResolutionResult, ResolverStats

__all__ = [
    "DoiProxyHook",
    "redact_url",
    "renamed_conn_id",
    "request_count_key",
    "requests_counted",
    "resolver_config_from_connection",
]

#: A batch's progress callback.
OnProgress = Callable[["ProgressEvent"], None]

_FORM_PREFIX = "extra__doi_proxy__"

_FLOATS = ("rate", "timeout", "backoff_base", "backoff_max", "retry_after_max",
           "breaker_cooldown", "breaker_cooldown_max", "breaker_give_up", "negative_ttl",
           "agency_rate", "metadata_ttl", "list_rate")
_INTS = ("concurrency", "burst", "max_attempts", "breaker_threshold", "pending_per_slot",
         "agency_burst", "max_redirects", "max_csl_bytes", "list_concurrency", "list_size",
         "max_url_length", "snapshot_workers")
_STRINGS = ("contact", "redis_url", "redis_namespace", "request_count_key", "source",
            "crossref_url", "datacite_url")
#: Extras holding a list: a JSON list, or text with commas.
_LISTS = ("metadata_hosts", "types", "indexes", "snapshot")


def base_url_from_parts(
    host: str | None, schema: str | None = None, port: int | None = None
) -> str:
    """The proxy base URL of a connection: a full URL in ``host`` wins, else scheme+host+port."""
    host = (host or "").strip()
    if not host:
        return DEFAULT_PROXY_URL
    if "://" in host:
        return host.rstrip("/")
    scheme = (schema or "").strip() or "https"
    if scheme not in ("http", "https"):
        raise ValueError(f"doi_proxy connection: schema must be http or https, not {scheme!r}")
    authority = f"{host}:{port}" if port and ":" not in host else host
    return f"{scheme}://{authority}".rstrip("/")


def _coerce_extra(name: str, value: Any) -> Any:
    try:
        if name in _FLOATS:
            return float(value)
        if name in _INTS:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
    except (TypeError, ValueError):
        kind = "a number" if name in _FLOATS else "an integer"
        raise ValueError(
            f"doi_proxy connection: extra {name!r} must be {kind}, not {value!r}"
        ) from None
    if name in _STRINGS:
        return str(value)
    if name in _LISTS and isinstance(value, str):
        value = tuple(part.strip() for part in value.split(",") if part.strip())
    if name == "indexes" and isinstance(value, (list, tuple)):
        try:
            return tuple(int(part) for part in value)
        except (TypeError, ValueError):
            raise ValueError(f"doi_proxy connection: extra 'indexes' must be integers, not "
                             f"{value!r}") from None
    return value


def resolver_config_from_connection(
    host: str | None,
    extra: Mapping[str, Any] | None = None,
    *,
    schema: str | None = None,
    port: int | None = None,
    config_class: type[ResolverConfig] | None = None,
    **overrides: Any,
) -> ResolverConfig:
    """Build a :class:`ResolverConfig` from a connection's fields (pure: no Airflow needed).

    Empty extras (``""`` or ``None``, as the UI form saves untouched fields) keep the default;
    unknown extras are an error, so a typo (``"rates"``) never silently keeps the polite
    default. ``overrides`` (operator arguments) win over the connection. One connection
    serves resolution and enrichment: its enrichment extras (``agency_rate``,
    ``metadata_hosts``...) are known to both, and used when ``config_class`` is
    :class:`~airflow_doi.metadata.MetadataConfig`.
    """
    from airflow_doi.metadata.config import MetadataConfig  # aiohttp: on first use only

    config_class = config_class or ResolverConfig
    known = {f.name for f in dataclasses.fields(MetadataConfig)} - {"base_url"}
    settings: dict[str, Any] = {}
    for name, value in (extra or {}).items():
        name = name.removeprefix(_FORM_PREFIX)  # how older UIs store form fields
        if value is None or value == "":
            continue
        if name not in known:
            raise ValueError(
                f"doi_proxy connection: unknown extra {name!r} (known: {', '.join(sorted(known))})"
            )
        settings[name] = _coerce_extra(name, value)
    unknown = sorted(set(overrides) - known - {"base_url"})
    if unknown:
        raise TypeError(f"unknown resolver option(s): {', '.join(unknown)}")
    settings.update({k: v for k, v in overrides.items() if v is not None})
    base_url = settings.pop("base_url", None) or base_url_from_parts(host, schema, port)
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"doi_proxy connection: host must be an http(s) URL, not {redact_url(base_url)!r}"
        )
    own = {f.name for f in dataclasses.fields(config_class)}
    return config_class(base_url=base_url, **{k: v for k, v in settings.items() if k in own})


def request_count_key(task: str) -> str:
    """The Redis key counting the requests of ``task`` (``dag/run/task/map index``)."""
    return f"airflow-doi:requests:{task}"


def requests_counted(config: ResolverConfig) -> int | None:
    """The requests counted so far under the configuration's ``request_count_key`` (every try
    of the task, killed ones too), or None without ``redis_url`` or a key."""
    if not config.redis_url or not config.request_count_key:
        return None
    from redis import Redis  # the resolve extra

    with Redis.from_url(config.redis_url) as client:
        return int(client.get(config.request_count_key) or 0)


def _counted(config: ResolverConfig) -> ResolverConfig:
    """``config`` counting its requests under the running task, when it shares a pace in
    Redis and names no key itself (outside a task: as it is)."""
    if not config.redis_url or config.request_count_key:
        return config
    from airflow_doi.provider.hooks.due_keys import running_task

    task = running_task()
    return config if task is None else config.replace(request_count_key=request_count_key(task))


def renamed_conn_id(resolver_conn_id: str, doi_proxy_conn_id: str | None, where: str) -> str:
    """``resolver_conn_id``, or the deprecated ``doi_proxy_conn_id`` when that was given.

    Airflow masks the values of names holding "proxy" in the UI and logs (``'***'``), so the
    parameter was renamed; the old name works, with a deprecation warning.
    """
    if doi_proxy_conn_id is None:
        return resolver_conn_id
    warnings.warn(
        f"{where}: doi_proxy_conn_id is deprecated (Airflow masks it as '***'): pass "
        "resolver_conn_id instead", AirflowProviderDeprecationWarning, stacklevel=3,
    )
    return doi_proxy_conn_id


class DoiProxyHook(BaseHook):
    """Resolve DOIs through the proxy named by a ``doi_proxy`` connection.

    :param resolver_conn_id: the connection; when the default id is not defined at all, the
        public proxy ``https://doi.org`` with polite defaults is used. ``doi_proxy_conn_id`` is
        its deprecated name (Airflow masks values of names holding "proxy" as ``'***'``).
    :param overrides: :class:`ResolverConfig` fields that win over the connection.
    """

    conn_name_attr = "resolver_conn_id"
    default_conn_name = "doi_proxy_default"
    conn_type = "doi_proxy"
    hook_name = "DOI proxy (doi.org REST API)"

    def __init__(self, resolver_conn_id: str = default_conn_name, *,
                 doi_proxy_conn_id: str | None = None, **overrides: Any) -> None:
        super().__init__()
        self.resolver_conn_id = renamed_conn_id(resolver_conn_id, doi_proxy_conn_id,
                                                "DoiProxyHook")
        self.overrides = overrides
        self._config: ResolverConfig | None = None
        self._metadata_config: MetadataConfig | None = None

    def get_config(self) -> ResolverConfig:
        """The resolver configuration of the connection (read once per hook)."""
        if self._config is None:
            self._config = _counted(self._build(ResolverConfig))
        return self._config

    def get_metadata_config(self) -> MetadataConfig:
        """The enrichment configuration of the same connection: the proxy's settings plus
        its metadata extras (``agency_rate``, ``metadata_hosts``...)."""
        if self._metadata_config is None:
            from airflow_doi.metadata.config import MetadataConfig  # aiohttp: on first use only

            built = _counted(self._build(MetadataConfig))
            assert isinstance(built, MetadataConfig)
            self._metadata_config = built
        return self._metadata_config

    def _build(self, config_class: type[ResolverConfig]) -> ResolverConfig:
        try:
            connection = self.get_connection(self.resolver_conn_id)
        except AirflowNotFoundException:
            if self.resolver_conn_id != self.default_conn_name:
                raise
            self.log.info("No connection %r: using %s", self.resolver_conn_id, DEFAULT_PROXY_URL)
            return resolver_config_from_connection(None, config_class=config_class,
                                                   **self.overrides)
        return resolver_config_from_connection(
            connection.host, connection.extra_dejson, schema=connection.schema,
            port=connection.port, config_class=config_class, **self.overrides,
        )

    def fetch_metadata(self, values: Iterable[object], *, progress: OnProgress | None = None,
                       stats: ResolverStats | None = None,
                       agencies: Mapping[str, str | None] | None = None,
                       ) -> list[MetadataResult]:
        """One :class:`~airflow_doi.metadata.MetadataResult` per value, in order (the agencies'
        batch APIs and DOI content negotiation through the same proxy: see
        :func:`airflow_doi.metadata.afetch`, whose ``agencies`` these are); never raises for a
        row, no file cache."""
        from airflow_doi.metadata import fetch  # aiohttp: on first use only

        return fetch(list(values), config=self.get_metadata_config(), progress=progress,
                     stats=stats, agencies=agencies)

    def get_conn(self) -> ResolverConfig:
        """The hook's "connection" is its resolver configuration: sessions live per batch."""
        return self.get_config()

    def resolve(self, values: Iterable[object], *, progress: OnProgress | None = None,
                stats: ResolverStats | None = None) -> list[ResolutionResult]:
        """One :class:`ResolutionResult` per value, in order; never raises for a row.

        No file cache is used: callers that persist results (the resolve operator's table)
        are the cache, and a second one would only hide expiry decisions.
        """
        return resolve_batch(list(values), config=self.get_config(), progress=progress, stats=stats)

    def test_connection(self) -> tuple[bool, str]:
        """Resolve the DOI Handbook's own DOI (``10.1000/182``) through the proxy."""
        try:
            (result,) = self.resolve(["10.1000/182"])
        except Exception as error:
            return False, str(error)
        if result.status == "error":
            return False, f"{redact_url(self.get_config().base_url)}: {result.error}"
        return True, f"{redact_url(self.get_config().base_url)} answered ({result.status})"
