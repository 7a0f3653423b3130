"""The shared core every dialect builds on: lowering the canonical definition and DDL.

A dialect is a small class that answers four questions the canonical definition leaves open
(how to match and replace with a regular expression, how to percent-decode, how to escape
non-ASCII characters) and wraps function bodies in its ``CREATE FUNCTION`` template. The
lowering is a pure transform over the sqlglot tree; nothing here touches a database.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar, Literal, cast

import sqlglot
from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.syntax import URN_PREFIX

Binding = Literal["functions", "inline", "subquery", "lambda"]

PLACEHOLDERS = frozenset(
    {
        "DOI__RE_MATCH",
        "DOI__RE_EXTRACT",
        "DOI__RE_REPLACE",
        "DOI__PCT_DECODE",
        "DOI__ESCAPE_NON_ASCII",
        "DOI__URL_ENCODE",
        "DOI__ASCII_UPPER",
        "DOI__KEY",
        "DOI__STARTS",
        "DOI__PLAIN_DOI",
        "DOI__PREFIXED_DOI",
        "DOI__SIMPLE_DOI",
        "DOI__URN_SLASH",
        "DOI__PREFIXED_URN",
        "DOI__RESERVED",
        "DOI__IF_SHORTCUT",
        "DOI__TRIM_ASCII_WHITESPACE",
        "DOI__ESCAPES_PRINTABLE",
        "DOI__ASCII_DECODE",
        "DOI__LET",
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
    #: Optional shortcuts this dialect's bodies take (``definition.ESCAPED_URLS``: literal URL
    #: prefixes with escapes of printable ASCII, where :meth:`ascii_decode` is cheap;
    #: ``definition.PADDED``: a bare DOI with ASCII padding, where one complex regular
    #: expression costs more than a few simple tests).
    shortcuts: ClassVar[frozenset[str]] = frozenset()
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

    # --- shortcut tests (defaults: the regular expressions of the definition) -------------

    def starts(self, value: exp.Expression, prefix: str) -> exp.Expression:
        """``value`` begins with the literal ``prefix``."""
        head = exp.Substring(
            this=value, start=exp.Literal.number(1), length=exp.Literal.number(len(prefix))
        )
        return exp.EQ(this=head, expression=definition.lit(prefix))

    def plain_doi(self, value: exp.Expression, suffix_class: str) -> exp.Expression:
        """All of ``value`` is ``10.<registrant>/`` then characters of ``suffix_class``."""
        return self.re_match(value, definition.plain_doi_pattern(suffix_class))

    def prefixed_doi(self, value: exp.Expression, prefix: str, suffix_class: str) -> exp.Expression:
        """``value`` is the literal ``prefix`` then a :meth:`plain_doi`."""
        rest = exp.Substring(this=value.copy(), start=exp.Literal.number(len(prefix) + 1))
        return exp.And(
            this=self.starts(value, prefix), expression=self.plain_doi(rest, suffix_class)
        )

    def reserved(self, value: exp.Expression) -> exp.Expression:
        """A normalized DOI's suffix is reserved: :data:`definition.RESERVED`."""
        return self.re_match(value, definition.RESERVED)

    def prefixed_urn(self, value: exp.Expression) -> exp.Expression:
        """``value`` matches :data:`definition.URN_LITERAL`."""
        return exp.And(
            this=self.starts(value.copy(), URN_PREFIX),
            expression=self.re_match(value, definition.URN_LITERAL),
        )

    def simple_doi(self, value: exp.Expression) -> exp.Expression:
        """The DOI of a value matching :data:`definition.SIMPLE_WRAPPED`."""
        return self.re_extract(value, definition.SIMPLE_WRAPPED)

    def urn_slash(self, rest: exp.Expression) -> exp.Expression:
        """``rest`` with its first colon turned into a slash."""
        return self.re_replace(rest, "^([^:]*):", "\\1/")

    def escapes_printable(self, value: exp.Expression) -> exp.Expression:
        """Every ``%`` of ``value`` starts an escape of printable ASCII (``%21``-``%7E``)."""
        return exp.Not(this=self.re_match(value, definition.BAD_PRINTABLE_ESCAPE))

    def let(self, value: exp.Expression, name: str, body: exp.Expression) -> exp.Expression:
        """``body`` with the column ``name`` bound to ``value``: a lambda over a one-element
        list, in the engines that have both (the ``lambda`` binding)."""
        function = exp.Lambda(this=body, expressions=[exp.to_identifier(name)])
        transform = exp.Transform(this=exp.Array(expressions=[value]), expression=function)
        return exp.Bracket(this=transform, expressions=[exp.Literal.number(0)])

    def _ascii_whitespace(self) -> exp.Expression:
        """The ASCII whitespace characters as one string, spelled with CHR() so that no raw
        line break sits inside a literal (see :meth:`indent`)."""
        parts: list[exp.Expression] = [
            definition.lit(c)
            if c.isprintable()
            else exp.Anonymous(this="CHR", expressions=[exp.Literal.number(ord(c))])
            for c in definition.ASCII_WHITESPACE
        ]
        chars = parts[0]
        for part in parts[1:]:
            chars = exp.DPipe(this=chars, expression=part)
        return self.lower(chars)  # a dialect may spell || otherwise (see JavaRegexDialect)

    def rtrim_ascii_whitespace(self, value: exp.Expression) -> exp.Expression:
        """``value`` without ASCII whitespace at its end."""
        return exp.Trim(this=value, expression=self._ascii_whitespace(), position="TRAILING")

    def trim_ascii_whitespace(self, value: exp.Expression) -> exp.Expression:
        """``value`` without ASCII whitespace at either end."""
        return exp.Trim(this=value, expression=self._ascii_whitespace())

    def ascii_decode(self, value: exp.Expression) -> exp.Expression:
        """Percent-decode a value whose escapes are all printable ASCII."""
        return self.pct_decode(value)

    # --- the two engine-specific string primitives ---------------------------------------

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def url_encode(self, value: exp.Expression) -> exp.Expression:
        """A normalized DOI with :data:`definition.URL_ESCAPED` and every non-ASCII character
        as UTF-8 ``%XX`` (default: one ``REPLACE`` per character, then
        :meth:`escape_non_ascii`)."""
        return self.escape_non_ascii(definition.escape_url_chars(value))

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
        if isinstance(node, exp.Case):
            # A branch a dialect turned off (DOI__IF_ESCAPED_URLS) is dropped, not written.
            node.set("ifs", [i for i in node.args["ifs"] if i.this != exp.false()])
        if isinstance(node, exp.Anonymous) and node.name in PLACEHOLDERS:
            return self._lower_placeholder(node.name, node.expressions)
        return node

    def _lower_placeholder(self, name: str, args: list[exp.Expression]) -> exp.Expression:
        if name == "DOI__RE_MATCH":
            return self.re_match(args[0], args[1].name)
        if name == "DOI__RE_EXTRACT":
            return self.re_extract(args[0], args[1].name)
        if name == "DOI__RE_REPLACE":
            return self.re_replace(args[0], args[1].name, args[2].name)
        if name == "DOI__STARTS":
            return self.starts(args[0], args[1].name)
        if name == "DOI__PLAIN_DOI":
            return self.plain_doi(args[0], args[1].name)
        if name == "DOI__PREFIXED_DOI":
            return self.prefixed_doi(args[0], args[1].name, args[2].name)
        if name == "DOI__LET":
            return self.let(args[0], args[2].name, args[1])
        if name == "DOI__IF_SHORTCUT":
            return args[1] if args[0].name in self.shortcuts else exp.false()
        one_argument = {
            "DOI__ASCII_UPPER": self.ascii_upper_of_ascii,
            "DOI__KEY": self.key,
            "DOI__PCT_DECODE": self.pct_decode,
            "DOI__ESCAPE_NON_ASCII": self.escape_non_ascii,
            "DOI__URL_ENCODE": self.url_encode,
            "DOI__SIMPLE_DOI": self.simple_doi,
            "DOI__URN_SLASH": self.urn_slash,
            "DOI__PREFIXED_URN": self.prefixed_urn,
            "DOI__RESERVED": self.reserved,
            "DOI__ESCAPES_PRINTABLE": self.escapes_printable,
            "DOI__ASCII_DECODE": self.ascii_decode,
            "DOI__TRIM_ASCII_WHITESPACE": self.trim_ascii_whitespace,
        }
        return one_argument[name](args[0])

    #: Pretty-print bodies (off where they nest too deep for indentation to help).
    pretty: ClassVar[bool] = True

    def to_sql(self, node: exp.Expression) -> str:
        with quiet_sqlglot():
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


@contextmanager
def quiet_sqlglot() -> Iterator[None]:
    """sqlglot's INFO notes (``Applying array index offset``, dozens per body) kept out of
    the caller's log (an Airflow task's) while a body is generated; warnings still pass."""
    logger = logging.getLogger("sqlglot")
    previous = logger.level
    if logger.getEffectiveLevel() < logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(previous)
