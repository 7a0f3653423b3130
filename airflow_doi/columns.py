"""Vectorized DOI analysis on Arrow string arrays: the engine behind ``Series.doi`` and the CLI.

Each row is decided by exactly one tier, cheapest first:

1. **fast**: one anchored RE2 match recognises the common case (optional wrapper, ``10.``, a
   registrant, ``/``, an unreserved suffix, no ``%``, ``?``, ``#`` or illegal character). No
   decode mode changes such a row and no query is cut, so its DOI is the text from the first
   ``10.`` on, cut with one byte-wise left trim of the wrapper's characters.
2. **percent and URN**: URL, info and URN forms (every form under ``decode="always"``) whose
   escapes are all ASCII (``%2F``, ``%28``). They are unwrapped, decoded with plain substring
   replacement (one pass per distinct escape in the slice) and accepted only if the result
   passes one more regex.
3. **junk**: non-empty bare text with only legal characters that does not start with ``10.``
   is ``bad_directory`` (``n/a``, ``PMID:123``), decided without leaving Arrow.
4. **scalar**: everything else (other invalid values, non-ASCII escapes, control characters,
   cells Arrow cannot hold) goes through :func:`airflow_doi.syntax.validate`, once per
   distinct value.

The regexes are built from the constants in :mod:`airflow_doi.syntax` and
:mod:`airflow_doi.presentation`, so a host or prefix cannot drift between the engines; the tests
check that this module and the scalar functions agree on every conformance vector and on
hypothesis-generated text. Large inputs are cut into slices that run on a thread pool (Arrow
kernels release the GIL).

Where the native core is built (:mod:`airflow_doi.native.arrow`, C over the same rules), it
replaces all four tiers: one pass per value, no regular expression, no row leaves Arrow. The
tiers above remain the fallback (no C compiler at install time, or ``AIRFLOW_DOI_NATIVE=0``)
and are tested as such."""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as _compute

from airflow_doi.native import arrow as native_arrow
from airflow_doi.presentation import DEFAULT_BASE_URL, DOT_SEGMENT_RE, MANDATORY, RECOMMENDED
from airflow_doi.presentation import encode_path as _encode_path
from airflow_doi.syntax import (
    DIRECTORY,
    DOI_SCHEME,
    ILLEGAL_RANGES,
    INFO_PREFIX,
    REASONS,
    REGISTRANT_PATTERN,
    SCHEMELESS_HOSTS,
    SHORT_DOI_PREFIX,
    TRIM_CHARS,
    URL_HOSTS,
    URN_PREFIX,
    Decode,
    ascii_upper,
    validate,
)

__all__ = ["SLICE_ROWS", "Analysis", "analyse", "keys", "to_large_string"]

#: Rows per slice handed to one worker thread; small enough to spread 1M rows over the cores,
#: large enough that the per-call overhead of each kernel stays negligible.
SLICE_ROWS: Final[int] = 1 << 17

_STRING: Final[pa.DataType] = pa.large_string()

#: Where every buffer of the engine comes from. pyarrow's default pool (mimalloc in the wheels
#: this was measured with) serialized the worker threads: two threads took as long as one.
#: With the system allocator the slices run in parallel (measured ~1.9x on two cores).
POOL: Final[pa.MemoryPool] = pa.system_memory_pool()


class _PooledCompute:
    """``pyarrow.compute`` with ``memory_pool=POOL`` on every call."""

    def __getattr__(self, name: str) -> Any:
        function = getattr(_compute, name)
        if name == "fill_null":  # a Python helper without a pool argument; tiny outputs
            return function
        return functools.partial(function, memory_pool=POOL)


pc: Final[Any] = _PooledCompute()


def _ci(literal: str) -> str:
    """RE2 for an ASCII literal, case-insensitive through explicit ``[xX]`` classes.

    ``(?i)`` is not used: RE2 would also fold non-ASCII look-alikes (``ſ`` for ``s``, the Kelvin
    sign for ``k``) that the scalar parser, compiled with ``re.ASCII``, does not accept.
    """
    parts = []
    for char in literal:
        if char in string.ascii_lowercase:
            parts.append(f"[{char}{ascii_upper(char)}]")
        elif char in string.ascii_uppercase:
            parts.append(f"[{chr(ord(char) + 32)}{char}]")
        else:
            parts.append(re.escape(char))
    return "".join(parts)


def _illegal_class() -> str:
    """:data:`syntax.ILLEGAL_RANGES` as the body of an RE2 class (``\\x{..}`` escapes).

    Lone surrogates need no entry: Arrow strings are valid UTF-8, which cannot encode one
    (Python strings holding one never reach Arrow; they take the scalar path).
    """
    return "".join(
        f"\\x{{{low:x}}}" if low == high else f"\\x{{{low:x}}}-\\x{{{high:x}}}"
        for low, high in ILLEGAL_RANGES
    )


_WRAPPERS = (*URL_HOSTS, *SCHEMELESS_HOSTS, "https://", DOI_SCHEME, " ", INFO_PREFIX, URN_PREFIX)
#: Every character a wrapper can be spelled with, in both cases. Rows are only cut after a
#: regex proved them to be "wrapper, then 10.", so trimming these from the left removes exactly
#: the wrapper (a DOI starts with "1", which no wrapper contains).
_WRAPPER_CHARS: Final[str] = "".join(sorted({c for w in _WRAPPERS for c in w + ascii_upper(w)}))
if DIRECTORY[0] in _WRAPPER_CHARS:
    raise RuntimeError("a wrapper contains the first character of '10.': ltrim would cut a DOI")

_ILLEGAL: Final[str] = _illegal_class()
_URL_WRAPPER: Final[str] = (
    f"(?:{_ci('http')}[sS]?://(?:{'|'.join(_ci(h) for h in URL_HOSTS)})/"
    f"|(?:{'|'.join(_ci(h) for h in SCHEMELESS_HOSTS)})/)"
)
#: Only ASCII spaces after ``doi:``: other whitespace sends the row to the scalar tier.
_DOI_WRAPPER: Final[str] = f"{_ci(DOI_SCHEME)} *"
_INFO_WRAPPER: Final[str] = _ci(INFO_PREFIX)
_ANY_WRAPPER: Final[str] = f"(?:{_URL_WRAPPER}|{_DOI_WRAPPER}|{_INFO_WRAPPER})"
_REGISTRANT: Final[str] = REGISTRANT_PATTERN
_DOI_PREFIX: Final[str] = f"{re.escape(DIRECTORY)}{_REGISTRANT}"
_PREFIX: Final[str] = f"{_DOI_PREFIX}/"

#: A suffix character in the fast tier: legal, and not one that decoding or a query cut reads.
_TRIM: Final[str] = "".join(f"\\x{{{ord(c):x}}}" for c in TRIM_CHARS)
#: Suffix characters in the fast tier: legal, and not one that decoding or a query cut reads.
_S: Final[str] = f"[^{_ILLEGAL}%?#]"
_S_NO_SLASH: Final[str] = f"[^{_ILLEGAL}%?#/]"
_S_LAST: Final[str] = f"[^{_ILLEGAL}%?#{_TRIM}]"
_S_NO_SLASH_LAST: Final[str] = f"[^{_ILLEGAL}%?#/{_TRIM}]"
#: Tier 1: a valid DOI, optionally wrapped, that no decode mode changes. It does not end in a
#: character that trimming removes (and cannot start with one), so it is tested on the raw
#: text: only the rows it rejects are trimmed. The suffix is one character, or a second one
#: that is not "/" (Z39.84 4.3), and so on.
FAST_RE: Final[str] = (
    f"^{_ANY_WRAPPER}?{_PREFIX}"
    f"(?:{_S_LAST}|{_S}{_S_NO_SLASH_LAST}|{_S}{_S_NO_SLASH}{_S}*{_S_LAST})$"
)
#: Tier 2, after decoding: a valid DOI in which ``%``, ``?`` and ``#`` are ordinary characters
#: and that does not end in a character trimming would remove (a decoded ``%20``: the scalar
#: tier trims it, see :func:`airflow_doi.syntax.normalize`).
_DECODED_RE: Final[str] = (
    f"^{_PREFIX}(?:[^{_ILLEGAL}{_TRIM}]|[^{_ILLEGAL}][^{_ILLEGAL}/{_TRIM}]"
    f"|[^{_ILLEGAL}][^{_ILLEGAL}/][^{_ILLEGAL}]*[^{_ILLEGAL}{_TRIM}])$"
)
#: Characters and sequences that :func:`presentation.encode_path` rewrites.
_NEEDS_ENCODING_RE: Final[str] = (
    "[^\\x00-\\x7f]|[" + "".join(re.escape(c) for c in MANDATORY + RECOMMENDED) + "]|"
    + DOT_SEGMENT_RE.pattern
)


_URN_WRAPPER: Final[str] = f"{_URL_WRAPPER}?{_ci(URN_PREFIX)}"
#: Anything the scalar parser would not read as a bare DOI (used to single out plain junk).
_FORM_RE: Final[str] = (
    f"^(?:{_URL_WRAPPER}|{_ci(DOI_SCHEME)}|{_ci(URN_PREFIX)}|{_INFO_WRAPPER})"
)
_ILLEGAL_RE: Final[str] = f"[{_ILLEGAL}]"


@dataclass(frozen=True)
class _Tier2:
    """One family of tier-2 candidates: how to spot them and how to turn them into a DOI."""

    marker: str  # a literal every candidate contains (ASCII-lower-cased): a cheap prefilter
    match: str  # the whole trimmed text; the wrapper is followed by "10."
    urn: bool  # the first ":" stands for "/"
    decoded: bool  # percent-escapes are undone


def _tier2(decode: Decode) -> list[_Tier2]:
    """Tier-2 families for a decode mode: only ASCII escapes (``%00``-``%7F``) qualify."""
    escape = "|%[0-7][0-9A-Fa-f]" if decode != "never" else ""
    body = f"(?:[^{_ILLEGAL}%?#]{escape})*$"
    families = [  # in a URN the colon after the prefix stands for the slash; a slash is kept
        _Tier2(URN_PREFIX, f"^{_URN_WRAPPER}{_DOI_PREFIX}:{body}", True, decode != "never"),
        _Tier2(URN_PREFIX, f"^{_URN_WRAPPER}{_PREFIX}{body}", False, decode != "never"),
    ]
    # Without a "%" these forms are already judged by the fast tier or need the scalar one.
    if decode == "auto":  # URL and info forms are decoded; bare and doi: are not
        wrapper = f"(?:{_URL_WRAPPER}|{_INFO_WRAPPER})"
        families.append(_Tier2("%", f"^{wrapper}{re.escape(DIRECTORY)}{body}", False, True))
    elif decode == "always":
        wrapper = f"{_ANY_WRAPPER}?"
        families.append(_Tier2("%", f"^{wrapper}{re.escape(DIRECTORY)}{body}", False, True))
    return families


def _strings(values: tuple[str, ...]) -> pa.Array:
    """A small ``large_string`` array built from its buffers.

    ``pa.array`` would do, but any array built from Python or numpy objects makes pyarrow
    import pandas (a third of a second) to check for pandas types; the native path never does.
    """
    encoded = [value.encode("utf-8") for value in values]
    offsets = np.cumsum([0, *map(len, encoded)], dtype=np.int64)
    return pa.Array.from_buffers(
        _STRING, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def _bitmap(flags: np.ndarray[Any, np.dtype[np.bool_]]) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _bools(flags: np.ndarray[Any, np.dtype[np.bool_]]) -> pa.BooleanArray:
    """A numpy bool array as an Arrow one, from its buffers (see :func:`_strings`)."""
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, _bitmap(flags)])


#: Reason codes: ``REASONS[code]``; -1 for a valid row.
_REASON_VALUES: Final[pa.Array] = _strings(REASONS)
_EMPTY: Final[int] = REASONS.index("empty")


@dataclass(frozen=True)
class Analysis:
    """Per-row outcome, aligned with the input: the DOIs and a reason code per row.

    ``doi`` is null where the value is not a DOI; the reason is null where it is valid (a
    reserved suffix has both a DOI and a reason), exactly like :class:`syntax.Validation`.
    Reasons are kept as small integers (an index into :data:`syntax.REASONS`, -1 when valid):
    ``valid`` and the counts then cost nothing, and the text is built only when asked for.
    """

    doi: pa.ChunkedArray
    reason_codes: np.ndarray[Any, np.dtype[np.int8]]

    @property
    def valid(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        return self.reason_codes < 0

    @property
    def valid_array(self) -> pa.BooleanArray:
        """:attr:`valid` as an Arrow column."""
        return _bools(self.valid)

    @property
    def reason(self) -> pa.Array:
        codes = np.ascontiguousarray(self.reason_codes, dtype=np.int8)
        present = codes >= 0
        indices = pa.Array.from_buffers(
            pa.int8(), len(codes), [_bitmap(present), pa.py_buffer(codes)],
            null_count=int(len(codes) - present.sum()),
        )
        return pc.cast(pa.DictionaryArray.from_arrays(indices, _REASON_VALUES), _STRING)


    def key(self) -> pa.ChunkedArray:
        # Byte-wise a-z -> A-Z: on UTF-8 that is exactly syntax.ascii_upper (bytes of non-ASCII
        # characters are all >= 0x80 and are left alone).
        return pc.ascii_upper(self.doi)

    def url(self, base: str = DEFAULT_BASE_URL) -> pa.ChunkedArray:
        if not base.endswith("/"):
            base += "/"
        if native_arrow.module() is not None:
            return native_arrow.run(self.doi, output="encode", base=base)[0]
        return pa.chunked_array([_urls(chunk, base) for chunk in self.doi.chunks], _STRING)


def to_large_string(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """Any Arrow string-like column as a ``large_string`` chunked array."""
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    if values.type != _STRING:
        values = pc.cast(values, _STRING)
    return values


def analyse(
    values: pa.Array | pa.ChunkedArray,
    decode: Decode = "auto",
    overrides: Mapping[int, object] | None = None,
    *,
    threads: int | None = None,
) -> Analysis:
    """Analyse a string column; ``overrides`` maps row numbers to values for the scalar tier.

    ``overrides`` carries what Arrow cannot hold (bytes that are not UTF-8, strings with lone
    surrogates): the row in ``values`` is ignored and the value goes to :func:`syntax.validate`.
    """
    if decode not in ("auto", "always", "never"):
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}")
    overrides = overrides or {}
    if native_arrow.module() is not None:
        doi, codes = native_arrow.run(values, decode, "doi", threads=threads)
        assert codes is not None
        if overrides:
            outcomes = {row: validate(value, decode=decode) for row, value in overrides.items()}
            doi = _patch(doi, {row: o.doi for row, o in outcomes.items()})
            for row, outcome in outcomes.items():
                codes[row] = -1 if outcome.reason is None else REASONS.index(outcome.reason)
        return Analysis(doi=doi, reason_codes=codes)
    column = to_large_string(values)
    slices = [
        (column.slice(start, SLICE_ROWS).combine_chunks(), start)
        for start in range(0, max(len(column), 1), SLICE_ROWS)
    ]

    def run(item: tuple[pa.Array, int]) -> tuple[pa.Array, np.ndarray[Any, Any]]:
        chunk, start = item
        local = {i - start: v for i, v in overrides.items() if start <= i < start + len(chunk)}
        return _analyse_slice(chunk, decode, local)

    results = native_arrow.map_slices(run, slices, threads)
    return Analysis(
        doi=pa.chunked_array([r[0] for r in results], _STRING),
        reason_codes=np.concatenate([r[1] for r in results]),
    )


def keys(
    values: pa.Array | pa.ChunkedArray,
    decode: Decode = "auto",
    overrides: Mapping[int, object] | None = None,
) -> pa.ChunkedArray:
    """The comparison key of every row (null where there is no DOI): ``analyse(...).key()``,
    in one native pass where the native core is built."""
    if native_arrow.module() is None:
        return analyse(values, decode, overrides).key()
    if decode not in ("auto", "always", "never"):
        raise ValueError(f"decode must be 'auto', 'always' or 'never', not {decode!r}")
    key, _ = native_arrow.run(values, decode, "key")
    if overrides:
        key = _patch(key, {row: _scalar_key(value, decode) for row, value in overrides.items()})
    return key


def _scalar_key(value: object, decode: Decode) -> str | None:
    outcome = validate(value, decode=decode)
    return None if outcome.doi is None else ascii_upper(outcome.doi)


def _patch(column: pa.ChunkedArray, rows: Mapping[int, str | None]) -> pa.ChunkedArray:
    """``column`` with the given rows replaced (the few cells Arrow could not hold)."""
    mask = np.zeros(len(column), dtype=bool)
    numbers = np.fromiter(rows, dtype=np.int64, count=len(rows))
    mask[numbers] = True
    order = np.argsort(numbers, kind="stable")
    replacements = pa.array([list(rows.values())[i] for i in order], _STRING)
    patched = pc.replace_with_mask(column.combine_chunks(), pa.array(mask), replacements)
    return pa.chunked_array([patched], _STRING)


def _flags(mask: Any) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """A boolean Arrow result as a numpy array, null counted as false."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)


def _scatter(parts: list[tuple[np.ndarray[Any, Any], pa.Array]]) -> pa.Array:
    """Concatenate ``(row numbers, values)`` parts into one array ordered by row number."""
    parts = [(rows, values) for rows, values in parts if len(rows)]
    if not parts:
        return pa.array([], _STRING)
    numbers = np.concatenate([rows for rows, _ in parts])
    if len(parts) == 1 and np.all(numbers[1:] > numbers[:-1]):
        return parts[0][1]
    order = np.argsort(numbers, kind="stable")
    return pc.take(pa.concat_arrays([v for _, v in parts], memory_pool=POOL), order)


def _analyse_slice(
    values: pa.Array, decode: Decode, overrides: Mapping[int, object]
) -> tuple[pa.Array, np.ndarray[Any, np.dtype[np.int8]]]:
    """One slice through every tier: its DOIs and its reason codes."""
    fast = _flags(pc.match_substring_regex(values, FAST_RE))
    if overrides:  # the scalar tier judges these whatever ``values`` holds in their place
        fast[list(overrides)] = False
    present = _flags(pc.is_valid(values))
    rest = ~fast & present
    if overrides:
        rest[list(overrides)] = True
    rest_rows = np.flatnonzero(rest)

    # A fast row is a wrapper made only of _WRAPPER_CHARS, then "10.": one byte-wise left trim
    # removes exactly the wrapper, and leaves bare DOIs alone.
    doi = pc.if_else(
        pa.array(fast),
        _cut_wrapper(values),
        pa.scalar(None, _STRING),
    )
    codes = np.where(present, -1, _EMPTY).astype(np.int8)
    if len(rest_rows):
        untrimmed = pc.take(values, rest_rows)
        trimmed = pc.utf8_trim(untrimmed, characters=TRIM_CHARS)
        changed = _flags(pc.not_equal(pc.binary_length(trimmed), pc.binary_length(untrimmed)))
        rest_doi, rest_reason = _analyse_rest(
            trimmed,
            changed,
            {int(np.searchsorted(rest_rows, i)): v for i, v in overrides.items()},
            decode,
        )
        doi = pc.replace_with_mask(doi, pa.array(rest), rest_doi)
        rest_codes = pc.index_in(rest_reason, value_set=_REASON_VALUES)
        codes[rest_rows] = pc.fill_null(rest_codes, -1).to_numpy(zero_copy_only=False)
    return doi, codes


def _cut_wrapper(texts: pa.Array) -> pa.Array:
    """The DOI of texts proved to be a wrapper then ``10.``: see :data:`_WRAPPER_CHARS`."""
    return pc.ascii_ltrim(texts, characters=_WRAPPER_CHARS)


def _analyse_rest(
    texts: pa.Array,
    trimmed: np.ndarray[Any, np.dtype[np.bool_]],
    overrides: Mapping[int, object],
    decode: Decode,
) -> tuple[pa.Array, pa.Array]:
    """The rows the fast tier did not take on their raw text, now trimmed: all tiers again.

    ``trimmed`` marks the rows that trimming changed: only they can pass the fast tier now.
    """
    n = len(texts)
    decided = np.zeros(n, dtype=bool)
    if overrides:
        decided[list(overrides)] = True
    candidates = np.flatnonzero(trimmed & ~decided)
    matched = _flags(pc.match_substring_regex(pc.take(texts, candidates), FAST_RE))
    fast = candidates[matched]
    decided[fast] = True
    parts_doi = [(fast, _cut_wrapper(pc.take(texts, fast)))]
    parts_reason = [(fast, pa.nulls(len(fast), _STRING))]

    lowered = pc.ascii_lower(texts)
    markers: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}
    for family in _tier2(decode) if n else []:
        if family.marker not in markers:
            markers[family.marker] = _flags(pc.match_substring(lowered, family.marker))
        rows = np.flatnonzero(markers[family.marker] & ~decided)
        rows = rows[_flags(pc.match_substring_regex(pc.take(texts, rows), family.match))]
        if not len(rows):
            continue
        doi = _cut_wrapper(pc.take(texts, rows))
        if family.urn:
            doi = pc.replace_substring(doi, ":", "/", max_replacements=1)
        if family.decoded:
            doi = _decode_ascii_escapes(doi)
        ok = _flags(pc.match_substring_regex(doi, _DECODED_RE))
        decided[rows[ok]] = True
        parts_doi.append((rows[ok], pc.filter(doi, ok)))
        parts_reason.append((rows[ok], pa.nulls(int(ok.sum()), _STRING)))

    rows = np.flatnonzero(~decided)
    if len(rows):
        # Plain junk ("n/a", "PMID:123"): a bare form, non-empty, legal, not starting "10."
        # (nor "10/": a shortDOI has a reason of its own, which the scalar tier gives).
        candidates = pc.take(texts, rows)
        junk = (
            _flags(pc.greater(pc.binary_length(candidates), 0))
            & ~_flags(pc.match_substring_regex(candidates, _FORM_RE))
            & ~_flags(pc.match_substring_regex(candidates, _ILLEGAL_RE))
            & ~_flags(pc.starts_with(candidates, DIRECTORY))
            & ~_flags(pc.starts_with(candidates, SHORT_DOI_PREFIX))
        )
        if decode == "always":  # a stray "%" would be bad_encoding, which is checked first
            junk &= ~_flags(pc.match_substring(candidates, "%"))
        junk_rows = rows[junk]
        decided[junk_rows] = True
        parts_doi.append((junk_rows, pa.nulls(len(junk_rows), _STRING)))
        parts_reason.append(
            (junk_rows, pa.array(np.full(len(junk_rows), "bad_directory", dtype=object), _STRING))
        )

    rows = np.flatnonzero(~decided)
    if overrides:
        rows = rows[~np.isin(rows, list(overrides))]
    if len(rows):
        encoded = pc.dictionary_encode(pc.take(texts, rows))
        outcomes = [validate(v, decode=decode) for v in encoded.dictionary.to_pylist()]
        dois = pa.array([o.doi for o in outcomes], _STRING)
        parts_doi.append((rows, pc.take(dois, encoded.indices)))
        parts_reason.append(
            (rows, pc.take(pa.array([o.reason for o in outcomes], _STRING), encoded.indices))
        )
    if overrides:
        rows = np.fromiter(overrides, dtype=np.int64, count=len(overrides))
        outcomes = [validate(v, decode=decode) for v in overrides.values()]
        parts_doi.append((rows, pa.array([o.doi for o in outcomes], _STRING)))
        parts_reason.append((rows, pa.array([o.reason for o in outcomes], _STRING)))
    return _scatter(parts_doi), _scatter(parts_reason)


def _escape_codes(texts: pa.Array) -> Iterator[str]:
    """The distinct ``XX`` of the ``%XX`` escapes in ``texts``; ``25`` (``%``) comes last."""
    with_escapes = pc.filter(texts, pc.match_substring(texts, "%"))
    if not len(with_escapes):
        return iter(())
    after_percent = pc.list_flatten(pc.list_slice(pc.split_pattern(with_escapes, "%"), 1))
    codes = pc.unique(pc.utf8_slice_codeunits(after_percent, 0, 2)).to_pylist()
    return iter(sorted(codes, key=lambda code: code == "25"))


def _decode_ascii_escapes(texts: pa.Array) -> pa.Array:
    """Decode ``%XX`` escapes of ASCII bytes; every ``%`` in ``texts`` must start one.

    Replacing one distinct escape at a time is exact: a decoded character is never ``%``
    (``%25`` is replaced last, so its output is never read again), and because every ``%``
    starts an escape, every occurrence of ``%XX`` in the text is a real escape.
    """
    for code in _escape_codes(texts):
        texts = pc.replace_substring(texts, f"%{code}", chr(int(code, 16)))
    return texts


def _urls(doi: pa.Array, base: str) -> pa.Array:
    """``base + encode_path(doi)``; only rows that need encoding leave Arrow."""
    plain = pc.binary_join_element_wise(
        pa.scalar(base, _STRING), doi, pa.scalar("", _STRING)
    )
    needs = _flags(pc.match_substring_regex(doi, _NEEDS_ENCODING_RE))
    if not needs.any():
        return plain
    encoded = [base + _encode_path(d) for d in pc.filter(doi, needs).to_pylist()]
    return pc.replace_with_mask(plain, pa.array(needs), pa.array(encoded, _STRING))
