"""Registry metadata for DOIs: the agencies' batch APIs and doi.org content negotiation, typed.

``fetch``/``afetch`` take any iterable of values (any DOI form, or junk) and return one
:class:`MetadataResult` per value, in order, with typed columns (title, type, issued date and
year, journal, ISSN, publisher, license, retractions and corrections...): Crossref's and
DataCite's keys from their batch APIs, many a request, the others through content negotiation
(:mod:`airflow_doi.metadata.sources`). Requires the ``resolve`` extra, like
:mod:`airflow_doi.resolver`, whose machinery it shares: paces (one per host and kind of
request), ``Retry-After``, retry budget, breaker, the SQLite cache and its claims. The names
are imported on first use, so the configuration and the record readers (``config``, ``csl``,
``crossref``, ``datacite``) need no extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_doi._lazy import lazy_getattr

__all__ = [
    "CSL_MEDIA_TYPE",
    "DEFAULT_METADATA_HOSTS",
    "FIELDS",
    "METADATA_COLUMNS",
    "METADATA_STATUSES",
    "MetadataConfig",
    "MetadataResult",
    "MetadataStats",
    "afetch",
    "fetch",
    "typed_fields",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_doi.metadata.batch import afetch, fetch
    from airflow_doi.metadata.config import DEFAULT_METADATA_HOSTS, MetadataConfig
    from airflow_doi.metadata.csl import CSL_MEDIA_TYPE, FIELDS, typed_fields
    from airflow_doi.metadata.result import (
        METADATA_COLUMNS,
        METADATA_STATUSES,
        MetadataResult,
        MetadataStats,
    )

_LAZY: dict[str, str] = {
    "afetch": "airflow_doi.metadata.batch",
    "fetch": "airflow_doi.metadata.batch",
    "DEFAULT_METADATA_HOSTS": "airflow_doi.metadata.config",
    "MetadataConfig": "airflow_doi.metadata.config",
    "CSL_MEDIA_TYPE": "airflow_doi.metadata.csl",
    "FIELDS": "airflow_doi.metadata.csl",
    "typed_fields": "airflow_doi.metadata.csl",
    "METADATA_COLUMNS": "airflow_doi.metadata.result",
    "METADATA_STATUSES": "airflow_doi.metadata.result",
    "MetadataResult": "airflow_doi.metadata.result",
    "MetadataStats": "airflow_doi.metadata.result",
}

__getattr__ = lazy_getattr(__name__, _LAZY, globals())
