"""The canonical definition of the DOI functions, as sqlglot expressions.

Every dialect file and every dbt adapter body is generated from the builders below; the rules
themselves come from :mod:`airflow_doi.syntax` and :mod:`airflow_doi.presentation` constants so
that the SQL cannot drift from the Python reference.

The definition is written against six *abstract* operations, spelled as placeholder function
calls, because no two engines agree on them (see :mod:`airflow_doi.sqlgen.dialects.base`):

``DOI__RE_MATCH(s, pattern)``
    partial regular-expression match. Patterns hold raw characters; each dialect escapes them.
``DOI__RE_EXTRACT(s, pattern)``
    group 1 of the first match, or NULL (never an empty string) when there is none.
``DOI__RE_REPLACE(s, pattern, replacement)``
    replace every match (patterns that must act once are anchored with ``^``); the replacement
    uses ``\\1`` for the first group.
``DOI__PCT_DECODE(s)``
    percent-decode a string already checked against :data:`UTF8_ESCAPES` (``+`` stays ``+``).
``DOI__URL_ENCODE(n)``
    a normalized DOI with each :data:`URL_ESCAPED` character and each non-ASCII character as
    its UTF-8 bytes in ``%XX`` (upper-case hex); by default :func:`escape_url_chars`, then the
    dialect's escaper of non-ASCII characters (``DOI__ESCAPE_NON_ASCII``).
``DOI__ASCII_UPPER(s)``
    the key of a value already proven printable ASCII (an engine may use a faster upper-casing
    there); everything else gets ``TRANSLATE`` with the 26 letters.
``DOI__KEY(n)``
    the key of a normalized DOI that may hold non-ASCII characters (or NULL): ``TRANSLATE``
    with the 26 letters, unless an engine has a cheaper exact spelling.

How the parse is laid out, so that no step reads its input more than a few times (engines
inline SQL functions, and a step read *n* times multiplies the work of every step before it):

1. ``unwrap(s)`` -> ``u``: a one-character *tag* followed by the still-encoded DOI. Tag ``0``
   is a bare string, ``2`` a ``doi:`` form (neither is decoded under ``decode="auto"``) and
   ``1`` a URL, URN or info form (decoded). Each wrapper is removed by one anchored regular
   expression replace that also rewrites the tag, so ``s`` is read exactly once.
2. ``decode(u)`` -> ``dt``: ``K`` followed by the decoded DOI, trimmed again at both edges
   (:func:`retrim`), or exactly ``E`` when the percent-encoding is bad; NULL stays NULL.
3. ``reason_of(dt)``, ``normalized_of(dt)``, ``valid_of(dt)`` read only ``dt``.

Fast paths in front skip all of it for printable-ASCII values whose DOI is known without
decoding (a bare DOI, a literal ``https://doi.org/`` or ``doi:`` prefix, ASCII padding, a
``urn:doi:`` without escapes), for bare DOIs with non-ASCII characters, and, for URLs whose
path starts with a literal ``10.`` and holds well-formed escapes, a cheap ``dt`` (decode the
path, no unwrapping) that the usual answers then read. They are sufficient conditions only, so
anything they do not recognise takes the full path, and the answers are the same either way
(the tests compare every engine with Python on both kinds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from sqlglot import exp

from airflow_doi.charclass import code_point_runs
from airflow_doi.presentation import (
    DEFAULT_BASE_URL,
    DOT_SEGMENT_REWRITES,
    MANDATORY,
    RECOMMENDED,
)
from airflow_doi.syntax import (
    DIRECTORY,
    DOI_SCHEME,
    ILLEGAL_RANGES,
    INFO_PREFIX,
    SCHEMELESS_HOSTS,
    SHORT_DOI_PATTERN,
    TRIM_CHARS,
    URL_HOSTS,
    URN_PREFIX,
    WHITESPACE,
)

__all__ = [
    "BASE_URL",
    "ILLEGAL",
    "PUBLIC_FUNCTIONS",
    "UTF8_ESCAPES",
    "UTF8_ESCAPE_TOKENS",
    "Builder",
    "Parts",
    "decode",
    "normalized_of",
    "reason_of",
    "unwrap",
    "url_path",
    "valid_of",
]

BASE_URL: Final[str] = DEFAULT_BASE_URL
LOWER: Final[str] = "abcdefghijklmnopqrstuvwxyz"
UPPER: Final[str] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: Illegal code points (Z39.84 4.1), from :data:`airflow_doi.syntax.ILLEGAL_RANGES`. Lone
#: surrogates cannot be stored in any engine's text type, so they need no test here.
ILLEGAL: Final[str] = (
    "[" + "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ILLEGAL_RANGES) + "]"
)


def _case_insensitive(text: str) -> str:
    """A regular expression for ``text`` that ignores ASCII case only (never Unicode folding:
    RE2 and Java ``(?i)`` match ``ſ`` to ``s`` and the Kelvin sign to ``k``)."""
    out = []
    for char in text:
        if "a" <= char.lower() <= "z":
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char == ".":
            out.append("[.]")
        else:
            out.append(char)
    return "".join(out)


def _class(chars: str) -> str:
    return "[" + "".join(chars) + "]"


_TRIM = _class(TRIM_CHARS)
_URL_PREFIX = (
    "(?:"
    + _case_insensitive("http")
    + "[sS]?://(?:"
    + "|".join(_case_insensitive(h) for h in URL_HOSTS)
    + ")|"
    + "|".join(_case_insensitive(h) for h in SCHEMELESS_HOSTS)
    + ")/"
)
_URN = _case_insensitive(URN_PREFIX)
_DOI = _case_insensitive(DOI_SCHEME)
_INFO = _case_insensitive(INFO_PREFIX)
_DIRECTORY = DIRECTORY.replace(".", "[.]")
_REGISTRANT = "[0-9]+(?:[.][0-9]+)*"

_CONT = "%[89abAB][0-9a-fA-F]"
#: One well-formed escape sequence (``UTF8_ESCAPES`` is a whole string of them and non-``%``).
#: A whole string whose ``%`` escapes spell well-formed UTF-8 (the table of RFC 3629 section 4,
#: written over hex pairs): anything else is ``bad_encoding``, exactly like Python's decoder.
UTF8_ESCAPE_TOKENS: Final[str] = (
    "%[0-7][0-9a-fA-F]"
    f"|%[cC][2-9a-fA-F]{_CONT}|%[dD][0-9a-fA-F]{_CONT}"
    f"|%[eE]0%[aAbB][0-9a-fA-F]{_CONT}"
    f"|%[eE][1-9a-cA-C]{_CONT}{_CONT}|%[eE][eEfF]{_CONT}{_CONT}"
    f"|%[eE][dD]%[89][0-9a-fA-F]{_CONT}"
    f"|%[fF]0%[9abAB][0-9a-fA-F]{_CONT}{_CONT}"
    f"|%[fF][1-3]{_CONT}{_CONT}{_CONT}"
    f"|%[fF]4%8[0-9a-fA-F]{_CONT}{_CONT}"
)
UTF8_ESCAPES: Final[str] = f"(?:[^%]|{UTF8_ESCAPE_TOKENS})*"
#: The same, when only ASCII escapes can be decoded (see the Redshift dialect).
ASCII_ESCAPES: Final[str] = "(?:[^%]|%[0-7][0-9a-fA-F])*"

#: The characters of a printable-ASCII bare DOI's suffix: nothing to trim, unwrap or decode.
PRINTABLE: Final[str] = "[!-~]"
#: The same without ``%``, ``?`` and ``#``: inside a URL these would need decoding or cutting.
PRINTABLE_URL: Final[str] = '[!-"$&->@-~]'


def plain_doi_pattern(suffix_class: str) -> str:
    """``10.<registrant>/`` then one or more characters of ``suffix_class``, all of it."""
    return f"^{_DIRECTORY}{_REGISTRANT}/{suffix_class}+$"


#: A printable-ASCII bare DOI: its own normal form.
FAST_PATH: Final[str] = plain_doi_pattern(PRINTABLE)
FAST_PATH_URL: Final[str] = plain_doi_pattern(PRINTABLE_URL)
#: Literal prefixes common enough in real catalogues to deserve a fast path of their own
#: (prefix, the class of the suffix's characters after it). Any other spelling (other case,
#: padding, escapes) takes the full path, which gives the same answer.
FAST_PREFIXES: Final[tuple[tuple[str, str], ...]] = (
    ("https://doi.org/", PRINTABLE_URL),
    ("http://dx.doi.org/", PRINTABLE_URL),
    ("https://dx.doi.org/", PRINTABLE_URL),
    ("http://doi.org/", PRINTABLE_URL),
    ("doi:", PRINTABLE),
    ("doi: ", PRINTABLE),
    # The label as reference lists print it (Crossref's display guidelines before 2017).
    ("DOI:", PRINTABLE),
    ("DOI: ", PRINTABLE),
)
#: The literal URL prefixes, for URLs whose escapes all decode to printable ASCII.
URL_PREFIXES: Final[tuple[str, ...]] = tuple(p for p, c in FAST_PREFIXES if c == PRINTABLE_URL)
#: A URL path character that needs no cutting and is safe inside a JSON string and in every
#: engine's bracket class (no ``"``, ``#``, ``?``, ``[``, ``\\`` or ``]``); ``%`` is allowed:
#: every ``%`` must start a :data:`PRINTABLE_ESCAPE`.
ESCAPED_URL_CHAR: Final[str] = "[!$-&'->@-Z^-~]"
#: An escape whose byte is printable ASCII (``%21``-``%7E``): decoded, still a printable DOI.
PRINTABLE_ESCAPE: Final[str] = "%(?:2[1-9a-fA-F]|[3-6][0-9a-fA-F]|7[0-9a-eA-E])"
#: A ``%`` that does not start a :data:`PRINTABLE_ESCAPE` (its exact complement at each ``%``,
#: written without lookahead, which RE2 and POSIX engines lack).
BAD_PRINTABLE_ESCAPE: Final[str] = (
    "%(?:$|[^2-7]|[2-7]$|2[^1-9a-fA-F]|[3-6][^0-9a-fA-F]|7[^0-9a-eA-E])"
)
#: The ASCII characters of :data:`~airflow_doi.syntax.WHITESPACE` (tab to carriage return,
#: space): the only padding a printable-ASCII value can have.
ASCII_WHITESPACE: Final[str] = "".join(c for c in WHITESPACE if c.isascii())
_ASCII_SPACE = _class(ASCII_WHITESPACE)
#: Still printable ASCII, one regular expression: ASCII padding, any ASCII case of a URL
#: prefix, or ``doi:`` and ASCII spaces, around a DOI without ``%``, ``?`` or ``#`` (so there
#: is nothing to decode or cut). Group 1 is the normalized DOI.
SIMPLE_WRAPPED: Final[str] = (
    f"^{_ASCII_SPACE}*(?:{_URL_PREFIX}|{_DOI}{_ASCII_SPACE}*)?"
    f'({_DIRECTORY}{_REGISTRANT}/[!-"$&->@-~]+){_ASCII_SPACE}*$'
)
#: A ``urn:doi:`` form in printable ASCII without ``%``, ``?`` or ``#`` whose registrant ends
#: at a colon: that first colon is the slash, and nothing needs decoding.
URN_SIMPLE: Final[str] = f"^{_URN}{_DIRECTORY}{_REGISTRANT}:{PRINTABLE_URL}+$"
#: The same after the literal, lower-case :data:`~airflow_doi.syntax.URN_PREFIX` (the form
#: RFC 8141 and the IDF write): a test some engines spell without a regular expression.
URN_LITERAL: Final[str] = f"^{URN_PREFIX}{_DIRECTORY}{_REGISTRANT}:{PRINTABLE_URL}+$"
#: A bare DOI whose suffix holds no illegal and no trimmable character (non-ASCII allowed):
#: nothing to trim, unwrap or decode, so it is its own normal form.
BARE_ANY_CLASS: Final[str] = "[^" + ILLEGAL[1:-1] + "".join(TRIM_CHARS) + "]"
BARE_ANY: Final[str] = f"^{_DIRECTORY}{_REGISTRANT}/{BARE_ANY_CLASS}+$"
#: A URL (no padding) whose path starts with a literal ``10.`` and is printable ASCII without
#: ``?`` or ``#`` (so there is nothing to cut): its ``dt`` is ``K`` + the decoded path when the
#: escapes pass :data:`UTF8_ESCAPES`, else ``E``, without the unwrapping chain.
URL_WITH_ESCAPES: Final[str] = f"^{_URL_PREFIX}{_DIRECTORY}[!-\"$-&'->@-~]*$"
#: Suffix reserved by Z39.84 (one character, then ``/``); ``.`` is one character in every
#: engine, so this holds for non-ASCII DOIs too.
RESERVED: Final[str] = "^[^/]*/./"

#: Characters ``doi_url`` escapes, ``%`` first so that no escape is escaped twice.
URL_ESCAPED: Final[str] = "%" + "".join(c for c in MANDATORY + RECOMMENDED if c != "%")


def char_class(chars: str) -> str:
    """A bracket class of the printable-ASCII ``chars``, runs as ranges (no character that
    needs escaping inside a class: callers pass none of ``\\ ] ^ -`` at a run's edge)."""
    return "[" + "".join(
        chr(a) if a == b else f"{chr(a)}{chr(b)}" if b == a + 1 else f"{chr(a)}-{chr(b)}"
        for a, b in code_point_runs(chars)) + "]"


#: A character ``doi_url`` writes as it is: printable ASCII outside :data:`URL_ESCAPED`.
URL_PLAIN: Final[str] = char_class("".join(
    chr(c) for c in range(0x21, 0x7F) if chr(c) not in URL_ESCAPED))
#: Where a DOI's URL path is the DOI itself: nothing to escape, and no ``/.`` that could
#: start a dot segment (:data:`~airflow_doi.presentation.DOT_SEGMENT_REWRITES`).
DOT_SEGMENT_START: Final[str] = "/."

PUBLIC_FUNCTIONS: Final[tuple[str, ...]] = (
    "doi_normalize",
    "doi_key",
    "doi_is_valid",
    "doi_reason",
    "doi_url",
)


def lit(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def re_match(value: exp.Expression, pattern: str) -> exp.Expression:
    return exp.Anonymous(this="DOI__RE_MATCH", expressions=[value, lit(pattern)])


def re_extract(value: exp.Expression, pattern: str) -> exp.Expression:
    """Group 1 of the first match, or NULL when there is none. One read of ``value``: engines
    without common-subexpression elimination inside CASE would evaluate NULLIF's twice."""
    return exp.Anonymous(this="DOI__RE_EXTRACT", expressions=[value, lit(pattern)])


def re_replace(value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
    return exp.Anonymous(
        this="DOI__RE_REPLACE", expressions=[value, lit(pattern), lit(replacement)]
    )


def _and(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    return exp.And(this=left, expression=right)


def _or(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    return exp.Or(this=left, expression=right)


def _not(value: exp.Expression) -> exp.Expression:
    return exp.Not(this=value)


def _concat(*parts: exp.Expression) -> exp.Expression:
    result = parts[0]
    for part in parts[1:]:
        result = exp.DPipe(this=result, expression=part)
    return result


def _tail(value: exp.Expression) -> exp.Expression:
    """Everything after the one-character tag."""
    return exp.Substring(this=value, start=exp.Literal.number(2))


def ascii_upper(value: exp.Expression) -> exp.Expression:
    """The comparison key: ASCII a-z to A-Z and nothing else (never UPPER)."""
    return exp.Translate(this=value, from_=lit(LOWER), to=lit(UPPER))


def key_of(value: exp.Expression) -> exp.Expression:
    """The key of a normalized DOI that may hold non-ASCII characters (``DOI__KEY``)."""
    return exp.Anonymous(this="DOI__KEY", expressions=[value])


def unwrap(s: exp.Expression) -> exp.Expression:
    """Trim, then remove the presentation wrapper; see the module docstring for the tags."""
    trimmed = re_replace(s, f"^{_TRIM}+|{_TRIM}+$", "")
    # URL: keep the path up to the first raw ? or #; tag 1.
    tagged = re_replace(_concat(lit("0"), trimmed), f"(?s)^0{_URL_PREFIX}([^?#]*).*$", "1\\1")
    # URN, bare or as a URL path: the first colon is the first slash unless a slash comes first.
    tagged = re_replace(tagged, f"^.{_URN}([^:/]*):", "1\\1/")
    tagged = re_replace(tagged, f"^.{_URN}", "1")
    tagged = re_replace(tagged, f"^0{_DOI}{_class(WHITESPACE)}*", "2")
    return re_replace(tagged, f"^0{_INFO}", "1")


def decode(u: exp.Expression) -> exp.Expression:
    """``K`` + the DOI with URL encoding undone (tag-1 forms only), or ``E`` for bad encoding.

    Written as COALESCE(common case, rare case) rather than CASE so that the common case reads
    ``u`` once: a CASE would read it in the condition and again in the result.
    """
    # Tags 0 and 2, and tag 1 without a "%", need no decoding: retag them K in one step.
    ready = re_replace(u, "(?s)^(?:[02]|1([^%]*)$)", "K\\1")
    already = re_extract(ready, "(?s)^(K.*)$")
    decoded = exp.Case(
        ifs=[
            exp.If(
                this=re_match(ready.copy(), f"^1{UTF8_ESCAPES}$"),
                true=_concat(
                    lit("K"),
                    exp.Anonymous(this="DOI__PCT_DECODE", expressions=[_tail(ready.copy())]),
                ),
            ),
            exp.If(this=_not(exp.Is(this=ready.copy(), expression=exp.null())), true=lit("E")),
        ],
    )
    return retrim(exp.Coalesce(this=already, expressions=[decoded]))


def retrim(dt: exp.Expression) -> exp.Expression:
    """``dt`` without :data:`~airflow_doi.syntax.TRIM_CHARS` at the edges of its DOI: what
    decoding (``%20``), a cut query or a wrapper left there (``syntax._analyse`` trims again
    too). Two anchored replaces without groups: ``E`` and NULL pass through unchanged."""
    return re_replace(re_replace(dt, f"^K{_TRIM}+", "K"), f"{_TRIM}+$", "")


def url_dt(s: exp.Expression) -> exp.Expression:
    """``dt`` of a value matching :data:`URL_WITH_ESCAPES`: the path from its first ``10.``
    (no wrapper contains one) decoded, or ``E`` when the escapes are not well-formed UTF-8.

    The decoder only ever sees checked escapes (NULL otherwise), even in an engine that folds
    constants before it looks at the CASE around them. A step of its own so that the public
    bodies hold no subquery (PostgreSQL does not inline a function whose body has one).
    """
    path = exp.Substring(this=s.copy(), start=exp.StrPosition(this=s.copy(), substr=lit(DIRECTORY)))
    checked = exp.Case(ifs=[exp.If(this=re_match(s.copy(), f"^{UTF8_ESCAPES}$"), true=path)])
    decoded = exp.Anonymous(this="DOI__PCT_DECODE", expressions=[checked])
    return retrim(exp.Coalesce(this=_concat(lit("K"), decoded), expressions=[lit("E")]))


_LEGAL = "[^" + ILLEGAL[1:]
#: ``dt`` of a DOI string (reserved suffixes included): group 1 is the normalized DOI.
NORMALIZED: Final[str] = f"^K({_DIRECTORY}{_REGISTRANT}/{_LEGAL}+)$"
#: ``dt`` of a valid DOI: as above, and the suffix is one character or its second is not "/".
VALID: Final[str] = f"^K{_DIRECTORY}{_REGISTRANT}/{_LEGAL}(?:{_LEGAL[:-1]}/]{_LEGAL}*)?$"


def normalized_of(dt: exp.Expression) -> exp.Expression:
    # One regular expression, so that engines without common-subexpression elimination read
    # ``dt`` (and everything before it) once.
    return re_extract(dt, NORMALIZED)


def valid_of(dt: exp.Expression) -> exp.Expression:
    return exp.Coalesce(this=re_match(dt, VALID), expressions=[exp.false()])


def reason_of(dt: exp.Expression) -> exp.Expression:
    """The first failing check, in :data:`airflow_doi.syntax.REASONS` order."""

    def when(condition: exp.Expression, reason: str) -> exp.If:
        return exp.If(this=condition, true=lit(reason))

    return exp.Case(
        ifs=[
            when(
                _or(
                    exp.Is(this=dt, expression=exp.null()),
                    exp.EQ(this=dt.copy(), expression=lit("K")),
                ),
                "empty",
            ),
            when(exp.EQ(this=dt.copy(), expression=lit("E")), "bad_encoding"),
            when(re_match(dt.copy(), ILLEGAL), "bad_character"),
            when(re_match(dt.copy(), f"^K{SHORT_DOI_PATTERN}$"), "short_doi"),
            when(_not(re_match(dt.copy(), f"^K{_DIRECTORY}")), "bad_directory"),
            when(
                _not(re_match(_concat(dt.copy(), lit("/")), f"^K{_DIRECTORY}{_REGISTRANT}/")),
                "bad_registrant",
            ),
            when(_not(re_match(dt.copy(), "(?s)^K[^/]*/.")), "missing_suffix"),
            when(re_match(dt.copy(), "(?s)^K[^/]*/./"), "reserved_suffix"),
        ]
    )


def escape_url_chars(n: exp.Expression) -> exp.Expression:
    """Every character of :data:`URL_ESCAPED` in ``n`` as ``%XX`` (``%`` first)."""
    escaped = n
    for char in URL_ESCAPED:
        escaped = exp.Anonymous(
            this="REPLACE", expressions=[escaped, lit(char), lit(f"%{ord(char):02X}")]
        )
    return escaped


def url_path(n: exp.Expression) -> exp.Expression:
    """``presentation.encode_path``: the IDF sets and non-ASCII characters as UTF-8 ``%XX``
    (``DOI__URL_ENCODE``: by default :func:`escape_url_chars`, then the dialect's escaper of
    non-ASCII characters), then dot segments."""
    escaped: exp.Expression = exp.Anonymous(this="DOI__URL_ENCODE", expressions=[n])
    for pattern, replacement in DOT_SEGMENT_REWRITES:
        escaped = re_replace(escaped, pattern, replacement)
    return escaped


# --- public functions --------------------------------------------------------------------


class Parts(Protocol):
    """The three slow-path answers for one argument, as a binding strategy provides them.

    A strategy decides how ``dt`` is shared: helper function calls, plain inlining, or a
    scalar subquery (see :mod:`airflow_doi.sqlgen.render`); the public bodies do not care.
    Given ``dt``, a method answers for that decoded string instead of the full parse's.
    """

    def normalized(self, dt: exp.Expression | None = None) -> exp.Expression: ...

    def valid(self, dt: exp.Expression | None = None) -> exp.Expression: ...

    def reason(self, dt: exp.Expression | None = None) -> exp.Expression: ...

    def url_dt(self) -> exp.Expression: ...


Builder = Callable[[exp.Expression, Parts], exp.Expression]


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def starts(value: exp.Expression, prefix: str) -> exp.Expression:
    """``DOI__STARTS``: ``value`` begins with the literal ``prefix`` (a test ~10x cheaper than
    a regular expression in every engine, so that most values skip most branches)."""
    return _call("DOI__STARTS", value, lit(prefix))


def plain_doi(value: exp.Expression, suffix_class: str) -> exp.Expression:
    """``DOI__PLAIN_DOI``: all of ``value`` is ``10.<registrant>/`` and one or more characters
    of the bracket class ``suffix_class``. By default one anchored regular expression; an
    engine whose regular expressions cost more per call than per character may spell it as
    cheaper exact tests (see the PostgreSQL dialect)."""
    return _call("DOI__PLAIN_DOI", value, lit(suffix_class))


def prefixed_doi(s: exp.Expression, prefix: str, suffix_class: str) -> exp.Expression:
    """``DOI__PREFIXED_DOI``: ``s`` is the literal ``prefix`` then a :func:`plain_doi`."""
    return _call("DOI__PREFIXED_DOI", s, lit(prefix), lit(suffix_class))


def prefixed_urn(s: exp.Expression) -> exp.Expression:
    """``DOI__PREFIXED_URN``: ``s`` matches :data:`URN_LITERAL` (by default that regular
    expression, after the literal prefix test)."""
    return _call("DOI__PREFIXED_URN", s)


def _starts_10(s: exp.Expression, suffix_class: str) -> exp.Expression:
    # The literal "10." test first: it lets every wrapped value skip the rest.
    return _and(starts(s.copy(), DIRECTORY), plain_doi(s.copy(), suffix_class))


def _literal_shapes(s: exp.Expression, only: str | None = None) -> list[exp.If]:
    """The cheapest shortcuts, as ``exp.If(condition, DOI)``: a printable-ASCII bare DOI, and
    each of :data:`FAST_PREFIXES` before one; ``only``, when given, is the bracket class (a
    part of every branch's own) each character of the DOI must be in."""
    branches = [exp.If(this=_starts_10(s, only or PRINTABLE), true=s.copy())]
    for prefix, suffix_class in FAST_PREFIXES:
        rest = exp.Substring(this=s.copy(), start=exp.Literal.number(len(prefix) + 1))
        condition = prefixed_doi(s.copy(), prefix, only or suffix_class)
        branches.append(exp.If(this=condition, true=rest))
    return branches


Answer = Callable[[exp.Expression], exp.Expression]


#: Optional shortcuts: a dialect lists those worth their cost in ``Dialect.shortcuts``; the
#: lowering drops the branches of the others (``DOI__IF_SHORTCUT``).
ESCAPED_URLS: Final[str] = "escaped_urls"
PADDED: Final[str] = "padded"


def _optional(shortcut: str, branch: exp.If) -> exp.If:
    branch.set("this", _call("DOI__IF_SHORTCUT", lit(shortcut), branch.this))
    return branch


def _escaped_url_branches(s: exp.Expression, answer: Answer) -> list[exp.If]:
    """A literal URL prefix, then a DOI whose escapes all decode to printable ASCII (and no
    character needs cutting or is unsafe to decode): its decoded path is a printable-ASCII
    DOI, so the usual ``answer`` applies without the full parse. Optional
    (:data:`ESCAPED_URLS`): worth it where the dialect has a cheap decoder of ASCII escapes."""
    branches = []
    for prefix in URL_PREFIXES:
        rest = exp.Substring(this=s.copy(), start=exp.Literal.number(len(prefix) + 1))
        condition = _and(
            prefixed_doi(s.copy(), prefix, ESCAPED_URL_CHAR),
            _call("DOI__ESCAPES_PRINTABLE", s.copy()),  # the prefix holds no "%"
        )
        decoded = _call("DOI__ASCII_DECODE", rest)
        branches.append(_optional(ESCAPED_URLS, exp.If(this=condition, true=answer(decoded))))
    return branches


def _padded_branch(s: exp.Expression, answer: Answer) -> exp.If:
    """A printable-ASCII bare DOI with ASCII whitespace around it. Optional (:data:`PADDED`):
    worth it where the one regular expression for every padded or odd-case spelling costs
    several plain tests."""
    trimmed = _call("DOI__TRIM_ASCII_WHITESPACE", s.copy())
    branch = exp.If(this=plain_doi(trimmed.copy(), PRINTABLE), true=answer(trimmed))
    return _optional(PADDED, branch)


def _fast_branches(
    s: exp.Expression,
    answer: Answer,
    hopeless: exp.Expression | None = None,
    *,
    answer_any: Answer | None = None,
    from_dt: Answer,
    url_dt: exp.Expression,
) -> list[exp.If]:
    """CASE branches for the shapes whose DOI (or ``dt``) is known without the full parse.

    ``answer(doi)`` for a printable-ASCII DOI, ``answer_any(doi)`` for a DOI that may hold
    non-ASCII characters (default: ``answer``), ``from_dt(url_dt)`` for a URL with escapes
    (``url_dt`` is :func:`url_dt` of ``s`` as the binding strategy shares it).
    Cheapest and commonest first: the bare DOI, then literal prefixes (and, where the dialect
    has a cheap decoder, literal URL prefixes with printable escapes), a literal ``urn:doi:``,
    then (after ``hopeless``, when given) a bare DOI with non-ASCII characters, and the
    regular expressions last: padded and odd-case spellings, a ``urn:doi:`` in another case,
    a URL with escapes. Every branch gives the full parse's answer, so their order only
    decides what a row costs: each test a row fails before its own is paid for, and the
    regular expressions cost several literal tests each.
    """
    urn_rest = exp.Substring(this=s.copy(), start=exp.Literal.number(len(URN_PREFIX) + 1))

    def urn(condition: exp.Expression) -> exp.If:
        return exp.If(this=condition, true=answer(_call("DOI__URN_SLASH", urn_rest.copy())))

    branches = [exp.If(this=b.this, true=answer(b.args["true"])) for b in _literal_shapes(s)]
    branches.extend(_escaped_url_branches(s, answer))
    branches.append(urn(prefixed_urn(s.copy())))
    if hopeless is not None:
        branches.append(exp.If(this=_hopeless(s), true=hopeless))
    branches.append(
        exp.If(this=_starts_10(s, BARE_ANY_CLASS), true=(answer_any or answer)(s.copy()))
    )
    branches.append(_padded_branch(s, answer))
    branches.append(
        exp.If(
            this=re_match(s.copy(), SIMPLE_WRAPPED),
            true=answer(_call("DOI__SIMPLE_DOI", s.copy())),
        )
    )
    branches.append(urn(re_match(s.copy(), URN_SIMPLE)))
    branches.append(exp.If(this=re_match(s.copy(), URL_WITH_ESCAPES), true=from_dt(url_dt)))
    return branches


def _hopeless(s: exp.Expression) -> exp.Expression:
    """No ``10.`` and no ``%``: no unwrapping or decoding can make this a DOI."""

    def absent(text: str) -> exp.Expression:
        position = exp.StrPosition(this=s.copy(), substr=lit(text))
        return exp.EQ(this=position, expression=exp.Literal.number(0))

    return _and(absent(DIRECTORY), absent("%"))


def _ascii_upper_of_ascii(value: exp.Expression) -> exp.Expression:
    """The key of a value already known to be printable ASCII: engines may use a faster
    upper-casing there, because on ASCII every upper-casing is exactly a-z -> A-Z."""
    return exp.Anonymous(this="DOI__ASCII_UPPER", expressions=[value])


def reserved(value: exp.Expression) -> exp.Expression:
    """``DOI__RESERVED``: whether a normalized DOI's suffix is reserved (Z39.84 4.3: ``*/``
    first); by default :data:`RESERVED`, a regular expression."""
    return _call("DOI__RESERVED", value)


def doi_normalize(s: exp.Expression, parts: Parts) -> exp.Expression:
    return exp.Case(
        ifs=_fast_branches(
            s,
            lambda doi: doi,
            hopeless=exp.null(),
            from_dt=parts.normalized,
            url_dt=parts.url_dt(),
        ),
        default=parts.normalized(),
    )


def doi_key(s: exp.Expression, parts: Parts) -> exp.Expression:
    return exp.Case(
        ifs=_fast_branches(
            s,
            _ascii_upper_of_ascii,
            hopeless=exp.null(),
            answer_any=key_of,
            from_dt=lambda dt: key_of(parts.normalized(dt)),
            url_dt=parts.url_dt(),
        ),
        default=key_of(parts.normalized()),
    )


def doi_is_valid(s: exp.Expression, parts: Parts) -> exp.Expression:
    return exp.Case(
        ifs=_fast_branches(
            s,
            lambda doi: _not(reserved(doi)),
            hopeless=exp.false(),
            from_dt=parts.valid,
            url_dt=parts.url_dt(),
        ),
        default=parts.valid(),
    )


def doi_reason(s: exp.Expression, parts: Parts) -> exp.Expression:
    def reserved_or_null(doi: exp.Expression) -> exp.Expression:
        return exp.Case(ifs=[exp.If(this=reserved(doi), true=lit("reserved_suffix"))])

    return exp.Case(
        ifs=_fast_branches(s, reserved_or_null, from_dt=parts.reason, url_dt=parts.url_dt()),
        default=parts.reason(),
    )


def doi_url(s: exp.Expression, parts: Parts) -> exp.Expression:
    """For the common spellings of a DOI (:func:`_literal_shapes`) whose every character is
    :data:`URL_PLAIN` and that holds no :data:`DOT_SEGMENT_START` (no prefix holds one): the
    base URL and the DOI, nothing to encode. Everything else: the encoded path of
    ``doi_normalize``'s answer (the same answer for these, at several times the cost)."""
    no_dot_segment = exp.EQ(
        this=exp.StrPosition(this=s.copy(), substr=lit(DOT_SEGMENT_START)),
        expression=exp.Literal.number(0),
    )
    shortcuts = [
        exp.If(this=_and(branch.this, no_dot_segment.copy()),
               true=_concat(lit(BASE_URL), branch.args["true"]))
        for branch in _literal_shapes(s, URL_PLAIN)
    ]
    encoded = _concat(lit(BASE_URL), url_path(doi_normalize(s, parts)))
    return exp.Case(ifs=shortcuts, default=encoded)


BUILDERS: Final[dict[str, Builder]] = {
    "doi_normalize": doi_normalize,
    "doi_key": doi_key,
    "doi_is_valid": doi_is_valid,
    "doi_reason": doi_reason,
    "doi_url": doi_url,
}
#: Helper steps: name -> (parameter, builder). Public functions call them in this order.
STEPS: Final[dict[str, Callable[[exp.Expression], exp.Expression]]] = {
    "doi__unwrap": unwrap,
    "doi__decode": decode,
    "doi__url_dt": url_dt,
    "doi__normalized": normalized_of,
    "doi__valid": valid_of,
    "doi__reason": reason_of,
}
RETURNS_BOOLEAN: Final[frozenset[str]] = frozenset({"doi_is_valid", "doi__valid"})
#: Functions whose answer for NULL is not NULL (so they cannot be declared STRICT).
NULL_AWARE: Final[frozenset[str]] = frozenset(
    {"doi_is_valid", "doi_reason", "doi__valid", "doi__reason"}
)
