"""Binding strategies: how the canonical steps are glued into whole function bodies.

``functions``
    one SQL function per step (``doi__unwrap``, ``doi__decode``, ...); public functions call
    them. Each step's input is computed once per call, and the file stays readable.
``inline``
    every step expanded into one expression (engines that cannot call their own UDFs from a
    UDF, and dbt bodies on engines without correlated scalar subqueries).
``subquery``
    one expression whose intermediate results are columns of nested one-row derived tables,
    so an engine without common-subexpression elimination still computes each step once.
``lambda``
    one expression whose intermediate results are bound by a one-element list and a lambda
    (``LIST_TRANSFORM([u], LAMBDA doi__u: ...)[1]``): each step computed once, the body a
    fraction of ``inline``'s size, and no call for the engine to hoist out of the CASE (Spark
    evaluates a nested SQL function's argument for every row, before the shortcuts).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Binding, Dialect
from airflow_doi.sqlgen.dialects.sqlite import SQLite

_U = "doi__u"
_DT = "doi__dt"


def call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


@dataclass
class CallParts:
    """Slow-path answers as calls to the generated helper functions."""

    s: exp.Expression

    def _dt(self, dt: exp.Expression | None) -> exp.Expression:
        if dt is not None:
            return dt
        return call("doi__decode", call("doi__unwrap", self.s.copy()))

    def normalized(self, dt: exp.Expression | None = None) -> exp.Expression:
        return call("doi__normalized", self._dt(dt))

    def valid(self, dt: exp.Expression | None = None) -> exp.Expression:
        return call("doi__valid", self._dt(dt))

    def reason(self, dt: exp.Expression | None = None) -> exp.Expression:
        return call("doi__reason", self._dt(dt))

    def url_dt(self) -> exp.Expression:
        return call("doi__url_dt", self.s.copy())


@dataclass
class InlineParts:
    """Slow-path answers with every step expanded in place."""

    s: exp.Expression

    def _dt(self, dt: exp.Expression | None) -> exp.Expression:
        if dt is not None:
            return dt
        return definition.decode(definition.unwrap(self.s.copy()))

    def normalized(self, dt: exp.Expression | None = None) -> exp.Expression:
        return definition.normalized_of(self._dt(dt))

    def valid(self, dt: exp.Expression | None = None) -> exp.Expression:
        return definition.valid_of(self._dt(dt))

    def reason(self, dt: exp.Expression | None = None) -> exp.Expression:
        return definition.reason_of(self._dt(dt))

    def url_dt(self) -> exp.Expression:
        return definition.url_dt(self.s.copy())


@dataclass
class SubqueryParts:
    """Slow-path answers as a scalar subquery over one-row derived tables (a SQL ``let``)."""

    s: exp.Expression

    def _let(self, answer: exp.Expression, dt: exp.Expression | None) -> exp.Expression:
        if dt is None:
            inner = exp.select(exp.alias_(definition.unwrap(self.s.copy()), _U))
            middle = exp.select(exp.alias_(definition.decode(exp.column(_U)), _DT)).from_(
                inner.subquery("doi__unwrapped")
            )
        else:
            middle = exp.select(exp.alias_(dt, _DT))
        outer = exp.select(answer).from_(middle.subquery("doi__decoded"))
        return exp.Subquery(this=outer)

    def normalized(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.normalized_of(exp.column(_DT)), dt)

    def valid(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.valid_of(exp.column(_DT)), dt)

    def reason(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.reason_of(exp.column(_DT)), dt)

    def url_dt(self) -> exp.Expression:
        return definition.url_dt(self.s.copy())


def let(value: exp.Expression, name: str, body: exp.Expression) -> exp.Expression:
    """``body`` with the column ``name`` bound to ``value`` (``DOI__LET``, lowered by the
    dialect: a lambda over a one-element list)."""
    return exp.Anonymous(this="DOI__LET", expressions=[value, body, exp.Literal.string(name)])


@dataclass
class LambdaParts:
    """Slow-path answers with each step bound once by a lambda (see the module docstring)."""

    s: exp.Expression

    def _let(self, answer: exp.Expression, dt: exp.Expression | None) -> exp.Expression:
        if dt is None:
            decoded = let(definition.decode(exp.column(_U)), _DT, answer)
            return let(definition.unwrap(self.s.copy()), _U, decoded)
        return let(dt, _DT, answer)

    def normalized(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.normalized_of(exp.column(_DT)), dt)

    def valid(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.valid_of(exp.column(_DT)), dt)

    def reason(self, dt: exp.Expression | None = None) -> exp.Expression:
        return self._let(definition.reason_of(exp.column(_DT)), dt)

    def url_dt(self) -> exp.Expression:
        return definition.url_dt(self.s.copy())


PARTS: dict[str, Callable[[exp.Expression], definition.Parts]] = {
    "functions": CallParts,
    "inline": InlineParts,
    "subquery": SubqueryParts,
    "lambda": LambdaParts,
}


@contextmanager
def _deep_trees() -> Iterator[None]:
    # Inlined bodies (Redshift's nested REPLACE decoder) nest deeper than sqlglot's recursive
    # generator expects from hand-written SQL.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def public_body(dialect: Dialect, name: str, arg: exp.Expression, binding: Binding) -> str:
    """One public function's body (SQL text) in ``dialect``."""
    builder = definition.BUILDERS[name]
    with _deep_trees():
        return dialect.to_sql(builder(arg, PARTS[binding](arg)))


def from_normalized(dialect: Dialect, doi: exp.Expression) -> tuple[str, str]:
    """The key of a normalized DOI ``doi`` (NULL for NULL) and whether its suffix is reserved,
    in ``dialect``: with the DOI computed once per row, the other columns follow from it
    (the reason is ``doi_reason`` only where the DOI is NULL)."""
    return (dialect.to_sql(definition.key_of(doi.copy())),
            dialect.to_sql(definition.reserved(doi.copy())))


def step_body(dialect: Dialect, name: str, param: str) -> str:
    return dialect.to_sql(definition.STEPS[name](exp.column(param)))


STEP_PARAMS = {
    "doi__unwrap": "s",
    "doi__decode": "u",
    "doi__url_dt": "s",
    "doi__normalized": "dt",
    "doi__valid": "dt",
    "doi__reason": "dt",
}


def functions_file(dialect: Dialect) -> str:
    """The whole ``sql/<dialect>/doi_functions.sql`` text."""
    if isinstance(dialect, SQLite):
        return dialect.file_text()
    arg = exp.column(dialect.argument)
    parts = [dialect.header(), ""]
    for text in dialect.helper_functions():
        parts.extend([text, ""])
    if dialect.binding == "functions":
        for name, param in STEP_PARAMS.items():
            parts.append(
                dialect.create_function(
                    name,
                    param,
                    step_body(dialect, name, param),
                    returns_boolean=name in definition.RETURNS_BOOLEAN,
                    null_aware=name in definition.NULL_AWARE,
                )
            )
            parts.append("")
    for name in definition.PUBLIC_FUNCTIONS:
        parts.append(
            dialect.create_function(
                name,
                dialect.argument,
                public_body(dialect, name, arg, dialect.binding),
                returns_boolean=name in definition.RETURNS_BOOLEAN,
                null_aware=name in definition.NULL_AWARE,
            )
        )
        parts.append("")
    if dialect.footer():
        parts.append(dialect.footer())
    return "\n".join(parts).rstrip("\n") + "\n"


_JINJA_ARG = "doi__jinja_argument"


def dbt_macros_file(dialect: Dialect) -> str:
    """``dbt_doi/macros/_generated/<adapter>.sql``: one inline body per public function."""
    assert dialect.dbt_adapter and dialect.dbt_binding
    lines = [
        "{#- GENERATED by `airflow-doi sql generate` from airflow_doi/sqlgen: do not edit. -#}",
        "",
    ]
    for name in definition.PUBLIC_FUNCTIONS:
        body = public_body(dialect, name, exp.column(_JINJA_ARG), dialect.dbt_binding)
        for marker in ("{{", "{%", "{#"):
            if marker in body:
                raise ValueError(f"generated SQL contains the Jinja marker {marker!r}")
        body = body.replace(_JINJA_ARG, "({{ value }})")
        # The function's call where the database has it (var dbt_doi_use_functions), the
        # native extension's where it is loaded, else the inline body.
        lines.append(f"{{% macro {dialect.dbt_adapter}__{name}(value) -%}}")
        lines.append(f"{{%- set call = dbt_doi._function_call('{name}', value) -%}}")
        lines.append("{%- if call -%}")
        lines.append("{{ call }}")
        if dialect.dbt_native_var:
            lines.append(f"{{%- elif var('{dialect.dbt_native_var}', false) -%}}")
            lines.append(f"{dialect.dbt_native_schema}.{name}({{{{ value }}}})")
        lines.append("{%- else -%}")
        lines.append(body)
        lines.append("{%- endif %}")
        lines.append("{%- endmacro %}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def dbt_macros_docs(dialect: Dialect) -> str:
    """``dbt_doi/macros/_generated/<adapter>.yml``: ``dbt docs`` entries for those bodies."""
    assert dialect.dbt_adapter
    lines = [
        "# GENERATED by `airflow-doi sql generate` from airflow_doi/sqlgen: do not edit.",
        "version: 2",
        "",
        "macros:",
    ]
    for name in definition.PUBLIC_FUNCTIONS:
        lines += [
            f"  - name: {dialect.dbt_adapter}__{name}",
            "    description: >-",
            f"      The {dialect.dbt_adapter} implementation of `dbt_doi.{name}`, generated",
            "      from the same definition as sql/ (do not call it: call the public macro,",
            "      which dispatches here). It calls the installed function where the var",
            "      dbt_doi_use_functions says the database has it, else expands inline.",
            "    arguments:",
            "      - name: value",
            "        type: string",
            "        description: A SQL expression (a column name, or any expression).",
        ]
    return "\n".join(lines) + "\n"
