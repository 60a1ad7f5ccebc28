"""Building blocks of the HTML report's sections: escaping, number formats, table rows, and
matplotlib figures as inline SVG.

Shared by :mod:`pytest_aaco.reports.html` (the page and the latency sections) and
:mod:`pytest_aaco.reports.breakdown` (operators, GPU kernels, cold start). matplotlib is imported
inside the figure functions, when a report is drawn, through ``matplotlib.figure.Figure`` (no
pyplot, no global backend state).
"""

from __future__ import annotations

import html
import io
import math
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CURRENT_COLOR, BASELINE_COLOR, WARMUP_COLOR = "#d62728", "#1f77b4", "#9e9e9e"


def e(value: object) -> str:
    """HTML-escape any value (None -> empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def is_num(value: object) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt(value: object, spec: str = ".3f", suffix: str = "") -> str:
    """*value* formatted with *spec* and *suffix*; ``-`` for anything but a finite number."""
    return format(value, spec) + suffix if is_num(value) else "-"


def fraction_pct(value: object) -> str:
    """A fraction (0.05) as a percentage (``5.0%``); ``-`` for anything else."""
    return f"{value * 100:.1f}%" if isinstance(value, (int, float)) and is_num(value) else "-"


def table_rows(pairs: list[tuple[str, str]], numeric: bool = False) -> str:
    """``<tr><th>key</th><td>value</td></tr>`` per pair; keys are escaped, values are HTML already."""
    cls = ' class="num"' if numeric else ""
    return "".join(f"<tr><th>{e(k)}</th><td{cls}>{v}</td></tr>" for k, v in pairs)


def figure_svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no date, scalable width)."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):  # text stays text: smaller files, selectable labels
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 role="img"', text, count=1)


def new_figure(width_in: float, height_in: float) -> Figure:
    """A ``matplotlib.figure.Figure`` of that size (inches), 100 dpi, constrained layout."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")


def plot_or_note(draw: Callable[[], str | None], what: str) -> str:
    """Run one plot function; a failure becomes a note on the page, never an exception."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # cosmetic plotting warnings must not fail a session
            svg = draw()
    except Exception as exc:  # noqa: BLE001 - a report never fails the session
        return f'<p class="muted">{e(what)} could not be drawn: {e(type(exc).__name__)}: {e(exc)}</p>'
    return f'<div class="plot">{svg}</div>' if svg else f'<p class="muted">no data for the {e(what)}.</p>'
