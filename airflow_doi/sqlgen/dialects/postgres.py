"""PostgreSQL: SQL-standard function bodies (PostgreSQL 14+) over Tcl-style AREs.

PostgreSQL has no URL decoder and no byte-level regular expressions, so percent-decoding splits
the string into runs of escapes and plain text (``regexp_matches(..., 'g') WITH ORDINALITY``)
and decodes each run with ``convert_from(decode(hex))`` after the UTF-8 check has passed.
"""

from __future__ import annotations

import re

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Dialect
from airflow_doi.syntax import DIRECTORY, URN_PREFIX

#: Before the first ``/``: a character that is no digit or dot, two dots, or a dot last.
_BAD_REGISTRANT = "^[^/]*(?:[^0-9./]|[.][.]|[.]/)"


#: ``ENCODE(bytes, 'escape')`` writes a byte of 0x80-0xFF as ``\`` and three octal digits
#: ``abc`` (``a`` is 2 or 3): first ``\ab`` -> ``%H\p`` (the high hex digit, and ``b``'s parity
#: behind the backslash), then ``\pc`` -> the low hex digit. A first-round replacement leaves a
#: backslash only before 0 or 1, where no first-round pattern matches.
_OCTAL_TO_HEX: tuple[tuple[str, str], ...] = (
    *((f"\\{a}{b}", f"%{(a * 64 + b * 8) >> 4:X}\\{b % 2}") for a in (2, 3) for b in range(8)),
    *((f"\\{p}{c}", f"{p * 8 + c:X}") for p in (0, 1) for c in range(8)),
)


#: What a query calling doi_url on a value beyond ASCII says in a database whose encoding is
#: not UTF8 (as the text PostgreSQL quotes when the cast of it to an integer fails).
_NOT_UTF8 = ("doi_url needs a database whose encoding is UTF8 for a DOI beyond ASCII (its %XX"
             " escapes are the bytes PostgreSQL stores); use airflow_doi.to_url in Python there")


def _outside(bracket_class: str) -> str:
    """The complement of a bracket class."""
    if bracket_class.startswith("[^"):
        return "[" + bracket_class[2:]
    return "[^" + bracket_class[1:]


class Postgres(Dialect):
    name = "postgres"
    sqlglot_dialect = "postgres"
    title = "PostgreSQL 14+"
    proof = "run on a real PostgreSQL server against every conformance vector in the test suite."
    install = (
        "psql -v ON_ERROR_STOP=1 -f sql/postgres/doi_functions.sql (into the first schema of"
        " search_path)."
    )
    limitations = (
        "U+0000 cannot be stored in PostgreSQL text at all, so inputs containing it cannot"
        " reach the functions; a decoded %00 is reported as bad_character like any control.",
        "doi_url needs a database whose encoding is UTF8 for a DOI with characters beyond"
        " ASCII (its escapes are the bytes the database stores: CONVERT_TO is not immutable,"
        " and doi_url must be inlinable); in another encoding such a value fails the query"
        " with a message saying so, and ASCII DOIs are escaped as everywhere.",
    )
    dbt_adapter = "postgres"
    dbt_binding = "subquery"
    global_flag = "g"
    shortcuts = frozenset({definition.ESCAPED_URLS, definition.PADDED})
    text_type = "text"
    bool_type = "boolean"

    def regex_char(self, code: int) -> str:
        return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        return exp.RegexpLike(this=value, expression=exp.Literal.string(self.regex(pattern)))

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        # Spelled out: sqlglot's own RegexpReplace adds a "g" of its own for PostgreSQL.
        return exp.Anonymous(
            this="REGEXP_REPLACE",
            expressions=[
                value,
                exp.Literal.string(self.regex(pattern)),
                exp.Literal.string(replacement),
                exp.Literal.string("g"),
            ],
        )

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # substring(x FROM pattern) is group 1, and NULL when nothing matches.
        return self.snippet(
            "SUBSTRING({x} FROM {p})", x=value, p=exp.Literal.string(self.regex(pattern))
        )

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        # %00 would make convert_from fail; %01 gives the same answer (bad_character).
        return self.snippet(
            "(SELECT STRING_AGG(CASE WHEN LEFT(doi__run.m[1], 1) = '%' THEN CONVERT_FROM("
            "DECODE(REPLACE(REPLACE(doi__run.m[1], '%00', '%01'), '%', ''), 'hex'), 'UTF8')"
            " ELSE doi__run.m[1] END, '' ORDER BY doi__run.i) FROM REGEXP_MATCHES({x},"
            " '((?:%[0-9A-Fa-f]{{2}})+|[^%]+)', 'g') WITH ORDINALITY AS doi__run(m, i))",
            x=value,
        )

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        # Immutable functions only, no subquery, the value read once, so that PostgreSQL
        # inlines doi_url (a called SQL function costs ~20 us a row, as much as splitting the
        # value into runs of characters did): the value's bytes are CAST(... AS BYTEA) (no
        # backslash in it: doi_url escaped it as %5C first), then ENCODE(..., 'escape')
        # writes each non-ASCII byte as a backslash and three octal digits, which
        # _OCTAL_TO_HEX turns into %XX. The cast reads the database's encoding (CONVERT_TO is
        # not immutable): a value beyond ASCII in a database whose encoding is not UTF8 gets a
        # clear error instead of other escapes.
        escaped: exp.Expression = exp.Anonymous(this="ENCODE", expressions=[
            exp.Cast(this=value, to=exp.DataType.build("bytea", dialect="postgres")),
            exp.Literal.string("escape")])
        for octal, hex_ in _OCTAL_TO_HEX:
            escaped = exp.Anonymous(this="REPLACE", expressions=[
                escaped, exp.Literal.string(octal), exp.Literal.string(hex_)])
        # A value of ASCII alone has the same bytes in every encoding PostgreSQL serves: it
        # is escaped first, whatever the database's encoding. Another is escaped where the
        # database is UTF8; the probe reads the value (0 * its length), or the planner would
        # fold it once per query, and CHR(233) fails outright in the EUC encodings.
        ascii_only = self.snippet("{x} ~ '^[\\x01-\\x7F]*$'", x=value)
        utf8 = self.snippet("OCTET_LENGTH(CHR(233 + 0 * OCTET_LENGTH({x}))) = 2", x=value)
        # The value's own empty head joined to the message: a constant would be cast (and
        # fail) while the query is planned, whichever branch a row takes.
        message = self.snippet(
            "CAST({m} AS TEXT) || LEFT({x}, 0)", m=exp.Literal.string(_NOT_UTF8), x=value)
        refusal = exp.Cast(this=message, to=exp.DataType.build("int"))
        # OR evaluates left to right and stops at true: the probe is never met by ASCII.
        return exp.Case(ifs=[exp.If(this=exp.Or(this=ascii_only, expression=utf8),
                                    true=escaped)],
                        default=exp.Cast(this=refusal, to=exp.DataType.build("text")))

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        # Not STRICT: PostgreSQL only inlines a STRICT SQL function whose body is provably
        # strict, and a CASE never is; a called (not inlined) function costs ~30x here. The
        # bodies give NULL for NULL anyway (doi_is_valid false, doi_reason 'empty').
        returns = self.bool_type if returns_boolean else self.text_type
        return (
            f"CREATE OR REPLACE FUNCTION {name}({param} {self.text_type}) RETURNS {returns}\n"
            f"LANGUAGE sql IMMUTABLE PARALLEL SAFE\n"
            f"RETURN\n{self.indent(body)};"
        )

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # TRANSLATE costs ~7x UPPER here. Under the "C" collation PostgreSQL's UPPER maps ASCII
        # a-z only, whatever the database locale (no Turkish dotted I), and the fast path has
        # proven the value printable ASCII anyway.
        return self.key(value)

    def key(self, value: exp.Expression) -> exp.Expression:
        # Under the "C" collation PostgreSQL upper-cases byte by byte, ASCII a-z only
        # (asc_toupper): exactly the key's rule for any text, `ß`, `é` and `ﬁ` kept, at ~2x
        # the speed of TRANSLATE on a normalized DOI (the vectors run on a real server prove it).
        collation = exp.Identifier(this="C", quoted=True)
        return exp.Upper(this=exp.Collate(this=value, expression=collation))

    # --- shortcut tests: PostgreSQL's regular expressions cost per call and per pattern state
    # (an anchored pattern with a repeated group ~3 UPPER() calls, a one-class search ~1, a
    # capture ~15): the fast path uses LIKE, one-class searches and no captures.

    def starts(self, value: exp.Expression, prefix: str) -> exp.Expression:
        # LIKE 'prefix%' is ~4x cheaper than SUBSTRING(...) = 'prefix' here.
        assert not set(prefix) & set("%_\\"), prefix
        return exp.Like(this=value, expression=exp.Literal.string(prefix + "%"))

    def plain_doi(self, value: exp.Expression, suffix_class: str) -> exp.Expression:
        # "10." + something + "/" + something, no character outside the class anywhere (the
        # registrant's digits, dots and slash are in every suffix class), and nothing before
        # the first "/" but digits and single dots, the last one followed by a digit: exactly
        # the anchored pattern, in two searches of one class each.
        return self._shaped(value, DIRECTORY + "_%/_%", suffix_class, value.copy(),
                            _BAD_REGISTRANT)

    def prefixed_doi(self, value: exp.Expression, prefix: str, suffix_class: str) -> exp.Expression:
        # A URL prefix lies inside the suffix class, and its slashes say where the registrant
        # starts: test the whole value, no SUBSTRING (which walks the UTF-8 string here).
        if not prefix.endswith("/") or not all(re.fullmatch(suffix_class, c) for c in prefix):
            return super().prefixed_doi(value, prefix, suffix_class)
        skip = "^" + "[^/]*/" * prefix.count("/")
        return self._shaped(value, prefix + DIRECTORY + "_%/_%", suffix_class, value.copy(),
                            skip + _BAD_REGISTRANT[1:])

    def reserved(self, value: exp.Expression) -> exp.Expression:
        # The character after the first "/"'s next is "/" (a third of the regular expression's
        # cost, which every written row paid), behind a LIKE that most DOIs fail.
        shape = exp.Like(this=value, expression=exp.Literal.string("%/_/%"))
        after = exp.Substring(
            this=value.copy(),
            start=exp.Add(
                this=exp.StrPosition(this=value.copy(), substr=exp.Literal.string("/")),
                expression=exp.Literal.number(2),
            ),
            length=exp.Literal.number(1),
        )
        slash = exp.EQ(this=after, expression=exp.Literal.string("/"))
        return exp.Paren(this=exp.And(this=shape, expression=slash))  # NOT binds tighter

    def prefixed_urn(self, value: exp.Expression) -> exp.Expression:
        # As prefixed_doi, with the registrant ending at the first colon: "urn:doi:10." then
        # something, a colon and something, every character printable without % ? #, and
        # nothing between "urn:doi:" and the next colon (SPLIT_PART's third field) but digits
        # and single dots, the last followed by a digit. The field's own search costs a third
        # of one anchored past the prefix.
        assert URN_PREFIX.count(":") == 2, URN_PREFIX
        registrant = exp.Anonymous(
            this="SPLIT_PART",
            expressions=[value.copy(), exp.Literal.string(":"), exp.Literal.number(3)],
        )
        return self._shaped(value, URN_PREFIX + DIRECTORY + "_%:_%", definition.PRINTABLE_URL,
                            registrant, "[^0-9.]|[.][.]|[.]$")

    def _shaped(self, value: exp.Expression, like: str, suffix_class: str,
                registrant: exp.Expression, bad_registrant: str) -> exp.Expression:
        """``value LIKE like``, no character of ``value`` outside ``suffix_class``, and no
        match of ``bad_registrant`` in ``registrant``: the three tests of every shortcut
        above, cheapest first."""
        shape = exp.Like(this=value, expression=exp.Literal.string(like))
        only_class = exp.Not(this=self.re_match(value.copy(), _outside(suffix_class)))
        good = exp.Not(this=self.re_match(registrant, bad_registrant))
        return exp.And(this=exp.And(this=shape, expression=only_class), expression=good)

    def simple_doi(self, value: exp.Expression) -> exp.Expression:
        # No capture: nothing before the DOI holds "10.", and only ASCII whitespace follows it.
        start = exp.StrPosition(this=value.copy(), substr=exp.Literal.string(DIRECTORY))
        return self.rtrim_ascii_whitespace(exp.Substring(this=value, start=start))

    def urn_slash(self, rest: exp.Expression) -> exp.Expression:
        return self.snippet("OVERLAY({x} PLACING '/' FROM STRPOS({x}, ':') FOR 1)", x=rest)

    def ascii_decode(self, value: exp.Expression) -> exp.Expression:
        # Escapes already checked as %21-%7E, and no " or \\ in the value: as JSON \\u00XX
        # escapes they decode in one cast, ~20x cheaper than splitting into runs of escapes.
        decoded = self.snippet(
            "CAST('[\"' || REPLACE({x}, '%', '\\u00') || '\"]' AS JSON) ->> 0", x=value
        )
        return exp.Paren(this=decoded)  # COLLATE binds tighter than ->>
