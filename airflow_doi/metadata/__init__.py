"""Registry metadata for DOIs through doi.org content negotiation (CSL-JSON), typed.

``fetch``/``afetch`` take any iterable of values (any DOI form, or junk) and return one
:class:`MetadataResult` per value, in order, with typed columns (title, type, issued date and
year, journal, ISSN, publisher, license, retractions and corrections...). Requires the
``resolve`` extra, like :mod:`airflow_doi.resolver`, whose machinery it shares: rate limits
(one per host), ``Retry-After``, retry budget, breaker, the SQLite cache and its claims.
"""

from __future__ import annotations

from airflow_doi.metadata.batch import afetch, fetch
from airflow_doi.metadata.config import DEFAULT_METADATA_HOSTS, MetadataConfig
from airflow_doi.metadata.csl import CSL_MEDIA_TYPE, FIELDS, typed_fields
from airflow_doi.metadata.result import (
    METADATA_COLUMNS,
    METADATA_STATUSES,
    MetadataResult,
    MetadataStats,
)

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
