"""Operators that normalize, validate and resolve the DOIs of a SQL table.

They are thin: the rules live in :mod:`airflow_doi.syntax`, the HTTP side in
:mod:`airflow_doi.resolver` (through :class:`~airflow_doi.hooks.doi_proxy.DoiProxyHook`) and
the SQL in :mod:`airflow_doi.airflow_sql`. Import them from their modules::

    from airflow_doi.operators.normalize import DoiNormalizeOperator
    from airflow_doi.operators.validate import DoiValidateOperator
    from airflow_doi.operators.resolve import DoiResolveOperator
"""
