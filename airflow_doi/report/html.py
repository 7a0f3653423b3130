"""The report as one self-contained HTML page: its sections, tables, charts and stylesheet.

Safety is structural rather than case by case: every value from the data passes through
:func:`text` (``html.escape`` with quotes) on its way into the page; the only links are
``https://doi.org/`` URLs built by :func:`airflow_doi.presentation.to_url` from DOIs that
parsed (never a URL taken from the data, so a ``javascript:`` cell stays text); charts are SVG
images in ``data:`` URLs, where browsers run no script; and a Content-Security-Policy forbids
scripts and every fetch, so the page needs no network and reaches none when opened.
"""

from __future__ import annotations

import base64
import html
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Final

from airflow_doi.presentation import to_url
from airflow_doi.report.charts import PALETTE, bar_chart
from airflow_doi.report.figures import TOP_VALUES, Figures
from airflow_doi.report.metadata import MAX_YEAR_BARS, RETRACTION, MetadataFigures, UpdatedWork
from airflow_doi.report.resolution import FAILED_STATUSES, ResolutionFigures
from airflow_doi.syntax import TRIM_CHARS, InvalidDoiError
from airflow_doi.words import plural

__all__ = ["CSP", "render_html", "text"]

#: No script, no fetch: images only from ``data:`` URLs, styles only inline.
CSP: Final[str] = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)
#: Characters of a cell shown at most (a report of a 1 MB cell stays small).
MAX_CELL: Final[int] = 160

#: Plain-words meaning of each reason, shown beside its count.
REASON_TEXT: Final[dict[str, str]] = {
    "empty": "nothing in the cell",
    "bad_encoding": "broken %-escape or bytes that are not UTF-8",
    "bad_character": "a control or other illegal character",
    "short_doi": "a shortDOI (10/abc): resolve or repair expands it through the proxy",
    "bad_directory": "does not start with 10. (not a DOI)",
    "bad_registrant": "the part between 10. and / is not digits and dots",
    "missing_suffix": "nothing after the /",
    "reserved_suffix": "suffix starts with one character then / (Z39.84 4.3)",
    "malformed_row": "CSV row with the wrong number of fields",
}
FORM_TEXT: Final[dict[str, str]] = {
    "bare": "bare",
    "doi": "doi: prefix",
    "url": "URL",
    "urn": "URN",
    "info": "info URI",
}
STATUS_COLORS: Final[dict[str, str]] = {
    "resolved": PALETTE["good"],
    "registered": PALETTE["good"],
    "no_values": PALETTE["warn"],
    "not_found": PALETTE["bad"],
    "invalid": PALETTE["muted"],
    "error": PALETTE["bad"],
}
METADATA_COLORS: Final[dict[str, str]] = {
    "ok": PALETTE["good"],
    "not_found": PALETTE["bad"],
    "no_metadata": PALETTE["warn"],
    "invalid": PALETTE["muted"],
    "error": PALETTE["bad"],
}
#: Characters of a server-supplied title shown at most in a table.
MAX_TITLE: Final[int] = 300


def text(value: object) -> str:
    """Any value as HTML text: escaped, quotes included, so it is safe in an attribute too."""
    return html.escape(str(value), quote=True)


def cell(value: str | None) -> str:
    """A raw cell, escaped, with what the eye cannot see made visible.

    Edge whitespace shows as ``␣``, invisible or control characters as their code point, an
    empty cell as ``(empty)``; long cells are cut. Spellings differ in exactly these ways, so
    the duplicates table would otherwise show identical-looking rows.
    """
    if value is None or value == "":
        return '<span class="mark">(empty)</span>'
    shown = value if len(value) <= MAX_CELL else value[:MAX_CELL]
    core = shown.strip(TRIM_CHARS)
    start = shown.find(core) if core else len(shown)
    parts = [_mark_space(c) for c in shown[:start]]
    # Decomposed (e + U+0301): its combining marks shown, or it looks like its composed twin.
    decomposed = not unicodedata.is_normalized("NFC", core)
    parts += [_mark_invisible(c, decomposed) for c in core]
    parts += [_mark_space(c) for c in shown[start + len(core):]]
    if len(value) > MAX_CELL:
        parts.append(f'<span class="mark">… ({len(value):,} characters)</span>')
    return f'<code class="cell">{"".join(parts)}</code>'


def _mark_space(char: str) -> str:
    return '<span class="mark">␣</span>' if char == " " else _code_point(char)


def _mark_invisible(char: str, decomposed: bool = False) -> str:
    if (char.isprintable() and char not in TRIM_CHARS
            and not (decomposed and unicodedata.combining(char))):
        return text(char)
    return " " if char == " " else _code_point(char)


def _code_point(char: str) -> str:
    return f'<span class="mark">U+{ord(char):04X}</span>'


def doi_link(doi: str) -> str:
    """A DOI as a link to its doi.org URL (``to_url`` encodes it); as text if it does not parse."""
    try:
        url = to_url(doi)
    except InvalidDoiError:
        return f"<code>{text(doi)}</code>"
    return f'<a href="{text(url)}" rel="noopener noreferrer"><code>{text(doi)}</code></a>'


def number(value: int) -> str:
    return f"{value:,}"


def share(part: int, whole: int) -> str:
    if not whole:
        return "–"
    percent = 100 * part / whole
    return f"{percent:.1f}%" if percent >= 0.1 or part == 0 else "<0.1%"


def chart(labels: Sequence[str], values: Sequence[int], title: str, **style: object) -> str:
    """A bar chart as an ``<img>`` holding an SVG ``data:`` URL; nothing when there is no bar."""
    if not values:
        return ""
    svg = bar_chart(labels, values, **style)  # type: ignore[arg-type]
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return (
        f'<figure class="chart"><img alt="{text(title)}" src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{text(title)}</figcaption></figure>"
    )


def _counts_chart(
    counts: dict[str, int] | None, title: str, colors: dict[str, str] | None = None
) -> str:
    """A bar chart of ``name -> count``, each bar in its name's colour of ``colors`` when
    given; nothing when there is no count."""
    if not counts:
        return ""
    names = list(counts)
    style = {} if colors is None else {"colors": [colors.get(n, PALETTE["neutral"]) for n in names]}
    return chart(names, list(counts.values()), title, **style)


def _pair(charts: Sequence[str]) -> str:
    """The charts that are there, side by side; nothing when none is."""
    shown = "".join(f"<div>{c}</div>" for c in charts if c)
    return f'<div class="pair">{shown}</div>' if shown else ""


def _times(counts: Iterable[tuple[str, int]]) -> str:
    """``name ×count, ...`` as HTML."""
    return ", ".join(f"{_cut(name)} ×{number(count)}" for name, count in counts)


def _cut(value: str, limit: int = MAX_CELL) -> str:
    """Text from the data, escaped, cut after ``limit`` characters."""
    return text(value) if len(value) <= limit else f"{text(value[:limit])}…"


def _cells(cells: Iterable[tuple[str, int]]) -> str:
    """Raw cells, one a line, each with how many rows hold it."""
    return "<br>".join(f'{cell(c)} <span class="times">×{number(n)}</span>' for c, n in cells)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table whose cells are already HTML; ``head`` is plain text."""
    head_html = "".join(f"<th>{text(name)}</th>" for name in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head_html}</tr></thead><tbody>{body}</tbody></table>'


#: A card's value in characters, and the size class it takes beyond: the narrowest card
#: (150 px wide) holds ``100.0%`` at full size, ``12,345,678`` only smaller.
VALUE_SIZES: Final[tuple[tuple[int, str], ...]] = ((6, ""), (8, " long"), (10, " longer"))


def _card(label: str, value: str, note: str = "", tone: str = "") -> str:
    """A headline card; ``value`` is plain text (a count or a share)."""
    note_html = f'<div class="note">{note}</div>' if note else ""
    size = next((name for most, name in VALUE_SIZES if len(value) <= most), " longest")
    return (
        f'<div class="card {tone}"><div class="label">{text(label)}</div>'
        f'<div class="value{size}">{text(value)}</div>{note_html}</div>'
    )


def _cards(figures: Figures) -> str:
    rows = figures.rows
    hidden = "DOI" if figures.hidden_keys == 1 else "DOIs"
    cards = [
        _card("Rows", number(rows)),
        _card("Valid DOIs", share(figures.valid, rows), plural(figures.valid, "row"), "good"),
        _card("Not valid", number(figures.invalid), f"{share(figures.invalid, rows)} of rows",
              "bad" if figures.invalid else ""),
        _card("Likely damaged", number(figures.damaged),
              "valid, but a repair rule changes " + ("it" if figures.damaged == 1 else "them"),
              "warn" if figures.damaged else ""),
        _card("Distinct DOIs", number(figures.distinct_keys), "by comparison key"),
        _card("Duplicated DOIs", number(figures.duplicate_keys),
              plural(figures.duplicate_rows, "extra row"),
              "warn" if figures.duplicate_keys else ""),
        _card("Written differently", number(figures.hidden_keys),
              f"{hidden} spelled more than one way", "warn" if figures.hidden_keys else ""),
    ]
    resolution = figures.resolution
    if resolution is not None and resolution.statuses is not None:
        cards.append(_card(
            "Resolved", share(resolution.resolved, resolution.looked_up),
            f"{number(resolution.resolved)} of {plural(resolution.looked_up, 'DOI')} looked up",
            "good"))
    metadata = figures.metadata
    if metadata is not None:
        cards.append(_card("With metadata", share(metadata.ok, metadata.keys),
                           f"{number(metadata.ok)} of {plural(metadata.keys, 'DOI')}", "good"))
        if metadata.updated is not None:
            updated = (f"{plural(metadata.updated, 'work')} updated by a notice"
                       if metadata.updated else "no work updated by a notice")
            cards.append(_card("Retracted", number(metadata.retracted), updated,
                               "bad" if metadata.retracted else ""))
    return f'<section class="cards">{"".join(cards)}</section>'


def _validity(figures: Figures) -> str:
    labels = ["valid", *(r.reason for r in figures.reasons)]
    values = [figures.valid, *(r.rows for r in figures.reasons)]
    colors = [PALETTE["good"], *(PALETTE["bad"] for _ in figures.reasons)]
    rows = [
        [
            f"<code>{text(r.reason)}</code><div class=\"hint\">"
            f"{text(REASON_TEXT.get(r.reason, ''))}</div>",
            number(r.rows),
            share(r.rows, figures.rows),
            _cells(r.examples),
        ]
        for r in figures.reasons
    ]
    table = (
        _table(["reason", "rows", "share", "commonest cells"], rows)
        if rows else '<p class="ok">Every cell holds a valid DOI.</p>'
    )
    return (
        "<section><h2>Validity</h2>"
        '<p class="lead">Each cell is parsed per ANSI/NISO Z39.84; the first failing check is '
        "its reason.</p>"
        f'<div class="split">{chart(labels, values, "Rows by verdict", colors=colors)}'
        f"<div>{table}</div></div></section>"
    )


def _damaged(figures: Figures) -> str:
    """The valid cells a repair rule would change, with the repair each would get."""
    if not figures.damaged:
        return ""
    rows = [
        [cell(doi), doi_link(meant), f"<code>{text(rule)}</code>", number(count)]
        for doi, meant, rule, count in figures.damaged_examples
    ]
    shown = len(figures.damaged_examples)
    more = (f'<p class="hint">The {number(shown)} with the most rows.</p>'
            if figures.damaged > sum(row[3] for row in figures.damaged_examples) else "")
    verb = "holds" if figures.damaged == 1 else "hold"
    return (
        "<section><h2>Valid but likely damaged</h2>"
        f'<p class="lead">{plural(figures.damaged, "row")} {verb} a DOI that is valid per '
        "Z39.84 (a suffix may hold any legal character, spaces included) but that a repair "
        "rule changes: text glued on, a space inside, a tag after it. Each counts as a "
        "distinct DOI above. <code>airflow-doi repair</code> suggests the repair and asks the "
        "proxy whether the DOI, or its repair, exists.</p>"
        f'{_table(["DOI as normalized", "likely meant", "rule", "rows"], rows, "damaged")}'
        f"{more}</section>"
    )


def _duplicates(figures: Figures) -> str:
    lead = (
        '<p class="lead">Rows are grouped on the comparison key (the DOI with ASCII a–z '
        "upper-cased, nothing else, Z39.84 §4): cells written differently, by case, wrapper "
        "(<code>doi:</code>, URL, URN), whitespace or escapes, are the same DOI. "
        f"{plural(figures.duplicate_keys, 'DOI')} "
        f"{'is' if figures.duplicate_keys == 1 else 'are'} on more than one row; "
        f"{number(figures.hidden_keys)} of them ({plural(figures.hidden_rows, 'row')}) "
        f"{'is' if figures.hidden_keys == 1 else 'are'} written in more than one way, which a "
        "plain <code>GROUP BY</code> never shows.</p>"
    )
    if not figures.groups:
        return f'<section><h2>Duplicates by comparison key</h2>{lead}<p class="ok">No DOI is ' \
               "on more than one row.</p></section>"
    rows = []
    for group in figures.groups:
        spellings = _cells(group.spellings)
        more = group.distinct_spellings - len(group.spellings)
        if more > 0:
            spellings += f'<br><span class="mark">… {plural(more, "more spelling")}</span>'
        rows.append([doi_link(group.key), number(group.rows),
                     number(group.distinct_spellings), spellings])
    shown = len(figures.groups)
    note = (f'<p class="hint">The {shown} largest groups, those written differently first.</p>'
            if figures.duplicate_keys > shown else "")
    table = _table(["comparison key", "rows", "spellings", "cells as written"], rows, "dups")
    return f"<section><h2>Duplicates by comparison key</h2>{lead}{table}{note}</section>"


def _forms_and_prefixes(figures: Figures) -> str:
    forms = [(FORM_TEXT.get(name, name), count) for name, count in figures.forms.items()]
    forms_chart = chart([f for f, _ in forms], [c for _, c in forms],
                        "How the DOIs are written")
    prefixes = chart([p for p, _ in figures.prefixes], [c for _, c in figures.prefixes],
                     "Rows per registrant prefix")
    note = (f'<p class="hint">The {TOP_VALUES} commonest of '
            f"{number(figures.distinct_prefixes)} prefixes, and the others summed.</p>"
            if figures.distinct_prefixes > TOP_VALUES else "")
    return (
        '<section class="pair">'
        f"<div><h2>Forms</h2><p class=\"lead\">Of the {plural(figures.with_doi, 'cell')} "
        f"holding a DOI.</p>{forms_chart}</div>"
        f"<div><h2>Registrant prefixes</h2><p class=\"lead\">"
        f"{plural(figures.distinct_prefixes, 'registrant')}.</p>{prefixes}{note}</div>"
        "</section>"
    )


def _resolution(resolution: ResolutionFigures | None) -> str:
    if resolution is None:
        return ""
    lead = f"{plural(resolution.rows, 'row')} in the resolution table"
    if resolution.statuses is not None:
        lead = (f"{plural(resolution.looked_up, 'DOI')} (distinct comparison keys) looked up, "
                f"{number(resolution.resolved)} resolved; read from {lead}")
        if resolution.not_sent:
            lead += (f", of which {plural(resolution.not_sent, 'row')} never sent "
                     "(not a valid DOI)")
    parts = [f'<p class="lead">{lead}.</p>']
    parts.append(_pair([
        _counts_chart(resolution.statuses, "DOIs by resolution status", STATUS_COLORS),
        _counts_chart(resolution.agencies, "Registration agency (Which RA?)"),
    ]))
    if resolution.statuses is not None:
        parts.append(_failures(resolution))
    if resolution.repairs_proposed is not None:
        parts.append(_repairs(resolution))
    return f"<section><h2>Resolution</h2>{''.join(parts)}</section>"


def _failures(resolution: ResolutionFigures) -> str:
    title = (f"<h3>Failures ({' or '.join(FAILED_STATUSES)}): "
             f"{plural(resolution.failures, 'DOI')}</h3>")
    if not resolution.failures:
        if not resolution.looked_up:
            return f'{title}<p class="hint">No DOI was looked up.</p>'
        without = (resolution.statuses or {}).get("no_values", 0)
        said = (f" ({number(without)} of them without a URL value: <code>no_values</code>)"
                if without else "")
        return f'{title}<p class="ok">Every DOI looked up was found{said}.</p>'
    rows = [
        [doi_link(doi) if doi else cell(doi), f"<code>{_cut(status)}</code>", _cut(error),
         number(n)]
        for doi, status, error, n in resolution.failure_examples
    ]
    reasons = ""
    if resolution.failure_reasons:
        listed = _times(resolution.failure_reasons.items())
        reasons = f'<p class="hint">Errors: {listed}</p>'
    return title + reasons + _table(["DOI", "status", "error", "rows"], rows)


def _repairs(resolution: ResolutionFigures) -> str:
    proposed = resolution.repairs_proposed or 0
    verified = resolution.repairs_verified
    said = (f", {number(verified)} verified by the proxy" if verified is not None else "")
    title = f"<h3>Repairs: {number(proposed)} proposed{said}</h3>"
    if not proposed:
        return title
    rows = [
        [cell(c), doi_link(s), f"<code>{_cut(rule)}</code>",
         '<span class="yes">yes</span>' if ok else '<span class="no">no</span>']
        for c, s, rule, ok in resolution.repair_examples
    ]
    return title + _table(["cell", "suggested DOI", "rule", "verified"], rows)


def _plain(value: str | None, limit: int = MAX_TITLE) -> str:
    """Server-supplied text, escaped and cut; an empty value as a mark."""
    if not value:
        return '<span class="mark">(none)</span>'
    return _cut(value, limit)


def _metadata(metadata: MetadataFigures | None) -> str:
    if metadata is None:
        return ""
    lead = (
        f"{plural(metadata.keys, 'DOI')} (distinct comparison keys) in the metadata table; "
        f"{number(metadata.ok)} ({share(metadata.ok, metadata.keys)}) with metadata from "
        "their registration agency (CSL-JSON through doi.org)."
    )
    if metadata.rows != metadata.keys:
        lead += (f" Read from {plural(metadata.rows, 'row')}; "
                 f"{plural(metadata.rows_without_key, 'row')} without a valid DOI left "
                 "out.")
    parts = [f'<p class="lead">{lead}</p>']
    types = metadata.types
    parts.append(_pair([
        _counts_chart(metadata.statuses, "DOIs by metadata status", METADATA_COLORS),
        _counts_chart(types, _top("CSL types", len(types or {}), metadata.distinct_types)),
    ]))
    if metadata.years is not None:
        parts.append(_years(metadata))
    names = []
    for title, top, distinct in (
        ("Journals and other containers", metadata.containers, metadata.distinct_containers),
        ("Publishers", metadata.publishers, metadata.distinct_publishers),
    ):
        if top is not None:
            names.append(_names(title, top, distinct))
    if names:
        parts.append(f'<div class="pair">{"".join(names)}</div>')
    if metadata.updated is not None:
        parts.append(_updated(metadata))
    if metadata.notices is not None:
        kinds = _times(metadata.notice_types.items())
        parts.append(
            f"<h3>Notices: {number(metadata.notices)}</h3>"
            '<p class="hint">DOIs of the table that are themselves retraction or correction '
            f"notices (they update another work){': ' + kinds if kinds else ''}.</p>"
        )
    return f"<section><h2>Metadata</h2>{''.join(parts)}</section>"


def _top(title: str, shown: int, distinct: int) -> str:
    return f"{title} (top {shown} of {number(distinct)})" if distinct > shown else title


#: Spans the years chart groups by, finest first (the first that gives at most
#: :data:`MAX_YEAR_BARS` bars is drawn), with the word its title takes.
YEAR_SPANS: Final[tuple[tuple[int, str], ...]] = (
    (1, "year"), (10, "decade"), (100, "century"), (1000, "millennium"),
)


def _year_bars(years: dict[int, int]) -> tuple[list[str], list[int], str]:
    """Labels, counts and title of the years chart: by year, else by the finest span that
    keeps it to :data:`MAX_YEAR_BARS` bars (years run from 1 to 9999: ten millennia)."""
    span, word = next(
        (item for item in YEAR_SPANS if len({year // item[0] for year in years}) <= MAX_YEAR_BARS),
        YEAR_SPANS[-1],
    )
    bars: dict[str, int] = {}
    for year, count in years.items():
        label = _span_label(year // span * span, span)
        bars[label] = bars.get(label, 0) + count
    return list(bars), list(bars.values()), f"DOIs by {word} issued"


def _span_label(start: int, span: int) -> str:
    """``1999``, ``1990s``, ``1900–1999``."""
    if span == 1:
        return str(start)
    return f"{start}s" if span == 10 else f"{start}–{start + span - 1}"


def _years(metadata: MetadataFigures) -> str:
    years = metadata.years or {}
    labels, values, title = _year_bars(years)
    span = f" ({min(years)}–{max(years)})" if years else ""
    note = (f'<p class="hint">With metadata but no year: {number(metadata.no_year)}.</p>'
            if metadata.no_year else "")
    body = chart(labels, values, title) if years else '<p class="hint">No year in the table.</p>'
    return f"<h3>Years{span}</h3>{body}{note}"


def _names(title: str, top: list[tuple[str, int]], distinct: int) -> str:
    heading = f"<h3>{text(_top(title, len(top), distinct))}</h3>"
    if not top:
        return f'<div>{heading}<p class="hint">None in the table.</p></div>'
    rows = [[_plain(name), number(count)] for name, count in top]
    return f'<div>{heading}{_table(["name", "DOIs"], rows, "names")}</div>'


def _updated(metadata: MetadataFigures) -> str:
    updated = metadata.updated or 0
    title = (f"<h3>Retracted or corrected works: {number(updated)} "
             f"({number(metadata.retracted)} retracted)</h3>")
    if not updated:
        return f'{title}<p class="ok">No work of the table is updated by a notice.</p>'
    kinds = _times(metadata.update_types.items())
    shown = len(metadata.updated_works)
    note = (f'<p class="hint">The first {number(shown)}, retracted ones first.</p>'
            if updated > shown else "")
    rows = [
        [doi_link(work.doi) if work.doi else _plain(None), _plain(work.title),
         _update_list(work)]
        for work in metadata.updated_works
    ]
    table = _table(["DOI", "title", "updated by"], rows, "updated")
    return f'{title}<p class="hint">Update types: {kinds}.</p>{table}{note}'


def _update_list(work: UpdatedWork) -> str:
    """The notices of a work, retractions first; the first :data:`TOP_VALUES`, then how many
    more there are."""
    items = []
    ranked = sorted(work.updates, key=lambda update: update[0].lower() != RETRACTION)
    for kind, doi in ranked[:TOP_VALUES]:
        tone = "retraction" if kind.lower() == RETRACTION else "no"
        label = f'<span class="{tone}">{_cut(kind)}</span>'
        items.append(f"{label} {doi_link(doi)}" if doi else label)
    more = len(work.updates) - TOP_VALUES
    if more > 0:
        items.append(f'<span class="mark">… {plural(more, "more notice")}</span>')
    return "<br>".join(items)


def render_html(figures: Figures, *, title: str | None = None, version: str = "") -> str:
    """The whole page for ``figures``."""
    heading = title or "DOI quality report"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = (
        f"{text(figures.source)} · column <code>{text(figures.column)}</code> · "
        f"{stamp} · airflow-doi {text(version)}"
    )
    body = "".join((
        _cards(figures),
        _validity(figures),
        _damaged(figures),
        _duplicates(figures),
        _forms_and_prefixes(figures),
        _resolution(figures.resolution),
        _metadata(figures.metadata),
    ))
    return PAGE.format(
        csp=CSP, title=text(f"{heading}: {figures.source}"), heading=text(heading),
        subtitle=subtitle, body=body,
    )


PAGE: Final[str] = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{title}</title>
<style>
:root {{ --ink: #1a202c; --soft: #4a5568; --line: #e2e8f0; --paper: #fff; --bg: #f7fafc;
  --good: #2f855a; --bad: #c05621; --warn: #b7791f; --accent: #2b6cb0; }}
* {{ box-sizing: border-box; }}
body {{ margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }}
main {{ max-width: 1180px; margin: 0 auto; padding: 28px 32px 40px; }}
header h1 {{ margin: 0; font-size: 26px; letter-spacing: -0.01em; }}
header p {{ margin: 4px 0 0; color: var(--soft); }}
section {{ background: var(--paper); border: 1px solid var(--line); border-radius: 10px;
  padding: 18px 22px; margin-top: 18px; }}
section.cards {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
  gap: 12px; background: none; border: 0; padding: 0; }}
.card {{ background: var(--paper); border: 1px solid var(--line); border-left: 5px solid
  var(--accent); border-radius: 10px; padding: 12px 14px; min-width: 0; }}
.card.good {{ border-left-color: var(--good); }} .card.bad {{ border-left-color: var(--bad); }}
.card.warn {{ border-left-color: var(--warn); }}
.card .label {{ color: var(--soft); font-size: 13px; text-transform: uppercase;
  letter-spacing: 0.04em; }}
.card .value {{ font-size: 28px; font-weight: 700; line-height: 1.2; white-space: nowrap;
  font-variant-numeric: tabular-nums; letter-spacing: -0.02em; }}
.card .value.long {{ font-size: 24px; line-height: 1.4; }}
.card .value.longer {{ font-size: 20px; line-height: 1.68; }}
.card .value.longest {{ font-size: 16px; line-height: 2.1; }}
.card .label, .card .note {{ overflow-wrap: anywhere; }}
.card .note {{ color: var(--soft); font-size: 13px; }}
h2 {{ margin: 0 0 6px; font-size: 19px; }} h3 {{ margin: 18px 0 6px; font-size: 16px; }}
.lead {{ margin: 0 0 12px; color: var(--soft); }}
.hint {{ color: var(--soft); font-size: 13px; }}
.ok {{ color: var(--good); font-weight: 600; }}
.split {{ display: grid; grid-template-columns: minmax(0, 5fr) minmax(0, 7fr); gap: 22px;
  align-items: start; }}
.pair {{ display: grid; grid-template-columns: 1fr 1fr; gap: 22px; align-items: start; }}
section.pair {{ background: none; border: 0; padding: 0; }}
section.pair > div {{ background: var(--paper); border: 1px solid var(--line);
  border-radius: 10px; padding: 18px 22px; }}
figure.chart {{ margin: 0; }}
figure.chart img {{ display: block; max-width: 100%; height: auto; margin: 0 auto; }}
figcaption {{ color: var(--soft); font-size: 12px; text-align: center; margin-top: 2px; }}
table {{ border-collapse: collapse; width: 100%; font-size: 14px; }}
th {{ text-align: left; color: var(--soft); font-weight: 600; font-size: 12px;
  text-transform: uppercase; letter-spacing: 0.04em; border-bottom: 2px solid var(--line);
  padding: 6px 8px; }}
td {{ border-bottom: 1px solid var(--line); padding: 6px 8px; vertical-align: top;
  overflow-wrap: anywhere; }}
td:nth-child(2), td:nth-child(3) {{ white-space: nowrap; }}
code {{ font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }}
code.cell {{ background: #edf2f7; border-radius: 4px; padding: 1px 4px; white-space: pre-wrap; }}
.mark {{ color: #9b2c2c; background: #fed7d7; border-radius: 3px; padding: 0 2px;
  font-size: 11px; }}
.times {{ color: var(--soft); font-size: 12px; }}
.yes {{ color: var(--good); font-weight: 600; }} .no {{ color: var(--soft); }}
.retraction {{ color: var(--bad); font-weight: 600; }}
table.names td:nth-child(2) {{ text-align: right; }}
a {{ color: var(--accent); text-decoration: none; }} a:hover {{ text-decoration: underline; }}
footer {{ color: var(--soft); font-size: 12px; margin-top: 18px; }}
@media (max-width: 800px) {{ .split, .pair {{ grid-template-columns: 1fr; }} }}
@media (max-width: 600px) {{ main {{ padding: 18px 14px 28px; }}
  section, section.pair > div {{ padding: 14px 14px; }}
  section.cards {{ grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 10px; }}
  td:nth-child(2), td:nth-child(3) {{ white-space: normal; }}
  th, td {{ padding: 5px 4px; }} th {{ letter-spacing: 0; font-size: 11px; }} }}
</style>
</head>
<body>
<main>
<header><h1>{heading}</h1><p>{subtitle}</p></header>
{body}
<footer>Made by airflow-doi from the data alone: no network was used to build or to open this
page. Comparison key per ANSI/NISO Z39.84-2005 §4.</footer>
</main>
</body>
</html>
"""
