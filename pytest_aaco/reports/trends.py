"""``aaco trends``: a static page of every item's history, per runner, with the points where it changed.

What ``asv publish`` gives asv's users, from what pytest-aaco already stores:

* **Sources** (read by :mod:`pytest_aaco.cli.trends`). Baseline folders (each ``<runner key>/<item>.json``
  file's saved runs, its archived histories included) and session bundles (each gated item's run; a
  bundle item that was itself saved is left out when a baseline folder is read too, since the baseline
  holds it already).
* **A point** is one run: its level, as the stored gate compares runs (the geometric mean latency of
  its fastest quarter of rounds, :func:`pytest_aaco.verdict.stats.fastest_rounds`, ms), with the 95%
  t-interval of that mean over the rounds kept, the commit it measured
  (``commit_info``), and its device time (kernel time per model run, ms) where a tracer ran.
* **A series** is one item on one runner (the baseline folder's machine key, or
  :attr:`pytest_aaco.verdict.comparable.Fingerprint.machine_key` of a bundle item's fingerprint) and
  execution provider, oldest first.
* **Change points**: binary segmentation (Scott & Knott 1974, "A cluster analysis method for
  grouping means in the analysis of variance", Biometrics 30(3)) over the runs' log means, each split
  tested with Welch's t-test (:func:`scipy.stats.ttest_ind`, ``equal_var=False``) Bonferroni-corrected
  over the candidate splits of its segment, and kept when significant at ``alpha`` **and** the change
  of the geometric means across it is at least ``threshold``: the gate's two conditions (significant
  and practically large), applied between windows of runs.
* **The page** is one self-contained HTML file: inline CSS, SVG and a few lines of script for the
  runner and provider filters; no CDN, nothing fetched. With no history it says so and where it looked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_aaco.reports.markup import e
from pytest_aaco.verdict.stats import fastest_rounds

#: a change point needs at least this many runs on each side
MIN_SEGMENT = 2
#: significance of a change point's Welch test (after the Bonferroni correction of its segment)
ALPHA = 0.01


@dataclass
class Point:
    """One run: ``when`` (UTC ISO 8601), ``commit`` (SHA or None), ``mean_ms`` the geometric mean latency
    of its fastest quarter of rounds, its level (ms), and ``low_ms``/``high_ms`` the 95% t-interval of it over
    the rounds kept (None with one round),
    ``device_ms`` kernel time per model run (ms) or None, ``rounds``, ``source`` the file it came from."""

    when: str
    commit: str | None
    mean_ms: float
    low_ms: float | None
    high_ms: float | None
    device_ms: float | None
    rounds: int
    source: str


@dataclass
class Change:
    """A change point: the series changed between point ``index - 1`` and point ``index``; ``ratio`` is the
    geometric mean of the points after it over those before it (within the segment tested), ``p`` the
    Bonferroni-corrected p-value of Welch's t-test on their log means."""

    index: int
    ratio: float
    p: float


@dataclass
class Series:
    """One item on one runner and execution provider: its points oldest first and the change points."""

    item: str
    runner: str
    provider: str
    points: list[Point] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)


def run_point(rounds: object, when: object, commit_info: object, device: object, source: str) -> Point | None:
    """A point from a run's round summaries (``[{"log_mean": ...}, ...]``, ln ms), its time, its
    ``commit_info`` (``{"id": sha}``) and ``device_time`` (``{"kernel_ms": ...}``); None without usable rounds."""
    if not isinstance(rounds, list):
        return None
    logs = [float(r["log_mean"]) for r in rounds if isinstance(r, dict)
            and isinstance(r.get("log_mean"), (int, float)) and math.isfinite(r["log_mean"])]
    if not logs:
        return None
    kept = fastest_rounds(logs)  # the run's level, as the stored gate compares runs
    mean = float(np.mean(kept))
    low = high = None
    if len(kept) > 1:
        from scipy import stats

        half = float(stats.t.ppf(0.975, len(kept) - 1) * np.std(kept, ddof=1) / math.sqrt(len(kept)))
        low, high = math.exp(mean - half), math.exp(mean + half)
    commit = commit_info.get("id") if isinstance(commit_info, dict) else None
    kernel = device.get("kernel_ms") if isinstance(device, dict) else None
    return Point(str(when or ""), commit if isinstance(commit, str) else None, math.exp(mean), low, high,
                 float(kernel) if isinstance(kernel, (int, float)) and math.isfinite(kernel) else None,
                 len(logs), source)


def provider_name(fingerprint: object) -> str:
    """``cpu``, ``cuda`` ...: the fingerprint's ``provider`` without ``ExecutionProvider``, lower case."""
    name = fingerprint.get("provider") if isinstance(fingerprint, dict) else None
    return str(name or "?").removesuffix("ExecutionProvider").lower() or "?"


def merge(series: Iterable[Series]) -> list[Series]:
    """Series of the same item, runner and provider joined, points ordered by time; sorted by item."""
    joined: dict[tuple[str, str, str], Series] = {}
    for s in series:
        target = joined.setdefault((s.item, s.runner, s.provider), Series(s.item, s.runner, s.provider))
        target.points.extend(s.points)
    for s in joined.values():
        s.points.sort(key=lambda p: p.when)
    return sorted(joined.values(), key=lambda s: (s.item, s.runner, s.provider))


def _welch_p(before: np.ndarray, after: np.ndarray) -> float:
    from scipy import stats

    if np.var(before) == 0 and np.var(after) == 0:
        return 0.0 if before.mean() != after.mean() else 1.0
    return float(stats.ttest_ind(after, before, equal_var=False).pvalue)


def change_points(log_means: Sequence[float], threshold: float, alpha: float = ALPHA,
                  min_segment: int = MIN_SEGMENT) -> list[Change]:
    """Binary segmentation of *log_means* (one per run, ln ms), as the module docstring says: within a
    segment, the split whose Welch test has the smallest p-value is kept when that p-value times the
    number of candidate splits is below *alpha* and the geometric means differ by at least *threshold*
    (a fraction); then both halves are searched again. Returns the changes ordered by index."""
    x = np.asarray(log_means, dtype=float)
    found: list[Change] = []

    def search(a: int, b: int) -> None:
        candidates = range(a + min_segment, b - min_segment + 1)
        if len(candidates) == 0:
            return
        tested = [(_welch_p(x[a:k], x[k:b]), k) for k in candidates]
        p, k = min(tested)
        p = min(1.0, p * len(tested))
        ratio = math.exp(float(x[k:b].mean() - x[a:k].mean()))
        if p < alpha and abs(ratio - 1) >= threshold:
            found.append(Change(k, ratio, p))
            search(a, k)
            search(k, b)

    search(0, len(x))
    return sorted(found, key=lambda c: c.index)


# ---------------------------------------------------------------- the page

CSS = """
body{font-family:system-ui,sans-serif;margin:0;padding:1rem;color:#222;max-width:1200px}
h1{font-size:1.4rem} .muted{color:#666} .filters{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0}
.filters label{display:flex;flex-direction:column;font-size:.85rem} select,input{font-size:1rem;max-width:90vw}
.series{border:1px solid #ddd;border-radius:6px;padding:.75rem;margin:.75rem 0;overflow:hidden}
.series h2{font-size:1rem;margin:0 0 .25rem;overflow-wrap:anywhere} svg{width:100%;height:auto;display:block}
.change{color:#b00020;font-weight:600} .table{overflow-x:auto} table{border-collapse:collapse;font-size:.85rem}
td,th{padding:.15rem .5rem;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left} .empty{padding:2rem;border:2px dashed #bbb;border-radius:8px}
"""

SCRIPT = """
function applyFilters(){
  const r=document.getElementById('runner').value, p=document.getElementById('provider').value,
        q=document.getElementById('item').value.toLowerCase();
  let shown=0;
  for(const s of document.querySelectorAll('.series')){
    const ok=(!r||s.dataset.runner===r)&&(!p||s.dataset.provider===p)&&(!q||s.dataset.item.toLowerCase().includes(q));
    s.hidden=!ok; if(ok) shown++;
  }
  document.getElementById('shown').textContent=shown;
}
for(const id of ['runner','provider','item']) document.getElementById(id).addEventListener('input',applyFilters);
"""

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 220, 64, 12, 14, 30


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _chart(values: Sequence[tuple[float, float | None, float | None]], changes: list[Change], unit: str, what: str,
           labels: list[str]) -> str:
    """An SVG line chart of *values* (``(value, low, high)`` per point) with interval bars and a dashed
    line before each change point."""
    lows = [lo if lo is not None else v for v, lo, _ in values]
    highs = [hi if hi is not None else v for v, _, hi in values]
    y0, y1 = min(lows), max(highs)
    if y1 - y0 < 1e-12:
        y0, y1 = y0 * 0.95, y1 * 1.05 + 1e-9
    span = y1 - y0
    y0, y1 = y0 - 0.08 * span, y1 + 0.08 * span
    n = len(values)

    def px(i: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (0.5 if n == 1 else i / (n - 1))

    def py(v: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (v - y0) / (y1 - y0))

    parts = [f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{e(what)}">',
             f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}"'
             ' fill="none" stroke="#ccc"/>']
    for v in (y0 + 0.08 * span, (y0 + y1) / 2, y1 - 0.08 * span):
        parts.append(f'<text x="{PAD_L - 6}" y="{py(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.4g}</text>')
    parts.append(f'<text x="12" y="{H / 2:.0f}" font-size="11" transform="rotate(-90 12 {H / 2:.0f})"'
                 f' text-anchor="middle">{e(unit)}</text>')
    step = max(1, n // 8)
    for i in range(0, n, step):
        parts.append(f'<text x="{px(i):.1f}" y="{H - 10}" font-size="10" text-anchor="middle">{e(labels[i])}</text>')
    for c in changes:
        x = (px(c.index - 1) + px(c.index)) / 2
        parts.append(f'<line class="change-line" x1="{x:.1f}" x2="{x:.1f}" y1="{PAD_T}" y2="{H - PAD_B}"'
                     ' stroke="#b00020" stroke-dasharray="5,4"/>'
                     f'<text x="{x + 4:.1f}" y="{PAD_T + 12}" font-size="11" fill="#b00020">{_pct(c.ratio)}</text>')
    for i, (_, lo, hi) in enumerate(values):
        if lo is not None and hi is not None:
            parts.append(f'<line x1="{px(i):.1f}" x2="{px(i):.1f}" y1="{py(lo):.1f}" y2="{py(hi):.1f}" stroke="#7aa"/>')
    path = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, (v, _, _) in enumerate(values))
    parts.append(f'<polyline points="{path}" fill="none" stroke="#1f5f8b" stroke-width="1.5"/>')
    parts += [f'<circle class="point" cx="{px(i):.1f}" cy="{py(v):.1f}" r="3" fill="#1f5f8b"/>'
              for i, (v, _, _) in enumerate(values)]
    parts.append("</svg>")
    return "".join(parts)


def _series_html(s: Series, index: int) -> str:
    labels = [f"{i + 1}" for i in range(len(s.points))]
    latency = _chart([(p.mean_ms, p.low_ms, p.high_ms) for p in s.points], s.changes, "latency (ms)",
                     f"latency of {s.item} per run", labels)
    device = [p.device_ms for p in s.points]
    device_html = ""
    if any(d is not None for d in device):
        traced = [(d, None, None) for d in device if d is not None]
        device_html = ("<p class=muted>device time (kernel time per model run, ms), the runs that traced it</p>"
                       + _chart(traced, [], "device time (ms)", f"device time of {s.item}",
                                [str(i + 1) for i, d in enumerate(device) if d is not None]))
    changes = "; ".join(f'<span class="change">run {c.index + 1}: latency {_pct(c.ratio)}</span>'
                        f' (geometric mean of the runs after vs before, Welch p={c.p:.2g})' for c in s.changes)
    rows = "".join(
        f"<tr><td>{i + 1}</td><td>{e(p.when)}</td><td>{e((p.commit or '-')[:10])}</td><td>{p.mean_ms:.4g}</td>"
        f"<td>{'-' if p.low_ms is None else f'{p.low_ms:.4g} .. {p.high_ms:.4g}'}</td>"
        f"<td>{'-' if p.device_ms is None else f'{p.device_ms:.4g}'}</td></tr>" for i, p in enumerate(s.points))
    return (f'<section class="series" id="s{index}" data-runner="{e(s.runner)}" data-provider="{e(s.provider)}"'
            f' data-item="{e(s.item)}"><h2>{e(s.item)}</h2>'
            f'<div class=muted>runner {e(s.runner)} · {e(s.provider)} · {len(s.points)} run(s)</div>'
            f'<p>{changes or "no change point"}</p>{latency}{device_html}'
            '<details><summary>runs</summary><div class="table"><table><tr><th>run</th><th>time (UTC)</th>'
            '<th>commit</th><th>latency (ms, geometric mean of the fastest quarter of rounds)</th>'
            '<th>95% interval (ms)</th>'
            f'<th>device time (ms)</th></tr>{rows}</table></div></details></section>')


def render(series: Sequence[Series], sources: Sequence[Path], problems: Sequence[str], threshold: float) -> str:
    """The page (a complete HTML document) for *series*; with none, a message naming *sources*."""
    head = ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>pytest-aaco trends</title><style>{CSS}</style></head><body><h1>pytest-aaco trends</h1>')
    looked = ", ".join(e(str(s)) for s in sources) or "no folder"
    notes = "".join(f"<li>{e(p)}</li>" for p in problems)
    if notes:
        notes = f"<details open><summary>files skipped ({len(problems)})</summary><ul>{notes}</ul></details>"
    if not series:
        return (head + f'<div class="empty" id="no-history"><p><strong>No history yet.</strong> No saved run or'
                f" session bundle was found in: {looked}.</p><p>Save runs with <code>pytest --aaco-save-baseline"
                "</code> (a nightly job does this), then build this page again from the baseline folder.</p></div>"
                + notes + "</body></html>")
    runners = sorted({s.runner for s in series})
    providers = sorted({s.provider for s in series})
    changed = sum(1 for s in series if s.changes)

    def options(values: list[str]) -> str:
        return '<option value="">all</option>' + "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)

    return (head + f'<p class=muted>{len(series)} series from {looked}; <span class="change">{changed} with a change'
            f" point</span> (binary segmentation, Welch test at α={ALPHA:g} and a change of at least"
            f" {threshold:.0%})</p>"
            '<div class="filters"><label>runner<select id="runner">' + options(runners) + "</select></label>"
            '<label>provider<select id="provider">' + options(providers) + "</select></label>"
            '<label>item<input id="item" type="search" placeholder="filter"></label>'
            f'<span class=muted>shown: <span id="shown">{len(series)}</span></span></div>' + notes
            + "".join(_series_html(s, i) for i, s in enumerate(series)) + f"<script>{SCRIPT}</script></body></html>")


def summary_lines(series: Sequence[Series]) -> list[str]:
    """One line per change point: ``ITEM [RUNNER]: latency +12.3% at run 6 (commit abc1234567)``."""
    lines = []
    for s in series:
        for c in s.changes:
            commit = s.points[c.index].commit
            lines.append(f"{s.item} [{s.runner}, {s.provider}]: latency {_pct(c.ratio)} at run {c.index + 1}"
                         + (f" (commit {commit[:10]})" if commit else ""))
    return lines


__all__ = ["ALPHA", "Change", "Point", "Series", "change_points", "merge", "provider_name", "render", "run_point",
           "summary_lines"]
