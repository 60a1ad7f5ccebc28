"""``aaco diff``, a judge: compare two session bundles or baseline stores, item by item, and exit 1
on a regression.

A is the reference and B the candidate; items are matched by node id. Each item is judged by the
gate itself (:func:`pytest_aaco.history.judge.judge_history`), so the between-run statistics are
the gate's, not a second copy of them:

* A becomes the item's history: a bundle is one run, a baseline file its whole history; B's latest
  run is the run judged against it.
* Fewer than ``min_history`` runs in A: Welch's t-test on the rounds **plus the run-to-run term**
  (the larger of ``run_noise`` and what A's runs show, :func:`pytest_aaco.history.series.comparison`):
  rounds of one process cannot show how far the next process will land, so without the term an
  A/A comparison of two processes on a busy machine calls regressions that are not there.
  With ``min_history`` runs or more, the prediction-interval t-test on run means.
* With the reference workload recorded on both sides, the series is chosen as the gate does
  (reference-adjusted, normalized or raw, :func:`pytest_aaco.history.series.choose_series`), and a
  regression on raw figures is withheld as inconclusive when the reference shows the machine
  changed speed between A and B (:func:`pytest_aaco.history.judge.regime_change`), or when the
  compared items all moved together (:func:`pytest_aaco.verdict.run_stats.common_offset`).
* A regression measured in B while other processes kept more than ``max_contention`` cores busy
  is withheld as inconclusive (:func:`pytest_aaco.verdict.finish.under_contention`).

Outcomes as in the gate: regression (one-sided p at or below the level **and** slowdown at least
the threshold), no-regression (one-sided upper bound below the threshold), inconclusive (with the
minimum detectable effect). Many items are compared at once, so the level is the Benjamini-Hochberg
level of the family at FDR ``fdr`` (``k q / m`` for ``k`` rejections among ``m`` items; ``q / m``
when there are none; Benjamini & Hochberg 1995). There is no confirmation look: nothing can be
measured again.

A and B must measure the same thing: items whose fingerprints differ in the model file
(``model_sha256``), the inputs (shapes, dtypes) or the execution provider (its name, options, IO
binding) raise :class:`DiffRefused` (``aaco diff`` exits 2), unless ``model_changed`` says B's model
file is a new version of A's. Other differences (versions, the machine) are judged as the gate
judges them: versions on raw figures with the change named, anything else ``mismatch``.

The engine (:func:`load_sides`, :func:`diff_items`) reads the inputs and prints nothing;
:func:`cmd_diff` prints its table with :func:`pytest_aaco.reports.terminal.format_rows`.

Each verdict is finished by the item pipeline's rules (:func:`pytest_aaco.verdict.finish.settle`:
contention, then ``fails`` and the message), without a confirmation look.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_aaco.cli.common import OK, REGRESSION_FOUND, CliError, _err, _out
from pytest_aaco.history.judge import MachineOffset, judge_history
from pytest_aaco.history.store import Baseline, load_baseline, run_record
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.results import BenchmarkResult, ReferenceSeries, RoundResult
from pytest_aaco.options import GateSettings, default
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.device import HistoryRun, ResultRecord, RoundFigures
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.reports.bundle import is_bundle, load_session, records_of
from pytest_aaco.reports.terminal import format_rows, num
from pytest_aaco.verdict.comparable import Fingerprint
from pytest_aaco.verdict.finish import contention_explains, settle
from pytest_aaco.verdict.metrics import other_processes_cores
from pytest_aaco.verdict.multiplicity import benjamini_hochberg
from pytest_aaco.verdict.percent import bound_text, kept_text, pct

#: fingerprint fields that say *what* is measured: a regression is never called across a change in
#: one of them (the model file only with ``model_changed``)
SAME_THING_FIELDS = ("model_sha256", "input_shapes", "input_dtypes", "provider", "provider_options", "iobinding")


class DiffInputError(ValueError):
    """An input of the diff is not a bundle, a baseline file or a folder of baseline files; the
    message names the path and the fix."""


class DiffRefused(ValueError):
    """A and B measure different things (another model file, other inputs or another execution
    provider), so no regression can be called between them; the message names the item, the
    fields that differ and the fix."""


def _rounds_of(rounds: Sequence[RoundFigures], latencies: Sequence[Sequence[float]]) -> list[RoundResult]:
    """Rounds from the raw per-round latencies (ms) when they are there and line up with the round
    summaries; else *n* values per round that keep its log-mean (the unit of every test) exact: all at
    ``exp(log_mean)``, or, where the round's fastest iteration (``min_ms``) was stored and *n* >= 2, one at
    ``min_ms`` and the rest at the value that leaves the log-mean unchanged, so the round's fastest
    iteration is exact too (:func:`pytest_aaco.history.judge.fastest_iteration` reads it)."""
    usable = [r for r in rounds if r.log_mean is not None]
    if latencies and len(latencies) == len(usable) and all(latencies):
        arrays = [np.asarray(r, dtype=float) for r in latencies]
        if all(np.all(a > 0) for a in arrays):
            return [RoundResult(i, a, 0, 0) for i, a in enumerate(arrays)]
    return [RoundResult(i, _round_values(r), 0, 0) for i, r in enumerate(usable)]


def _round_values(r: RoundFigures) -> np.ndarray:
    """:func:`_rounds_of`'s stand-in latencies (ms) for round *r* (its ``log_mean`` set)."""
    n, log_mean = max(int(r.n or 1), 1), float(r.log_mean or 0.0)
    if n < 2 or r.min_ms is None or not 0 < r.min_ms <= math.exp(log_mean):
        return np.full(n, math.exp(log_mean))
    rest = math.exp((n * log_mean - math.log(r.min_ms)) / (n - 1))
    return np.array([r.min_ms, *([rest] * (n - 1))])


def _reference_of(data: object) -> ReferenceSeries | None:
    if not isinstance(data, dict) or not data.get("id") or not data.get("log_means"):
        return None
    return ReferenceSeries(name=str(data.get("name") or data["id"]), id=str(data["id"]),
                           log_means=np.asarray(data["log_means"], dtype=float),
                           normalized=np.asarray(data.get("normalized") or [], dtype=float),
                           mean_ms=float(data.get("mean_ms") or 0.0), iterations=int(data.get("iterations") or 0),
                           share=float(data.get("share") or 0.0),
                           min_ms=float(data["min_ms"]) if isinstance(data.get("min_ms"), (int, float)) else None)


def result_from_record(model: str, provider: str, data: JSONDict, telemetry: JSONDict | None = None,
                       reference: object = None) -> BenchmarkResult:
    """A :class:`~pytest_aaco.measure.results.BenchmarkResult` rebuilt from a stored run: *data* is a
    bundle item's ``result`` (:meth:`BenchmarkResult.to_dict`) or a baseline history run (``rounds``,
    ``summary``, with the raw latencies of the latest run passed as ``data["latencies_ms"]``).
    *telemetry*: the full telemetry dict (``{"summary": ...}`` for a baseline run); *reference*: the
    reference workload's record. Raises nothing; a run without rounds gives a result without rounds."""
    stored = ResultRecord.from_dict(data)
    summary = stored.summary
    found = data.get("telemetry")
    used = data.get("providers_used")
    return BenchmarkResult(
        model=model, provider=provider, rounds=_rounds_of(stored.rounds, stored.latencies_ms),
        warmup_iterations=int(summary.of("warmup_iterations") or 0),
        warmup_latencies_ms=np.asarray(stored.warmup_latencies_ms, dtype=float),
        session_create_ms=float(summary.of("session_create_ms") or 0.0),
        first_run_ms=float(summary.of("first_run_ms") or 0.0),
        providers_used=[str(p) for p in used] if isinstance(used, list) else [],
        batch_size=int(_number(data.get("batch_size")) or 1), iobinding=str(data.get("iobinding") or "none"),
        telemetry=dict(telemetry if telemetry is not None else found if isinstance(found, dict) else {}),
        reference=_reference_of(reference if reference is not None else data.get("reference")),
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass
class Side:
    """One item on one side of a diff: its runs as the gate's history (*history*, oldest first),
    its latest run as a result (*latest*, None without measured rounds) and what it was measured with."""

    nodeid: str
    label: str
    source: str
    history: Baseline
    latest: BenchmarkResult | None
    threshold: float | None = None
    fingerprint: JSONDict | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def run_means_ms(self) -> list[float]:
        """Mean latency (ms) of each run, oldest first."""
        means = [HistoryRun.from_dict(run).summary.of("mean_ms") for run in self.history.history]
        return [float(m) for m in means if m is not None]


@dataclass
class Sides:
    """What one input of the diff holds: its kind (``bundle``, ``baseline`` or ``baselines``), one
    :class:`Side` per node id, and a line per file that could not be read (and was skipped)."""

    kind: str
    items: dict[str, Side]
    problems: list[str] = field(default_factory=list)


def _bundle_sides(path: Path) -> Sides:
    session = load_session(path)
    problems = [f"{path}: {name} skipped: {problem}" for name, problem in session["errors"].items()]
    items = {}
    for record in records_of(session):
        fields = dict(record.fingerprint or {})
        result = result_from_record(record.model, record.provider, record.result or {})
        history = []
        if result.rounds:
            history = [run_record(result)]
        baseline = Baseline(path, record.nodeid, fields, Fingerprint(fields).id, history,
                            [r.latencies_ms.tolist() for r in result.rounds])
        items[record.nodeid] = Side(
            nodeid=record.nodeid, label=record.label, source=str(path), history=baseline,
            latest=result if result.rounds else None,
            threshold=record.verdict.threshold if record.verdict is not None else None, fingerprint=fields,
            notes=[] if result.rounds else [f"no measured rounds ({record.outcome}: {record.error or '-'})"],
        )
    return Sides("bundle", items, problems)


def baseline_file_side(path: Path) -> Side:
    """The history of one baseline file as a :class:`Side`; DiffInputError when there is no such file."""
    baseline = load_baseline(path)
    if baseline is None:
        raise DiffInputError(f"{path}: no such baseline file")
    nodeid = baseline.item or path.stem
    latest = None
    if baseline.history:
        run = baseline.history[-1]
        latest = result_from_record(nodeid, str(baseline.fingerprint.get("provider") or "-"),
                                    {**run, "latencies_ms": baseline.latest_latencies_ms},
                                    telemetry={"summary": run.get("telemetry") or {}}, reference=run.get("reference"))
    return Side(nodeid=nodeid, label=nodeid.rsplit("::", 1)[-1], source=str(path), history=baseline,
                latest=latest if latest is not None and latest.rounds else None, fingerprint=baseline.fingerprint)


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
    """The comparison of one item: reference A against candidate B (means in ms, threshold a
    fraction). *verdict* is the gate's (:class:`~pytest_aaco.records.verdict.Verdict`), None when the item
    could not be judged (*note* says why)."""

    nodeid: str
    label: str
    a_mean_ms: float | None
    b_mean_ms: float | None
    outcome: Outcome
    verdict: Verdict | None = None
    threshold: float = default("threshold")
    note: str = ""

    @property
    def fails(self) -> bool:
        """A latency regression, or a memory regression (the item's own footprint, as the gate judges it)."""
        return self.outcome == Outcome.REGRESSION or bool(self.verdict is not None and self.verdict.memory)


def bh_level(pvalues: list[float], q: float) -> float:
    """The Benjamini-Hochberg level of a family: ``k q / m`` for ``k`` rejections among ``m``
    p-values, ``q / m`` when none (so a single p-value is tested at ``q``)."""
    if not pvalues:
        return q
    rejected, _ = benjamini_hochberg(pvalues, q)
    k = int(rejected.sum())
    return q * max(k, 1) / len(pvalues)


def _shown(value: object) -> str:
    text = str(value)
    return text[:40] + "..." if len(text) > 43 else text


def refusal(label: str, ref: JSONDict, cand: JSONDict, model_changed: bool = False) -> str:
    """Why A and B of one item measure different things ('' when they measure the same): the
    :data:`SAME_THING_FIELDS` present on both sides whose values differ (``model_sha256`` only
    without *model_changed*)."""
    keys = [k for k in SAME_THING_FIELDS if k in ref and k in cand and ref[k] != cand[k]
            and not (model_changed and k == "model_sha256")]
    if not keys:
        return ""
    what = "; ".join(f"{k}: {_shown(ref[k])} -> {_shown(cand[k])}" for k in keys)
    fix = ("compare runs of the same model, inputs and execution provider"
           + ("; if B's model file is a new version of A's, pass --model-changed" if keys == ["model_sha256"] else ""))
    return f"{label}: A and B measure different things ({what}); no regression can be called between them: {fix}"


def diff_items(a: dict[str, Side], b: dict[str, Side], threshold: float | None = None,
               fdr: float = default("fdr"), min_history: int = default("min-history"),
               run_noise: float = default("run-noise"), max_contention: float | None = 0.1,
               model_changed: bool = False) -> tuple[list[DiffRow], float]:
    """Judge every item present on both sides (B is the candidate) with the gate's rule; returns the
    rows, in B's order, and the level used.

    *threshold* None: each item's own (B's, else A's, else the default). *max_contention*: cores
    other processes may have kept busy while B was measured before a regression is withheld (None:
    never). Raises :class:`DiffRefused` when an item's A and B measure different things (:func:`refusal`).
    """
    matched = [(a[nodeid], cand) for nodeid, cand in b.items() if nodeid in a]
    for ref, cand in matched:
        why = refusal(cand.label, ref.fingerprint or {}, cand.fingerprint or {}, model_changed)
        if why:
            raise DiffRefused(why)

    def judge(ref: Side, cand: Side, t: float, level: float, offset: float | None) -> Verdict:
        assert cand.latest is not None
        fields = dict(cand.fingerprint or ref.fingerprint or {})
        ref.history.fingerprint = dict(ref.fingerprint or fields)
        settings = GateSettings(threshold=t, min_history=min_history, run_noise=run_noise)
        verdict = judge_history(cand.latest, ref.history, Fingerprint(fields), settings, level, cand.label,
                                machine_offset=offset)
        cores = fields.get("cpu_cores")

        count = int(cores) if isinstance(cores, int) else os.cpu_count() or 1

        def busy() -> float | None:
            assert cand.latest is not None
            return other_processes_cores(cand.latest.telemetry, count)

        def explained(v: Verdict) -> float | None:
            """What contention did to B's run, bounded as the gate bounds it."""
            assert cand.latest is not None
            return contention_explains(v, cand.latest.telemetry, count, ref.history.history)

        return settle(verdict, settings, busy=busy, max_contention=max_contention, explained=explained)

    rows: list[DiffRow] = []
    judged: list[tuple[DiffRow, Side, Side]] = []
    offsets = MachineOffset()
    for ref, cand in matched:
        t = threshold or cand.threshold or ref.threshold or default("threshold")
        means = ref.run_means_ms
        row = DiffRow(cand.nodeid, cand.label, sum(means) / len(means) if means else None,
                      cand.latest.mean_ms if cand.latest is not None else None, Outcome.INCONCLUSIVE, threshold=t)
        notes = ref.notes + cand.notes
        differs = Fingerprint(cand.fingerprint).diff(ref.fingerprint) if ref.fingerprint and cand.fingerprint else []
        if differs:
            notes.append("fingerprint differs: " + ", ".join(differs))
        if cand.latest is None or not ref.history.history:
            notes.append("no measured rounds to compare")
        else:
            first = judge(ref, cand, t, fdr, None)  # the first look gives the p-values and raw changes
            offsets.record(first)
            row.verdict = first
            judged.append((row, ref, cand))
        row.note = "; ".join(notes)
        rows.append(row)
    level = bh_level([row.verdict.p_value for row, _, _ in judged
                      if row.verdict is not None and row.verdict.p_value is not None], fdr)
    offset = offsets.current()
    for row, ref, cand in judged:
        verdict = judge(ref, cand, row.threshold, level, offset)
        row.verdict = verdict
        row.outcome = verdict.outcome
        extra = [note for note in verdict.report_notes if note not in row.note]
        if verdict.reason:
            extra.append(verdict.reason)
        extra += [f"MEMORY REGRESSION {line}" for line in verdict.memory]
        row.note = "; ".join([row.note, *extra] if row.note else extra)
    return rows, level


# ---------------------------------------------------------------- the command


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        side_a, side_b = load_sides(Path(args.a)), load_sides(Path(args.b))
    except DiffInputError as exc:
        raise CliError(str(exc)) from None
    for problem in side_a.problems + side_b.problems:
        _err(f"aaco: warning: {problem}")
    kind_a, a, kind_b, b = side_a.kind, side_a.items, side_b.kind, side_b.items
    if kind_a == kind_b == "baseline" and set(a) != set(b):
        # two single files: compare them even when their node ids differ (a renamed test); the
        # fingerprints still have to say they measure the same model, inputs and provider
        (single,) = b.values()
        b = {next(iter(a)): single}
    try:
        rows, level = diff_items(a, b, args.threshold, args.fdr, args.min_history, args.run_noise,
                                 args.max_contention, args.model_changed)
    except DiffRefused as exc:
        raise CliError(str(exc)) from None
    if not rows:
        raise CliError(f"no item is in both {args.a} and {args.b}; items are matched by node id")
    table = []
    for row in rows:
        v = row.verdict
        bound = "-"
        if v is not None and v.ratio is not None:
            bound = (bound_text(v.ratio, v.lower_bound, v.upper_bound, v.threshold)
                     or (f"95% CI {pct(v.ci_low)} .. {pct(v.ci_high)}" if v.ci_low is not None else "-"))
        method = "-" if v is None or v.method is None else v.method
        series = "-" if v is None or v.method is None else v.series or "raw"
        a_geo = v.baseline_geomean_ms if v is not None else None
        b_geo = v.current_geomean_ms if v is not None else None
        # every per cent is the ratio of the two means printed beside it
        table.append((row.label, num(row.a_mean_ms, ".3f"), num(row.b_mean_ms, ".3f"),
                      pct(row.b_mean_ms / row.a_mean_ms) if row.a_mean_ms and row.b_mean_ms is not None else "-",
                      num(a_geo, ".3f"), num(b_geo, ".3f"), pct(b_geo / a_geo) if a_geo and b_geo else "-",
                      f"{pct(v.ratio)} {series}" if v is not None and v.ratio is not None else "-", bound,
                      num(v.p_value, ".2g") if v is not None else "-", method, str(row.outcome)))
    _out(f"A (reference): {args.a} [{kind_a}]")
    _out(f"B (candidate): {args.b} [{kind_b}]")
    header = ("item", "A mean ms", "B mean ms", "change (means)", "A geometric mean ms", "B geometric mean ms",
              "change (raw)", "change (tested)", "bound compared", "p (slower)", "method", "verdict")
    for line in format_rows(header, table, numeric=frozenset({1, 2, 3, 4, 5, 6, 9})):
        _out(line)
    kept = sorted({r.verdict.rounds_kept for r in rows if r.verdict is not None and r.verdict.rounds_kept})
    if kept:  # the geometric means and the raw change are of the level the test compared between runs
        _out(f"geometric means and change (raw): over each run's {kept_text(kept[0])}, the level the test compares")
    judged = sum(r.verdict is not None and r.verdict.p_value is not None for r in rows)
    _out(f"level {level:.3g}: Benjamini-Hochberg at FDR {args.fdr:g} over {judged} compared item(s); threshold"
         f" {'per item' if args.threshold is None else f'{args.threshold:.0%}'}; the gate's statistics: run-to-run"
         f" term {args.run_noise:.0%} until A has {args.min_history} runs, reference workload, contention")
    for row in rows:
        if row.note:
            _out(f"  {row.label}: {row.note}")
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    if only_a:
        _out(f"only in A ({len(only_a)}): " + ", ".join(only_a))
    if only_b:
        _out(f"only in B ({len(only_b)}): " + ", ".join(only_b))
    return REGRESSION_FOUND if any(r.fails for r in rows) else OK
