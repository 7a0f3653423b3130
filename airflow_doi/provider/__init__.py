"""The Apache Airflow provider of airflow_doi: hooks, operators, assets, lineage, provider info.

Everything of airflow_doi that knows Airflow lives here: ``hooks`` (the proxy and DuckDB
hooks, and every hook-level helper: SQL connections, the due-keys engine of resolve and
enrich, claims, the tables kept beside a catalogue, the DOI column's statements, repairs),
``operators`` (normalize, validate, resolve, enrich and their bases), ``pushdown`` (in the
database or in the worker), ``lineage`` (OpenLineage), ``assets``, ``progress`` (task log
lines), ``example_settings`` (the example DAGs' knobs) and ``get_provider_info`` (what
Airflow's provider discovery reads). The standard itself, the Arrow engine, the SQL generator
and statements, the resolver and the CLI stay outside, and import no Airflow; importing this
package alone imports none either (the hooks and operators load on first use).
"""
