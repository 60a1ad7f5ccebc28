"""The engine of ``aaco diff``: compare two session bundles or baseline stores, item by item.

A is the reference and B the candidate; items are matched by node id. The gate's statistics
are used (:func:`pytest_aaco.history.judge.comparison`): the unit is the round log-mean. When A holds
at least ``min_history`` runs (a baseline file with a history) the prediction-interval t-test
is used, otherwise Welch's t-test on the rounds plus the run-to-run term. Regression: one-sided
p at or below the level **and** slowdown at least the threshold; no-regression: the one-sided
upper bound below the threshold; otherwise inconclusive (:func:`pytest_aaco.history.judge.outcome_of`).
Many items are compared at once, so the level is the Benjamini-Hochberg level of the family at
FDR ``fdr`` (``k q / m`` for ``k`` rejections among ``m`` items; ``q / m`` when there are none;
Benjamini & Hochberg 1995).

No I/O beyond reading the inputs, no printing: :mod:`pytest_aaco.cli` shows the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.judge import comparison, outcome_of
from pytest_aaco.history.store import load_baseline
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.options import default
from pytest_aaco.records import ItemRecord, Outcome
from pytest_aaco.reports.bundle import is_bundle, load_session
from pytest_aaco.verdict.stats import Comparison, benjamini_hochberg


class DiffInputError(ValueError):
    """An input of the diff is not a bundle, a baseline file or a folder of baseline files; the
    message names the path and the fix."""


@dataclass
class Side:
    """One item on one side of a diff: its runs' round log-means (oldest run first) and figures."""

    nodeid: str
    label: str
    source: str
    runs: list[list[float]]
    run_means_ms: list[float]
    threshold: float | None = None
    fingerprint: JSONDict | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Sides:
    """What one input of the diff holds: its kind (``bundle``, ``baseline`` or ``baselines``), one
    :class:`Side` per node id, and a line per file that could not be read (and was skipped)."""

    kind: str
    items: dict[str, Side]
    problems: list[str] = field(default_factory=list)


def _bundle_sides(path: Path) -> Sides:
    session = load_session(path)
    problems = [f"{path}: {name} skipped: {problem}" for name, problem in (session.get("errors") or {}).items()]
    items = {}
    for nodeid, data in session["items"].items():
        record = ItemRecord.from_dict({**(data if isinstance(data, dict) else {}), "nodeid": nodeid})
        rounds = (record.result or {}).get("rounds") or []
        log_means = [float(r["log_mean"]) for r in rounds if isinstance(r, dict) and r.get("log_mean") is not None]
        mean_ms = record.summary.get("mean_ms")
        items[nodeid] = Side(
            nodeid=nodeid, label=record.label, source=str(path),
            runs=[log_means] if log_means else [], run_means_ms=[float(mean_ms)] if mean_ms is not None else [],
            threshold=record.verdict.threshold if record.verdict is not None else None,
            fingerprint=record.fingerprint,
            notes=[] if log_means else [f"no measured rounds ({record.outcome}: {record.error or '-'})"],
        )
    return Sides("bundle", items, problems)


def baseline_file_side(path: Path) -> Side:
    """The history of one baseline file as a :class:`Side`; DiffInputError when there is no such file."""
    baseline = load_baseline(path)
    if baseline is None:
        raise DiffInputError(f"{path}: no such baseline file")
    nodeid = baseline.item or path.stem
    return Side(nodeid=nodeid, label=nodeid.rsplit("::", 1)[-1], source=str(path),
                runs=baseline.run_round_log_means(),
                run_means_ms=[float(run["summary"]["mean_ms"]) for run in baseline.history
                              if isinstance(run.get("summary"), dict) and run["summary"].get("mean_ms") is not None],
                fingerprint=baseline.fingerprint)


def baseline_files(root: Path) -> list[Path]:
    """Baseline JSON files under *root* (recursive, temporary ``.*`` files and moved-aside
    ``*.corrupt-*.json`` copies left out), sorted."""
    return sorted(p for p in root.rglob("*.json") if not p.name.startswith(".") and ".corrupt-" not in p.name)


def load_sides(path: Path) -> Sides:
    """The items of a bundle folder, a baseline file or a folder of baseline files.

    Raises :class:`DiffInputError` naming *path* when it is none of those, or when a folder of
    baselines holds one item twice (baselines of several runners: pick one runner's folder);
    :class:`~pytest_aaco.jsonio.AacoFileError` for a file that cannot be read.
    """
    if not path.exists():
        raise DiffInputError(f"{path}: no such file or folder")
    if is_bundle(path):
        return _bundle_sides(path)
    if path.is_file():
        side = baseline_file_side(path)
        return Sides("baseline", {side.nodeid: side})
    files = baseline_files(path)
    if not files:
        raise DiffInputError(f"{path}: not a session bundle (no session_meta.json) and holds no baseline files")
    items: dict[str, Side] = {}
    for file in files:
        side = baseline_file_side(file)
        if side.nodeid in items:
            raise DiffInputError(f"{path}: item {side.nodeid} has baselines in {items[side.nodeid].source} and {file}"
                                 " (several runners?); pass one runner's folder or file")
        items[side.nodeid] = side
    return Sides("baselines", items)


@dataclass
class DiffRow:
    """The comparison of one item: reference A against candidate B (means in ms, threshold a fraction)."""

    nodeid: str
    label: str
    a_mean_ms: float | None
    b_mean_ms: float | None
    outcome: Outcome
    comparison: Comparison | None = None
    threshold: float = default("threshold")
    note: str = ""


def bh_level(pvalues: list[float], q: float) -> float:
    """The Benjamini-Hochberg level of a family: ``k q / m`` for ``k`` rejections among ``m``
    p-values, ``q / m`` when none (so a single p-value is tested at ``q``)."""
    if not pvalues:
        return q
    rejected, _ = benjamini_hochberg(pvalues, q)
    k = int(rejected.sum())
    return q * max(k, 1) / len(pvalues)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def diff_items(a: dict[str, Side], b: dict[str, Side], threshold: float | None = None,
               fdr: float = default("fdr"), min_history: int = default("min-history"),
               run_noise: float = default("run-noise")) -> tuple[list[DiffRow], float]:
    """Compare every item present on both sides (B is the candidate); returns the rows, in B's
    order, and the level used. *threshold* None: each item's own (B's, else A's, else the default)."""
    rows: list[DiffRow] = []
    pending = []
    for nodeid, cand in b.items():
        ref = a.get(nodeid)
        if ref is None:
            continue
        t = threshold or cand.threshold or ref.threshold or default("threshold")
        row = DiffRow(nodeid, cand.label, _mean(ref.run_means_ms), cand.run_means_ms[-1] if cand.run_means_ms else None,
                      Outcome.INCONCLUSIVE, threshold=t)
        notes = ref.notes + cand.notes
        if ref.fingerprint and cand.fingerprint:
            differs = Fingerprint(cand.fingerprint).diff(ref.fingerprint)
            if differs:
                notes.append("fingerprint differs: " + ", ".join(differs))
        try:
            if not cand.runs:
                raise ValueError("the candidate has no measured rounds")
            row.comparison = comparison(cand.runs[-1], ref.runs, min_history, run_noise)
            pending.append(row)
        except ValueError as exc:
            notes.append(str(exc))
        row.note = "; ".join(notes)
        rows.append(row)
    level = bh_level([r.comparison.p_slower for r in pending if r.comparison is not None], fdr)
    faster_level = bh_level([r.comparison.p_faster for r in pending if r.comparison is not None], fdr)
    for row in pending:
        assert row.comparison is not None  # pending rows have one
        row.outcome = outcome_of(row.comparison, row.threshold, level, faster_level)
    return rows, level
