"""DuckDB: macros over RE2; ``url_decode`` keeps ``+`` and the UTF-8 check runs before it."""

from __future__ import annotations

import re
import string

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Dialect, scan_regex
from airflow_doi.syntax import DIRECTORY


def _single_branch(pattern: str) -> bool:
    """True when no top-level ``|`` splits the pattern (so ^...$ anchors all of it)."""
    depth = 0
    for _, char, in_class in scan_regex(pattern):
        if in_class:
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return False
    return True


#: Printable ASCII characters, to spell a suffix class as the few it leaves out.
_PRINTABLE = [chr(c) for c in range(0x21, 0x7F)]
#: What DuckDB's URL_ENCODE leaves as it is (RFC 3986 unreserved characters).
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
#: Printable ASCII characters URL_ENCODE escapes and doi_url keeps.
_URL_KEPT = "".join(c for c in _PRINTABLE if c not in _UNRESERVED
                    and c not in definition.URL_ESCAPED)
#: 4- and 5-digit registrants, the registrant of nearly every DOI in circulation.
_REGISTRANT_GLOBS = ("[0-9]" * 4 + "/?*", "[0-9]" * 5 + "/?*")


def _and_all(*tests: exp.Expression) -> exp.Expression:
    result = tests[0]
    for test in tests[1:]:
        result = exp.And(this=result, expression=test)
    return result


def _printable_doi(value: exp.Expression, suffix_class: str, prefix: str) -> exp.Expression | None:
    """``value`` is ``prefix`` + ``10.`` + a 4- or 5-digit registrant + ``/`` + printable
    ASCII characters of ``suffix_class``, without a regular expression; None when the class
    or the prefix cannot be tested that way (then the caller uses the pattern).

    Printable ASCII: byte length = character length (ASCII), TO_JSON adds only its quotes (no
    control character, ``"`` or ``\\``), and no space or DEL; the class's other exclusions are
    CONTAINS tests. GLOB with character classes at fixed positions is ~4x cheaper than RE2."""
    if suffix_class.startswith("[^") or any(c in prefix for c in "*?[]"):
        return None
    left_out = [c for c in _PRINTABLE if not re.fullmatch(suffix_class, c) and c not in '"\\']
    if len(left_out) > 6 or not all(re.fullmatch(suffix_class, c) for c in prefix):
        return None
    head = prefix + DIRECTORY

    def glob(pattern: str) -> exp.Expression:
        return exp.Glob(this=value.copy(), expression=exp.Literal.string(head + pattern))

    def absent(char: exp.Expression) -> exp.Expression:
        return exp.Not(this=exp.Anonymous(this="CONTAINS", expressions=[value.copy(), char]))

    def strlen(x: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this="STRLEN", expressions=[x])

    json_length = strlen(exp.Anonymous(this="TO_JSON", expressions=[value.copy()]))
    tests = [
        exp.Paren(this=exp.Or(this=glob(_REGISTRANT_GLOBS[0]),
                              expression=glob(_REGISTRANT_GLOBS[1]))),
        exp.EQ(this=strlen(value.copy()), expression=exp.Length(this=value.copy())),
        exp.EQ(this=json_length,
               expression=exp.Add(this=strlen(value.copy()), expression=exp.Literal.number(2))),
        absent(exp.Chr(expressions=[exp.Literal.number(127)])),
        absent(exp.Literal.string(" ")),
    ]
    tests.extend(absent(exp.Literal.string(c)) for c in left_out)
    if not prefix:  # the callers test the bare "10." themselves
        return _and_all(*tests)
    # The literal prefix in front (PREFIX costs ~1 ns a value; a GLOB about one UPPER() even
    # when it fails at the first character): values of every other shape leave the branch
    # before its GLOBs (a value that is no DOI at all passed two of them in every branch).
    gate = exp.Anonymous(this="PREFIX", expressions=[value.copy(), exp.Literal.string(head)])
    return _and_all(gate, *tests)


class DuckDB(Dialect):
    name = "duckdb"
    sqlglot_dialect = "duckdb"
    title = "DuckDB"
    proof = "run on DuckDB (python duckdb) against every conformance vector in the test suite."
    install = "con.execute(open('sql/duckdb/doi_functions.sql').read()) (creates macros)."
    dbt_adapter = "duckdb"
    dbt_binding = "lambda"
    shortcuts = frozenset({definition.ESCAPED_URLS})
    # The native extension (airflow_doi/native): built-in functions live in system.main.
    dbt_native_var = "dbt_doi_duckdb_native"
    dbt_native_schema = "system.main"
    global_flag = "g"

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # regexp_full_match is about twice as fast as an anchored regexp_matches in DuckDB.
        if pattern.startswith("^") and pattern.endswith("$") and _single_branch(pattern):
            return exp.Anonymous(
                this="REGEXP_FULL_MATCH",
                expressions=[value, exp.Literal.string(self.regex(pattern[1:-1]))],
            )
        return super().re_match(value, pattern)

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # regexp_extract gives '' for no match, and NULLIF would evaluate its argument twice
        # inside a CASE branch; the first element of an empty list is NULL, in one read.
        return self.snippet(
            "REGEXP_EXTRACT_ALL({x}, {p}, 1)[1]", x=value, p=exp.Literal.string(self.regex(pattern))
        )

    # --- shortcut tests: one RE2 match costs DuckDB 3-5 UPPER() calls, so the commonest
    # shapes are tested without one. These tests are stricter than the pattern (4- and 5-digit
    # registrants only, no '"' or '\\'): whatever they leave out takes a later branch (the
    # regular-expression shortcuts or the full parse), which gives the same answer.

    def plain_doi(self, value: exp.Expression, suffix_class: str) -> exp.Expression:
        test = _printable_doi(value, suffix_class, "")
        return test if test is not None else super().plain_doi(value, suffix_class)

    def prefixed_doi(self, value: exp.Expression, prefix: str, suffix_class: str) -> exp.Expression:
        test = _printable_doi(value, suffix_class, prefix)
        return test if test is not None else super().prefixed_doi(value, prefix, suffix_class)

    def simple_doi(self, value: exp.Expression) -> exp.Expression:
        # REGEXP_EXTRACT_ALL builds a list: nothing before the DOI holds "10.", and only ASCII
        # whitespace follows it, so a slice and an RTRIM give the same string, ~10x cheaper.
        start = exp.StrPosition(this=value.copy(), substr=exp.Literal.string(DIRECTORY))
        return self.rtrim_ascii_whitespace(exp.Substring(this=value, start=start))

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # DuckDB's TRANSLATE costs ~30x UPPER. UPPER is locale-independent in DuckDB and, on a
        # value the fast path has proven printable ASCII, is exactly the a-z -> A-Z map.
        return exp.Upper(this=value)

    def key(self, value: exp.Expression) -> exp.Expression:
        # TRANSLATE costs DuckDB ~2 us a value, most of the full parse; a value whose byte
        # length equals its character length is ASCII, where UPPER is exactly a-z -> A-Z. The
        # one-element lambda reads the (expensive) value once: DuckDB does not share common
        # subexpressions inside CASE.
        return self.snippet(
            "LIST_TRANSFORM([{x}], LAMBDA doi__n: CASE WHEN STRLEN(doi__n) = LENGTH(doi__n)"
            " THEN UPPER(doi__n) ELSE TRANSLATE(doi__n, {lower}, {upper}) END)[1]",
            x=value,
            lower=exp.Literal.string(definition.LOWER),
            upper=exp.Literal.string(definition.UPPER),
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # The caller checked the escapes (well-formed UTF-8); url_decode leaves "+" alone. TRY:
        # DuckDB's common-subexpression elimination may lift a decode that two functions of one
        # SELECT share out of the CASE that guards it, and run it on every row; the guarded
        # answer never reads what TRY turns into NULL.
        decode = exp.Anonymous(this="URL_DECODE", expressions=[value])
        return exp.Anonymous(this="TRY", expressions=[decode])

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return self.snippet(
            "ARRAY_TO_STRING(LIST_TRANSFORM(REGEXP_EXTRACT_ALL({x}, "
            "'[\\x00-\\x7F]+|[^\\x00-\\x7F]+'), LAMBDA r: CASE WHEN ORD(r) < 128 THEN r "
            "ELSE URL_ENCODE(r) END), '')",
            x=value,
        )

    def url_encode(self, value: exp.Expression) -> exp.Expression:
        # URL_ENCODE escapes every byte but RFC 3986's unreserved characters in one pass; the
        # printable ASCII characters doi_url keeps are put back: "/" always, the others (rare
        # in DOIs) only when the value holds one, since each REPLACE walks the whole encoded
        # value. Every "%" of URL_ENCODE's output starts an escape (a "%" of the DOI is
        # "%25"), so a REPLACE meets only whole escapes. The value is bound once (a lambda).
        # The default (a list of the value's runs) cost ~4 ms a 10,000-character value.
        def put_back(encoded: exp.Expression, chars: str) -> exp.Expression:
            for char in chars:
                encoded = exp.Anonymous(this="REPLACE", expressions=[
                    encoded, exp.Literal.string(f"%{ord(char):02X}"), exp.Literal.string(char)])
            return encoded

        path = exp.column("doi__p")
        slashes = put_back(exp.Anonymous(this="URL_ENCODE", expressions=[path]), "/")
        rare = _URL_KEPT.replace("/", "")
        body = exp.Case(
            ifs=[exp.If(this=self.re_match(path.copy(), definition.char_class(rare)),
                        true=put_back(slashes.copy(), rare))],
            default=slashes,
        )
        return self.let(value, "doi__p", body)

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        return f"CREATE OR REPLACE MACRO {name}({param}) AS\n{self.indent(body)};"
