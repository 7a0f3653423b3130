"""Airflow provider metadata for airflow-doi (entry point group ``apache_airflow_provider``).

Airflow calls :func:`get_provider_info` while it discovers providers, long before any task
runs, so this module imports nothing heavy: not Airflow, not the hooks, only the default proxy
URL (:mod:`airflow_doi.resolver.config`, standard library only). The connection forms are
declared here (``conn-fields`` / ``ui-field-behaviour``, the Airflow 3.2+ schema) so the UI can
draw them without importing the hook classes.
"""

from __future__ import annotations

from typing import Any

from airflow_doi.resolver.config import DEFAULT_PROXY_URL

__all__ = ["get_provider_info"]

_NULLABLE_NUMBER = ["number", "null"]
_NULLABLE_INTEGER = ["integer", "null"]
_NULLABLE_STRING = ["string", "null"]


def _field(label: str, kind: list[str], description: str | None = None,
           **schema: Any) -> dict[str, Any]:
    """One form field: its label, its JSON schema (``kind`` and ``schema``), its help text."""
    field = {"label": label, "schema": {"type": kind, **schema}}
    return field if description is None else {**field, "description": description}


def _connection_type(hook: str, name: str, conn_type: str, fields: dict[str, Any], *,
                     host: str, host_placeholder: str) -> dict[str, Any]:
    """A connection type whose form shows ``host`` (relabelled) and the extras ``fields``."""
    return {
        "hook-class-name": hook,
        "hook-name": name,
        "connection-type": conn_type,
        "conn-fields": fields,
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "login", "password", "port", "extra"],
            "relabeling": {"host": host},
            "placeholders": {"host": host_placeholder},
        },
    }


def _doi_proxy_connection() -> dict[str, Any]:
    return _connection_type(
        "airflow_doi.provider.hooks.doi_proxy.DoiProxyHook", "DOI proxy (doi.org REST API)",
        "doi_proxy", {
            "rate": _field(
                "Rate (requests/s)", _NULLABLE_NUMBER,
                "Requests per second sent to the proxy by this process (or by every process "
                "sharing the Redis limit below).", default=3.0, exclusiveMinimum=0),
            "concurrency": _field("Concurrency", _NULLABLE_INTEGER,
                                  "Requests in flight at most.", default=4, minimum=1),
            "timeout": _field(
                "Timeout (s)", _NULLABLE_NUMBER,
                "Seconds per request before it counts as a failed attempt.", default=10.0,
                exclusiveMinimum=0),
            "contact": _field(
                "Contact address", _NULLABLE_STRING,
                "Your team's e-mail address, put in the User-Agent (mailto:), as the proxy's "
                "and the agencies' operators ask of bulk clients; it puts the client in "
                "Crossref's polite pool. A placeholder (you@example.org) is refused."),
            "redis_url": _field(
                "Redis URL (shared rate limit)", _NULLABLE_STRING,
                "redis://host:port/db: share one rate limit across workers."),
            "agency_rate": _field(
                "Agency rate (requests/s, enrichment)", _NULLABLE_NUMBER,
                "Requests per second to each registration agency's metadata host "
                "(DoiEnrichOperator); the proxy keeps its own rate above. Empty: Crossref's "
                "pool's pace at Crossref (10/s with a contact, its polite pool; 5 without), "
                "2 elsewhere.", exclusiveMinimum=0),
            "metadata_hosts": _field(
                "Metadata hosts (enrichment allowlist)", _NULLABLE_STRING,
                "Comma-separated hosts a content negotiation redirect may lead to (https "
                "only), or origins such as http://127.0.0.1:8081; empty: the agencies' own "
                "(api.crossref.org, api.datacite.org, data.crosscite.org...)."),
            "source": _field(
                "Metadata source (enrichment)", _NULLABLE_STRING,
                "auto: Crossref's and DataCite's keys from their batch APIs, many DOIs a "
                "request, the others by content negotiation; negotiation: content "
                "negotiation for every key.", default="auto"),
            "list_rate": _field(
                "List query rate (requests/s, enrichment)", _NULLABLE_NUMBER,
                "List queries per second to each batch API (Crossref, DataCite), lowered to "
                "what the server announces. Empty: 3/s at Crossref with a contact (its "
                "polite pool), 1 without; 1 at DataCite.", exclusiveMinimum=0),
            "crossref_url": _field(
                "Crossref REST API", _NULLABLE_STRING,
                "Where Crossref's list queries go; it must be on the allowlist above.",
                default="https://api.crossref.org"),
            "datacite_url": _field(
                "DataCite REST API", _NULLABLE_STRING,
                "Where DataCite's batch lookups go; it must be on the allowlist above.",
                default="https://api.datacite.org"),
        },
        host="Proxy base URL", host_placeholder=DEFAULT_PROXY_URL,
    )


def _duckdb_connection() -> dict[str, Any]:
    # Not "duckdb": that type is the DuckDB provider's (airflow-provider-duckdb); a
    # connection of type duckdb gets its hook when installed, and ours otherwise.
    return _connection_type(
        "airflow_doi.provider.hooks.duckdb.DuckDbHook", "DuckDB file (airflow-doi)", "doi_duckdb",
        {
            "read_only": _field("Read only", ["boolean", "null"], default=False),
            "lock_wait": _field(
                "Lock wait (s)", _NULLABLE_NUMBER,
                "Seconds a task waits for the file while another process writes it (DuckDB "
                "lets one process write a file at a time); 0 fails at once.", default=600,
                minimum=0),
        },
        host="Database file", host_placeholder="/path/to/catalogue.duckdb (empty: in-memory)",
    )


def get_provider_info() -> dict[str, Any]:
    """The provider description Airflow validates against ``provider_info.schema.json``."""
    return {
        "package-name": "airflow-doi",
        "name": "DOI (ANSI/NISO Z39.84)",
        "description": "Normalize, validate, resolve and enrich DOIs in SQL tables: a rate-limited "
        "`doi.org` proxy hook, catalogue operators and a DuckDB hook.",
        "integrations": [
            {
                "integration-name": "DOI",
                "external-doc-url": "https://www.doi.org/the-identifier/resources/factsheets/doi-resolution-documentation",
                "tags": ["protocol"],
            }
        ],
        "hooks": [
            {
                "integration-name": "DOI",
                "python-modules": [
                    "airflow_doi.provider.hooks.doi_proxy", "airflow_doi.provider.hooks.duckdb",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "DOI",
                "python-modules": [
                    "airflow_doi.provider.operators.normalize",
                    "airflow_doi.provider.operators.validate",
                    "airflow_doi.provider.operators.resolve",
                    "airflow_doi.provider.operators.enrich",
                ],
            }
        ],
        "connection-types": [_doi_proxy_connection(), _duckdb_connection()],
    }
