"""The engine of ``aaco diff``, a judge: compare two session bundles or baseline stores, item by item.

A is the reference and B the candidate; items are matched by node id. Each item is judged by the
gate itself (:func:`pytest_aaco.history.judge.judge_history`), so the between-run statistics are
the gate's, not a second copy of them:

* A becomes the item's history: a bundle is one run, a baseline file its whole history; B's latest
  run is the run judged against it.
* Fewer than ``min_history`` runs in A: Welch's t-test on the rounds **plus the run-to-run term**
  (the larger of ``run_noise`` and what A's runs show, :func:`pytest_aaco.history.judge.comparison`):
  rounds of one process cannot show how far the next process will land, so without the term an
  A/A comparison of two processes on a busy machine calls regressions that are not there.
  With ``min_history`` runs or more, the prediction-interval t-test on run means.
* With the reference workload recorded on both sides, the series is chosen as the gate does
  (reference-adjusted, normalized or raw, :func:`pytest_aaco.history.judge.choose_series`), and a
  regression on raw figures is withheld as inconclusive when the reference shows the machine
  changed speed between A and B (:func:`pytest_aaco.history.judge.regime_change`), or when the
  compared items all moved together (:func:`pytest_aaco.verdict.stats.common_offset`).
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

Each verdict is finished by the item pipeline's rules (:func:`pytest_aaco.verdict.finish.settle`:
contention, then ``fails`` and the message), without a confirmation look.

No I/O beyond reading the inputs, no printing: :mod:`pytest_aaco.cli` shows the result and reads
bundles for it (*read_bundle* of :func:`load_sides`: this layer does not import the report writers).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.judge import MachineOffset, judge_history
from pytest_aaco.history.store import Baseline, load_baseline, run_record
from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.results import BenchmarkResult, ReferenceSeries, RoundResult
from pytest_aaco.options import GateSettings, default
from pytest_aaco.records import ItemRecord, Outcome, Verdict
from pytest_aaco.verdict.finish import settle
from pytest_aaco.verdict.metrics import other_processes_cores
from pytest_aaco.verdict.stats import benjamini_hochberg

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


def _rounds_of(summaries: list[Any], latencies: list[Any]) -> list[RoundResult]:
    """Rounds from the raw per-round latencies (ms) when they are there and line up with the round
    summaries; else one value per round at ``exp(log_mean)``, which keeps each round's log-mean (the
    unit of every test) exact."""
    usable = [s for s in summaries if isinstance(s, dict) and s.get("log_mean") is not None]
    if latencies and len(latencies) == len(usable) and all(isinstance(r, list) and r for r in latencies):
        arrays = [np.asarray(r, dtype=float) for r in latencies]
        if all(np.all(a > 0) for a in arrays):
            return [RoundResult(i, a, 0, 0) for i, a in enumerate(arrays)]
    return [RoundResult(i, np.full(max(int(s.get("n") or 1), 1), math.exp(float(s["log_mean"]))), 0, 0)
            for i, s in enumerate(usable)]


def _reference_of(data: Any) -> ReferenceSeries | None:
    if not isinstance(data, dict) or not data.get("id") or not data.get("log_means"):
        return None
    return ReferenceSeries(name=str(data.get("name") or data["id"]), id=str(data["id"]),
                           log_means=np.asarray(data["log_means"], dtype=float),
                           normalized=np.asarray(data.get("normalized") or [], dtype=float),
                           mean_ms=float(data.get("mean_ms") or 0.0), iterations=int(data.get("iterations") or 0),
                           share=float(data.get("share") or 0.0))


def result_from_record(model: str, provider: str, data: dict[str, Any], telemetry: dict[str, Any] | None = None,
                       reference: Any = None) -> BenchmarkResult:
    """A :class:`~pytest_aaco.measure.results.BenchmarkResult` rebuilt from a stored run: *data* is a
    bundle item's ``result`` (:meth:`BenchmarkResult.to_dict`) or a baseline history run (``rounds``,
    ``summary``, with the raw latencies of the latest run passed as ``data["latencies_ms"]``).
    *telemetry*: the full telemetry dict (``{"summary": ...}`` for a baseline run); *reference*: the
    reference workload's record. Raises nothing; a run without rounds gives a result without rounds."""
    summary: dict[str, Any] = data["summary"] if isinstance(data.get("summary"), dict) else {}
    rounds = _rounds_of(list(data.get("rounds") or []), list(data.get("latencies_ms") or []))
    return BenchmarkResult(
        model=model, provider=provider, rounds=rounds,
        warmup_iterations=int(summary.get("warmup_iterations") or 0),
        warmup_latencies_ms=np.asarray(data.get("warmup_latencies_ms") or [], dtype=float),
        session_create_ms=float(summary.get("session_create_ms") or 0.0),
        first_run_ms=float(summary.get("first_run_ms") or 0.0),
        providers_used=list(data.get("providers_used") or []), batch_size=int(data.get("batch_size") or 1),
        iobinding=str(data.get("iobinding") or "none"),
        telemetry=telemetry if telemetry is not None else dict(data.get("telemetry") or {}),
        reference=_reference_of(reference if reference is not None else data.get("reference")),
    )


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
        return [float(run["summary"]["mean_ms"]) for run in self.history.history
                if isinstance(run.get("summary"), dict) and run["summary"].get("mean_ms") is not None]


@dataclass
class Sides:
    """What one input of the diff holds: its kind (``bundle``, ``baseline`` or ``baselines``), one
    :class:`Side` per node id, and a line per file that could not be read (and was skipped)."""

    kind: str
    items: dict[str, Side]
    problems: list[str] = field(default_factory=list)


def _bundle_sides(path: Path, session: dict[str, Any]) -> Sides:
    problems = [f"{path}: {name} skipped: {problem}" for name, problem in (session.get("errors") or {}).items()]
    items = {}
    for nodeid, data in session["items"].items():
        record = ItemRecord.from_dict({**(data if isinstance(data, dict) else {}), "nodeid": nodeid})
        fields = dict(record.fingerprint or {})
        result = result_from_record(record.model, record.provider, record.result or {})
        history = []
        if result.rounds:
            history = [run_record(result)]
        baseline = Baseline(path, nodeid, fields, Fingerprint(fields).id, history,
                            [r.latencies_ms.tolist() for r in result.rounds])
        items[nodeid] = Side(
            nodeid=nodeid, label=record.label, source=str(path), history=baseline,
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


def load_sides(path: Path, read_bundle: Callable[[Path], dict[str, Any] | None]) -> Sides:
    """The items of a bundle folder, a baseline file or a folder of baseline files.

    *read_bundle(path)*: the bundle at *path* as :func:`pytest_aaco.reports.bundle.load_session` reads it,
    or None when *path* is not a bundle folder.

    Raises :class:`DiffInputError` naming *path* when it is none of those, or when a folder of
    baselines holds one item twice (baselines of several runners: pick one runner's folder);
    :class:`~pytest_aaco.jsonio.AacoFileError` for a file that cannot be read.
    """
    if not path.exists():
        raise DiffInputError(f"{path}: no such file or folder")
    session = read_bundle(path)
    if session is not None:
        return _bundle_sides(path, session)
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
    fraction). *verdict* is the gate's (:class:`~pytest_aaco.records.Verdict`), None when the item
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


def _shown(value: Any) -> str:
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

        def busy() -> float | None:
            assert cand.latest is not None
            return other_processes_cores(cand.latest.telemetry, int(cores) if isinstance(cores, int)
                                         else os.cpu_count() or 1)

        return settle(verdict, settings, busy=busy, max_contention=max_contention)

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
