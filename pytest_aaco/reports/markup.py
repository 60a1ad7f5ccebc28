r"""Escaping for every sink a report writes to, and the building blocks of the HTML report's
sections: number formats, table rows, and matplotlib figures as inline SVG.

Text that came from a user file or the environment (a registry key, a path, an error message that
quotes either) is escaped for the sink it is written to by the functions here, and only here:

* terminal (:func:`terminal_text`, :func:`terminal_line`): characters that are not printable
  (line breaks, ESC and the rest of C0/C1, DEL, Unicode line separators, format characters such
  as bidi overrides) become backslash escapes (``\n``, ``\x1b``, ``\u202e``), so one text stays
  on one line and cannot move the cursor or change colours; on a whole line, a GitHub Actions
  workflow command is broken up: ``::`` at the start after white space, and ``##[`` anywhere, the
  two forms the runner parses (``actions/runner`` ``src/Runner.Common/ActionCommand.cs``,
  ``TryParseV2`` and ``TryParse``, both tried by ``src/Runner.Worker/ActionCommandManager.cs``);
* GitHub workflow commands (:func:`workflow_data`, :func:`workflow_property`): the escaping of
  ``actions/toolkit`` ``packages/core/src/command.ts`` (``escapeData``: ``%``, CR, LF;
  ``escapeProperty``: also ``:`` and ``,``), any other control character as a backslash escape;
* XML (:func:`xml_text`): characters XML 1.0 forbids (https://www.w3.org/TR/xml/#charsets) as
  backslash escapes; ElementTree escapes ``&``, ``<``, ``>`` and quotes itself;
* HTML (:func:`e`): ``html.escape`` after :func:`xml_text`;
* Markdown (:func:`md_text`, :func:`md_code`): HTML entities, Markdown punctuation and ``|``
  escaped, line breaks as ``<br>``, other control characters as backslash escapes.

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

# the one-line terminal rule sits with the warning classes (whose messages it cleans), the lowest layer
from pytest_aaco.warnings import _visible, char_escape, terminal_line

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CURRENT_COLOR, BASELINE_COLOR, WARMUP_COLOR = "#d62728", "#1f77b4", "#9e9e9e"


# ---------------------------------------------------------------- escaping per sink

#: characters XML 1.0 forbids in a document (https://www.w3.org/TR/xml/#charsets, production [2]),
#: plus DEL and the C1 controls it discourages
_XML_FORBIDDEN = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def terminal_block(value: object) -> str:
    """Text of several lines for the terminal (a failure message pytest prints): each line as
    :func:`terminal_line`, the line breaks kept."""
    return "\n".join(terminal_line(line) for line in str(value).replace("\r\n", "\n").split("\n"))


def param_id(name: str) -> str:
    r"""A registry key as a pytest parameter id: the older workflow-command form ``##[`` broken up as
    :func:`terminal_line` does (pytest prints node ids at the start of lines and in its summaries; it
    escapes control characters itself). Other names are returned unchanged, so node ids stay stable."""
    return name.replace("##[", "#\\x23[")


def workflow_data(value: object) -> str:
    """A workflow command's message, as ``actions/toolkit`` ``command.ts`` ``escapeData`` does
    (``%`` -> ``%25``, CR -> ``%0D``, LF -> ``%0A``); every other non-printable character as a
    backslash escape (the runner would pass ESC on to the log)."""
    return _visible(str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def workflow_property(value: object) -> str:
    """A workflow command's property value (``file=``, ``title=``): :func:`workflow_data`, plus
    ``:`` -> ``%3A`` and ``,`` -> ``%2C`` (``command.ts`` ``escapeProperty``)."""
    return workflow_data(value).replace(":", "%3A").replace(",", "%2C")


def xml_text(value: object) -> str:
    """*value* for XML character data or an attribute value: every character XML 1.0 forbids (NUL,
    ESC and the other C0 controls but tab, LF and CR; lone surrogates; U+FFFE, U+FFFF), DEL and the
    C1 controls as backslash escapes. ``&``, ``<``, ``>`` and quotes are left to the XML writer."""
    text = str(value)
    return _XML_FORBIDDEN.sub(lambda m: char_escape(m.group()), text) if _XML_FORBIDDEN.search(text) else text


def e(value: object) -> str:
    """HTML-escape any value (None -> empty string); characters XML forbids and control characters
    but tab and line breaks become backslash escapes (:func:`xml_text`)."""
    return "" if value is None else html.escape(xml_text(value), quote=True)


def md_text(text: object) -> str:
    """Markdown-safe inline text: HTML special characters as entities, Markdown punctuation
    backslash-escaped, line breaks as ``<br>`` (so the text also stays inside a table cell), any
    other non-printable character as a backslash escape."""
    escaped = _MD_SPECIAL.sub(r"\\\1", html.escape(str(text), quote=False))
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n")
    return _visible(escaped, keep="\n").replace("\n", "<br>")


def md_code(text: object) -> str:
    """*text* as inline ``<code>``, HTML-escaped, with ``|`` as an entity so tables are not split
    and non-printable characters (line breaks too) as backslash escapes."""
    return "<code>" + html.escape(_visible(str(text))).replace("|", "&#124;") + "</code>"


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
        fig.savefig(buffer, format="svg", metadata={"Date": None})  # constrained layout: no second "tight" pass
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 role="img"', text, count=1)


#: fixed margins (inches: left, right, bottom, top) of panels with short tick labels: matplotlib's
#: constrained layout lays a figure out in a second, text-measuring draw, half of the report's CPU
#: time (the html_report_cost.py study, studies/RESULTS.md)
PANEL_MARGINS_IN = (0.75, 0.15, 0.5, 0.35)


def new_figure(width_in: float, height_in: float,
               margins_in: tuple[float, float, float, float] | None = None) -> Figure:
    """A ``matplotlib.figure.Figure`` of that size (inches), 100 dpi: constrained layout, or with
    *margins_in* (left, right, bottom, top, inches) fixed margins and no layout pass."""
    from matplotlib.figure import Figure

    if margins_in is None:
        return Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    fig = Figure(figsize=(width_in, height_in), dpi=100)
    left, right, bottom, top = margins_in
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, bottom=bottom / height_in,
                        top=1 - top / height_in)
    return fig


def plot_or_note(draw: Callable[[], str | None], what: str) -> str:
    """Run one plot function; a failure becomes a note on the page, never an exception."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # cosmetic plotting warnings must not fail a session
            svg = draw()
    except Exception as exc:  # noqa: BLE001 - a report never fails the session
        return f'<p class="muted">{e(what)} could not be drawn: {e(type(exc).__name__)}: {e(exc)}</p>'
    return f'<div class="plot">{svg}</div>' if svg else f'<p class="muted">no data for the {e(what)}.</p>'
