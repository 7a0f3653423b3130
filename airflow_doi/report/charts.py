"""Bar charts as SVG documents, drawn by matplotlib (the ``report`` extra).

One chart kind serves the whole report: horizontal bars with their counts written at the end,
which read at a glance whatever the labels (reasons, prefixes, agencies). matplotlib renders
to SVG offline; the report embeds each SVG as an image (``data:`` URL), where a browser never
runs scripts, so a label taken from the data can only ever be drawn. Labels are drawn as text
(``svg.fonttype: none``: small files, the viewer's font) with mathtext off, so a ``$`` in a
DOI is a dollar sign, not a formula.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any, Final, cast

__all__ = ["PALETTE", "bar_chart"]

#: Colours by meaning, shared with the page's stylesheet.
PALETTE: Final[dict[str, str]] = {
    "good": "#2f855a",
    "bad": "#c05621",
    "neutral": "#2b6cb0",
    "warn": "#b7791f",
    "muted": "#718096",
}
#: Longest label drawn, in characters; longer ones end in an ellipsis (tables show them whole).
MAX_LABEL: Final[int] = 38
_STYLE: Final[dict[str, Any]] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "airflow-doi-report",  # identical input gives an identical file
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "sans-serif"],
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.spines.left": False,
}


def _label(text: str) -> str:
    # Control characters would make the SVG (XML) invalid: show them as code points.
    text = "".join(c if c.isprintable() else f"<U+{ord(c):04X}>" for c in text)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\u2026"


def bar_chart(
    labels: Sequence[str],
    values: Sequence[int],
    *,
    colors: Sequence[str] | str = PALETTE["neutral"],
    width: float = 4.6,
) -> str:
    """An SVG document: one horizontal bar per label, top to bottom, each with its count."""
    # Here, not at the top: matplotlib is the [report] extra, and the figures and readers of
    # this package, which import this module through the page, work without it.
    import matplotlib
    from matplotlib.figure import Figure  # not pyplot: no global state, no GUI backend

    shown = [_label(label) for label in labels]
    palette = [colors] * len(values) if isinstance(colors, str) else list(colors)
    with matplotlib.rc_context(cast(Any, _STYLE)):  # keys checked by matplotlib at run time
        figure = Figure(figsize=(width, 0.42 * max(len(values), 1) + 0.5))
        axes = figure.add_subplot()
        positions = list(range(len(values)))[::-1]
        bars = axes.barh(positions, values, color=palette, height=0.62)
        axes.set_yticks(positions, shown)
        axes.tick_params(axis="y", length=0)
        axes.xaxis.set_visible(False)
        axes.set_xlim(0, max([*values, 1]) * 1.18)
        axes.bar_label(bars, labels=[f"{v:,}" for v in values], padding=4, fontsize=9)
        figure.tight_layout(pad=0.4)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    return buffer.getvalue()
