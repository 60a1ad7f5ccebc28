"""Baseline files: one JSON file per item and runner (CI machine), holding a history of earlier runs.

Layout: ``<baseline dir>/<machine key>/<item slug>.json``, so baselines of several runners live
side by side in git. Each file has a ``schema_version``, stable key order and indentation, and
is written atomically. It stores what the statistics need to be recomputed later: each run's
round summaries (mean ln ms per round, ...) and, for the latest run only, the raw iterations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .fingerprint import Fingerprint
from .jsonio import AacoFileError, atomic_write_json, read_json
from .results import BenchmarkResult
from .stats import VariancePrior, fit_variance_prior

#: 2: each history run may hold ``reference`` (the reference workload's round log-means, the
#: normalized ones and its identity); files of version 1 are read as runs without a reference
SCHEMA_VERSION = 2


class SchemaVersionError(AacoFileError):
    """A baseline file was written by a newer pytest-aaco; it is never overwritten by an older one."""


def item_slug(nodeid: str) -> str:
    """A file-name-safe, readable form of a pytest node id."""
    slug = re.sub(r"[^A-Za-z0-9_.\-]+", "-", nodeid.replace("::", "--")).strip("-")
    return slug[:180] or "item"


def baseline_path(baseline_dir: Path, machine_key: str, nodeid: str) -> Path:
    """``<baseline_dir>/<machine_key>/<slug>.json``."""
    return baseline_dir / machine_key / f"{item_slug(nodeid)}.json"


def other_runners(baseline_dir: Path, machine_key: str, nodeid: str) -> list[str]:
    """Machine keys of other runners that have a baseline for this item."""
    name = f"{item_slug(nodeid)}.json"
    if not baseline_dir.is_dir():
        return []
    return sorted(p.parent.name for p in baseline_dir.glob(f"*/{name}") if p.parent.name != machine_key)


@dataclass
class Baseline:
    """A loaded baseline file. ``history`` is oldest first; each run is a dict with ``timestamp``,
    ``rounds`` (round summaries), ``summary`` (mean/p50/p99 ms ...), ``telemetry`` (summary) and,
    when a reference workload was measured alongside, ``reference``
    (:meth:`pytest_aaco.results.ReferenceSeries.to_dict`: ``id``, ``log_means``, ``normalized`` ...)."""

    path: Path
    item: str
    fingerprint: dict[str, Any]
    fingerprint_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    latest_latencies_ms: list[list[float]] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.history)

    def run_round_log_means(self) -> list[list[float]]:
        """Per run, its round log-means (mean ln ms of each round); shape ``(runs, rounds_i)``."""
        return [[r["log_mean"] for r in run["rounds"]] for run in self.history]

    def reference_runs(self, reference_id: str) -> list[dict[str, Any]]:
        """The ``reference`` records of the runs measured with reference *reference_id*, oldest first."""
        return [run["reference"] for run in self.history
                if isinstance(run.get("reference"), dict) and run["reference"].get("id") == reference_id]

    def reference_ids(self) -> list[str]:
        """The distinct reference identities in the history, in order of first use."""
        ids = [run["reference"]["id"] for run in self.history if isinstance(run.get("reference"), dict)]
        return list(dict.fromkeys(ids))

    def latest(self) -> dict[str, Any]:
        return self.history[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "item": self.item,
            "fingerprint": self.fingerprint,
            "fingerprint_id": self.fingerprint_id,
            "history": self.history,
            "latest_latencies_ms": self.latest_latencies_ms,
        }


def _require(path: Path, data: Any, key: str, kind: type) -> Any:
    if not isinstance(data, dict) or not isinstance(data.get(key), kind):
        raise AacoFileError(f"{path}: baseline key {key!r} missing or not a {kind.__name__};"
                            " re-record it with --aaco-save-baseline --aaco-baseline-reset")
    return data[key]


def _check_reference(path: Path, run: dict[str, Any], rounds: int) -> None:
    """A run's ``reference`` record, when present, has an ``id`` and one log-mean and one normalized
    value per round; AacoFileError naming the file otherwise."""
    ref = run.get("reference")
    if ref is None:
        return
    ok = isinstance(ref, dict) and isinstance(ref.get("id"), str) and all(
        isinstance(ref.get(key), list) and len(ref[key]) == rounds
        and all(isinstance(v, (int, float)) for v in ref[key]) for key in ("log_means", "normalized"))
    if not ok:
        raise AacoFileError(f"{path}: a history run's 'reference' needs 'id' and one 'log_means' and"
                            " 'normalized' value per round; re-record it with --aaco-save-baseline"
                            " --aaco-baseline-reset")


def load_baseline(path: Path) -> Baseline | None:
    """Load a baseline file; None when it does not exist.

    Raises :class:`~pytest_aaco.jsonio.AacoFileError` naming the file for malformed JSON, a
    newer schema version, or missing keys.
    """
    if not path.is_file():
        return None
    data = read_json(path)
    version = _require(path, data, "schema_version", int)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(f"{path}: schema_version {version} is newer than this pytest-aaco understands"
                            f" ({SCHEMA_VERSION}); upgrade pytest-aaco")
    history = _require(path, data, "history", list)
    for run in history:
        rounds = _require(path, run, "rounds", list)
        if not rounds or not all(isinstance(r, dict) and "log_mean" in r for r in rounds):
            raise AacoFileError(f"{path}: a history run has no round summaries with 'log_mean';"
                                " re-record it with --aaco-save-baseline --aaco-baseline-reset")
        _check_reference(path, run, len(rounds))
        summary = _require(path, run, "summary", dict)
        if not isinstance(summary.get("mean_ms"), (int, float)):  # the verdict reports the baseline mean
            raise AacoFileError(f"{path}: a history run has no summary 'mean_ms';"
                                " re-record it with --aaco-save-baseline --aaco-baseline-reset")
    return Baseline(
        path=path,
        item=str(data.get("item", "")),
        fingerprint=_require(path, data, "fingerprint", dict),
        fingerprint_id=str(data.get("fingerprint_id", "")),
        history=history,
        latest_latencies_ms=data.get("latest_latencies_ms") or [],
    )


def run_record(result: BenchmarkResult) -> dict[str, Any]:
    """The history entry for one run: timestamp, round summaries (raw round log-means), summary,
    telemetry summary and, with a reference workload, its series (:class:`~pytest_aaco.results.ReferenceSeries`:
    the reference's round log-means, the normalized ones and its identity)."""
    record = {
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rounds": [r.summary() for r in result.rounds],
        "summary": result.summary(),
        "telemetry": (result.telemetry or {}).get("summary", {}),
    }
    if result.reference is not None:
        record["reference"] = result.reference.to_dict()
    return record


def save_run(path: Path, nodeid: str, fingerprint: Fingerprint, result: BenchmarkResult,
             keep: int = 30, reset: bool = False) -> tuple[Baseline, str]:
    """Append *result* to the item's history (keeping the last *keep* runs) and write it atomically.

    A fingerprint change, or *reset*, starts a new history. Returns the saved baseline and a
    sentence saying what happened, for the report.
    """
    existing = None
    note = ""
    try:
        existing = load_baseline(path)
    except SchemaVersionError:
        raise  # written by a newer pytest-aaco: replacing it would destroy its history
    except AacoFileError as exc:
        note = f"unreadable baseline replaced ({exc}); "
    if existing is not None and not fingerprint.matches(existing.fingerprint):
        note += f"fingerprint changed ({fingerprint.describe_diff(existing.fingerprint)}): new history; "
        existing = None
    elif existing is not None and reset:
        note += "history reset; "
        existing = None
    elif existing is not None and fingerprint.subject_changes(existing.fingerprint):
        note += "model changed since the history was recorded: new history; "
        existing = None
    history = (existing.history if existing else []) + [run_record(result)]
    history = history[-keep:]
    baseline = Baseline(
        path=path,
        item=nodeid,
        fingerprint=fingerprint.fields,
        fingerprint_id=fingerprint.id,
        history=history,
        latest_latencies_ms=[r.latencies_ms.round(4).tolist() for r in result.rounds],
    )
    atomic_write_json(path, baseline.to_dict())
    return baseline, note + f"baseline saved ({len(history)} run{'s' if len(history) != 1 else ''} in history)"


def runner_variance_prior(folder: Path, min_runs: int = 3) -> VariancePrior | None:
    """The variance prior of one runner's items (:func:`pytest_aaco.stats.fit_variance_prior`).

    Reads every baseline file in *folder* (one runner), takes each history with at least
    *min_runs* runs, and fits the prior to the variances of their run means (ln units²). Files
    that cannot be read are skipped. None with fewer than 3 usable items.
    """
    variances, dfs = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            baseline = load_baseline(path)
        except AacoFileError:
            continue
        if baseline is None or baseline.runs < min_runs:
            continue
        means = np.array([np.mean(r) for r in baseline.run_round_log_means()])
        variances.append(float(np.var(means, ddof=1)))
        dfs.append(baseline.runs - 1)
    return fit_variance_prior(variances, dfs)
