"""Databases without Airflow: the dialect-correct statements the operators emit
(:mod:`.statements`), installing the generated SQL functions (:mod:`.install`, behind
``airflow-doi sql install``), the DOI functions on a SQLite connection (:mod:`.sqlite`) and a
database URL opened read-only (:mod:`.connect`).

:mod:`airflow_doi.provider` runs these through Airflow's hooks; the report and the command
line use them directly. Nothing here imports Airflow.
"""
