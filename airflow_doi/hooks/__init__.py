"""Airflow hooks: the doi.org proxy (rate-limited resolver) and DuckDB files.

Import the hook classes from their modules (``airflow_doi.hooks.doi_proxy``,
``airflow_doi.hooks.duckdb``); this package imports nothing so that Airflow's provider
discovery stays cheap.
"""
