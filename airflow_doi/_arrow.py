"""Moved to :mod:`airflow_doi.columns`; this old path still works, and warns."""

from airflow_doi._moved import moved

__getattr__ = moved(__name__, "airflow_doi.columns")
