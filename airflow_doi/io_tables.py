"""Moved to :mod:`airflow_doi.files.read` and :mod:`airflow_doi.files.write`; this old path
still works, and warns."""

from airflow_doi._moved import moved

__getattr__ = moved(__name__, "airflow_doi.files.read", also="airflow_doi.files.write")
