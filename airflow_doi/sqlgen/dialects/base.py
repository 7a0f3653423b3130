"""The shared core every dialect builds on: lowering the canonical definition and DDL.

A dialect is a small class that answers four questions the canonical definition leaves open
(how to match and replace with a regular expression, how to percent-decode, how to escape
non-ASCII characters) and wraps function bodies in its ``CREATE FUNCTION`` template. The
lowering is a pure transform over the sqlglot tree; nothing here touches a database.
"""

from __future__ import annotations

from typing import ClassVar, Literal, cast

import sqlglot
from sqlglot import exp

from airflow_doi.sqlgen import definition

Binding = Literal["functions", "inline", "subquery"]

PLACEHOLDERS = frozenset(
    {
        "DOI__RE_MATCH",
        "DOI__RE_EXTRACT",
        "DOI__RE_REPLACE",
        "DOI__PCT_DECODE",
        "DOI__ESCAPE_NON_ASCII",
        "DOI__ASCII_UPPER",
        "DOI__KEY",
    }
)


class Dialect:
    """Base class: RE2-style regular expressions, global ``REGEXP_REPLACE``, helper functions."""

    #: Directory name under ``sql/`` and the dbt adapter name.
    name: ClassVar[str]
    #: sqlglot's name for the dialect (used to render and to parse-check).
    sqlglot_dialect: ClassVar[str]
    title: ClassVar[str]
    #: One line: how the generated file is proven (run on an engine, or parsed only).
    proof: ClassVar[str]
    #: Rules of doi-semantics.md this dialect cannot honour (empty: none).
    limitations: ClassVar[tuple[str, ...]] = ()
    #: How to install the file.
    install: ClassVar[str]
    #: How the UDF file shares intermediate results, and how dbt adapter bodies do.
    binding: ClassVar[Binding] = "functions"
    dbt_binding: ClassVar[Binding | None] = None
    #: The dbt adapter type, when dbt bodies are generated for this dialect.
    dbt_adapter: ClassVar[str | None] = None
    #: A dbt var that, when true, makes the dbt bodies call native functions of these names
    #: (schema-qualified, so that no SQL function of the same name can shadow them).
    dbt_native_var: ClassVar[str | None] = None
    dbt_native_schema: ClassVar[str] = ""
    #: Flag that makes REGEXP_REPLACE replace every match ("g"), when it is not the default.
    global_flag: ClassVar[str | None] = None
    #: Name of the public functions' argument.
    argument: ClassVar[str] = "s"
    text_type: ClassVar[str] = "VARCHAR"
    bool_type: ClassVar[str] = "BOOLEAN"

    # --- regular expressions -------------------------------------------------------------

    def regex_char(self, code: int) -> str:
        """How a pattern spells a non-printable or non-ASCII character (RE2 and Java)."""
        return f"\\x{{{code:02X}}}" if code > 0xFF else f"\\x{code:02X}"

    def regex(self, pattern: str) -> str:
        return "".join(c if 0x20 <= ord(c) < 0x7F else self.regex_char(ord(c)) for c in pattern)

    def replacement(self, text: str) -> str:
        """Group references in a replacement; the canonical form is ``\\1``."""
        return text

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        return exp.RegexpLike(this=value, expression=definition.lit(self.regex(pattern)))

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        node = exp.RegexpReplace(
            this=value,
            expression=definition.lit(self.regex(pattern)),
            replacement=definition.lit(self.replacement(replacement)),
        )
        if self.global_flag:
            node.set("modifiers", definition.lit(self.global_flag))
        return node

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        extract = exp.RegexpExtract(
            this=value,
            expression=definition.lit(self.regex(pattern)),
            group=exp.Literal.number(1),
        )
        return exp.Nullif(this=extract, expression=definition.lit(""))

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        """Upper-case a value known to be printable ASCII (default: the exact TRANSLATE)."""
        return definition.ascii_upper(value)

    def key(self, value: exp.Expression) -> exp.Expression:
        """The key of a normalized DOI that may be non-ASCII (default: the exact TRANSLATE)."""
        return definition.ascii_upper(value)

    # --- the two engine-specific string primitives ---------------------------------------

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def parse(self, sql: str) -> exp.Expression:
        """Parse a dialect-specific snippet; ``{x}`` placeholders are filled by callers."""
        return cast(exp.Expression, sqlglot.parse_one(sql, read=self.sqlglot_dialect))

    def snippet(self, template: str, **values: exp.Expression) -> exp.Expression:
        rendered = {k: v.sql(dialect=self.sqlglot_dialect) for k, v in values.items()}
        return self.parse(template.format(**rendered))

    # --- lowering ------------------------------------------------------------------------

    def lower(self, node: exp.Expression) -> exp.Expression:
        """Replace every placeholder call, innermost first, with this dialect's spelling."""
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, self.lower(value))
            elif isinstance(value, list):
                node.set(
                    key, [self.lower(v) if isinstance(v, exp.Expression) else v for v in value]
                )
        if isinstance(node, exp.Anonymous) and node.name in PLACEHOLDERS:
            args = node.expressions
            if node.name == "DOI__RE_MATCH":
                return self.re_match(args[0], args[1].name)
            if node.name == "DOI__RE_EXTRACT":
                return self.re_extract(args[0], args[1].name)
            if node.name == "DOI__ASCII_UPPER":
                return self.ascii_upper_of_ascii(args[0])
            if node.name == "DOI__KEY":
                return self.key(args[0])
            if node.name == "DOI__RE_REPLACE":
                return self.re_replace(args[0], args[1].name, args[2].name)
            if node.name == "DOI__PCT_DECODE":
                return self.pct_decode(args[0])
            return self.escape_non_ascii(args[0])
        return node

    #: Pretty-print bodies (off where they nest too deep for indentation to help).
    pretty: ClassVar[bool] = True

    def to_sql(self, node: exp.Expression) -> str:
        return self.lower(node.copy()).sql(dialect=self.sqlglot_dialect, pretty=self.pretty)

    # --- DDL -----------------------------------------------------------------------------

    def comment(self, text: str) -> str:
        return "\n".join(f"-- {line}".rstrip() for line in text.split("\n"))

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        raise NotImplementedError

    def helper_functions(self) -> list[str]:
        """Hand-written DDL the generated functions call (engine primitives), written first."""
        return []

    def footer(self) -> str:
        """Text after the last function (empty: none)."""
        return ""

    def indent(self, body: str, spaces: int = 2) -> str:
        # Split on "\n" only: str.splitlines() also splits on U+0085, U+2028, U+2029, \v, \f
        # and \x1c-\x1e, which a dialect may write raw inside a regex or REPLACE literal.
        pad = " " * spaces
        return "\n".join(pad + line if line else line for line in body.split("\n"))

    @property
    def has_helper_functions(self) -> bool:
        return self.binding == "functions"

    # --- file header ---------------------------------------------------------------------

    def header(self) -> str:
        limits = (
            "\n".join(f"  - {item}" for item in self.limitations)
            if self.limitations
            else "  none: every rule of the contract holds."
        )
        text = (
            f"{self.title}: DOI functions per ANSI/NISO Z39.84-2005.\n"
            "GENERATED by `airflow-doi sql generate` from airflow_doi/sqlgen: do not edit.\n"
            "\n"
            "doi_normalize(s), doi_key(s), doi_is_valid(s), doi_reason(s), doi_url(s), with\n"
            'decode="auto": URL, URN and info forms are percent-decoded, bare and doi: forms\n'
            "are not. NULL: normalize/key/url give NULL, is_valid false, reason 'empty'.\n"
            "Join on doi_key(x): it upper-cases ASCII a-z only (never UPPER()).\n"
            + ("doi__* functions are internal steps.\n" if self.has_helper_functions else "")
            + "\n"
            + f"Install: {self.install}\n"
            f"Proof:   {self.proof}\n"
            "Rules this dialect cannot honour:\n"
            f"{limits}"
        )
        return self.comment(text)


def scan_regex(pattern: str) -> list[tuple[int, str, bool]]:
    """(index, character, inside a bracket class) for each unescaped character of a pattern:
    lets dialects rewrite anchors and groups without touching literals or classes."""
    out: list[tuple[int, str, bool]] = []
    in_class = escaped = False
    for i, char in enumerate(pattern):
        if escaped:
            escaped = False
            continue
        if char == "\\":
            escaped = True
            continue
        if in_class:
            if char == "]" and pattern[i - 1] != "[" and pattern[i - 2 : i] != "[^":
                in_class = False
            out.append((i, char, True))
            continue
        if char == "[":
            in_class = True
            out.append((i, char, True))
            continue
        out.append((i, char, False))
    return out


class JavaRegexDialect(Dialect):
    """Engines on ``java.util.regex`` (Spark, Databricks, Trino): ``$`` may match before a
    final line terminator, so end anchors become ``\\z``; replacements use ``$1``."""

    def regex(self, pattern: str) -> str:
        anchors = {i for i, char, in_class in scan_regex(pattern) if char == "$" and not in_class}
        pattern = "".join("\\z" if i in anchors else c for i, c in enumerate(pattern))
        return super().regex(pattern)

    def replacement(self, text: str) -> str:
        return text.replace("\\1", "$1")

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        """``java.util.regex`` recurses once per repetition of a group, so the anchored check
        ``(?:[^%]|%XX...)*`` overflows the JVM stack on a value of a few thousand characters.
        The same test without recursion: every ``%`` starts a well-formed escape, i.e. none
        is left once the well-formed ones are removed (a find loop, constant stack)."""
        prefix, escapes, rest = pattern.partition(definition.UTF8_ESCAPES)
        if not escapes or rest != "$" or not prefix.startswith("^") or "%" in prefix:
            return super().re_match(value, pattern)
        removed = self.re_replace(value.copy(), definition.UTF8_ESCAPE_TOKENS, "")
        none_left = exp.EQ(
            this=exp.StrPosition(this=removed, substr=definition.lit("%")),
            expression=exp.Literal.number(0),
        )
        if prefix == "^":
            return none_left
        return exp.And(this=super().re_match(value, prefix), expression=none_left)

    def lower(self, node: exp.Expression) -> exp.Expression:
        # CONCAT rather than ||: the same NULL semantics here, and sqlglot's parser (which
        # checks the files) reads || inside CREATE FUNCTION ... RETURN as an unknown command.
        lowered = super().lower(node)
        if isinstance(lowered, exp.DPipe):
            return exp.Concat(expressions=[lowered.this, lowered.expression])
        return lowered
