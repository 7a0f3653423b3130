"""Airflow provider metadata for airflow-doi (entry point group ``apache_airflow_provider``).

Airflow calls :func:`get_provider_info` while it discovers providers, long before any task
runs, so this module imports nothing: not Airflow, not the hooks. The connection forms are
declared here (``conn-fields`` / ``ui-field-behaviour``, the Airflow 3.2+ schema) so the UI can
draw them without importing the hook classes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_provider_info"]

_NULLABLE_NUMBER = ["number", "null"]
_NULLABLE_INTEGER = ["integer", "null"]
_NULLABLE_STRING = ["string", "null"]


def _doi_proxy_connection() -> dict[str, Any]:
    return {
        "hook-class-name": "airflow_doi.provider.hooks.doi_proxy.DoiProxyHook",
        "hook-name": "DOI proxy (doi.org REST API)",
        "connection-type": "doi_proxy",
        "conn-fields": {
            "rate": {
                "label": "Rate (requests/s)",
                "schema": {"type": _NULLABLE_NUMBER, "default": 3.0, "exclusiveMinimum": 0},
                "description": "Requests per second sent to the proxy by this process (or by "
                "every process sharing the Redis limit below).",
            },
            "concurrency": {
                "label": "Concurrency",
                "schema": {"type": _NULLABLE_INTEGER, "default": 4, "minimum": 1},
                "description": "Requests in flight at most.",
            },
            "timeout": {
                "label": "Timeout (s)",
                "schema": {"type": _NULLABLE_NUMBER, "default": 10.0, "exclusiveMinimum": 0},
                "description": "Seconds per request before it counts as a failed attempt.",
            },
            "contact": {
                "label": "Contact address",
                "schema": {"type": _NULLABLE_STRING},
                "description": "E-mail address put in the User-Agent (mailto:), as the proxy's "
                "operators ask of bulk clients.",
            },
            "redis_url": {
                "label": "Redis URL (shared rate limit)",
                "schema": {"type": _NULLABLE_STRING},
                "description": "redis://host:port/db: share one rate limit across workers.",
            },
            "agency_rate": {
                "label": "Agency rate (requests/s, enrichment)",
                "schema": {"type": _NULLABLE_NUMBER, "default": 2.0, "exclusiveMinimum": 0},
                "description": "Requests per second to each registration agency's metadata "
                "host (DoiEnrichOperator); the proxy keeps its own rate above.",
            },
            "metadata_hosts": {
                "label": "Metadata hosts (enrichment allowlist)",
                "schema": {"type": _NULLABLE_STRING},
                "description": "Comma-separated hosts a content negotiation redirect may lead "
                "to (https only), or origins such as http://127.0.0.1:8081; empty: the "
                "agencies' own (api.crossref.org, api.datacite.org, data.crosscite.org...).",
            },
        },
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "login", "password", "port", "extra"],
            "relabeling": {"host": "Proxy base URL"},
            "placeholders": {"host": "https://doi.org"},
        },
    }


def _duckdb_connection() -> dict[str, Any]:
    return {
        "hook-class-name": "airflow_doi.provider.hooks.duckdb.DuckDbHook",
        "hook-name": "DuckDB file (airflow-doi)",
        # Not "duckdb": that type is the DuckDB provider's (airflow-provider-duckdb); a
        # connection of type duckdb gets its hook when installed, and ours otherwise.
        "connection-type": "doi_duckdb",
        "conn-fields": {
            "read_only": {
                "label": "Read only",
                "schema": {"type": ["boolean", "null"], "default": False},
            },
            "lock_wait": {
                "label": "Lock wait (s)",
                "schema": {"type": _NULLABLE_NUMBER, "default": 600, "minimum": 0},
                "description": "Seconds a task waits for the file while another process "
                "writes it (DuckDB lets one process write a file at a time); 0 fails at once.",
            },
        },
        "ui-field-behaviour": {
            "hidden-fields": ["schema", "login", "password", "port", "extra"],
            "relabeling": {"host": "Database file"},
            "placeholders": {"host": "/path/to/catalogue.duckdb (empty: in-memory)"},
        },
    }


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
