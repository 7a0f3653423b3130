"""The Apache Airflow provider: everything of airflow_doi that knows Airflow lives here.

``hooks`` (the proxy and DuckDB connections), ``operators`` (normalize, validate, resolve, with
their push-down, dialect and lineage helpers), ``sql`` (the portable statements the operators
issue), ``assets`` and ``get_provider_info`` (what Airflow's provider discovery reads). The
standard itself, the Arrow engine, the SQL generator, the resolver and the CLI stay outside,
and import no Airflow; importing this package alone imports none either (the hooks and
operators load on first use).
"""
