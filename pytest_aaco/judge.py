"""Judging one finished item: fingerprint, baseline, verdict, confirmation, records, artifacts.

Called from the ``pytest_runtest_call`` wrapper after the test body returned, so a
regression fails the item that regressed, through pytest's own outcome.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest

from .baseline import baseline_path, load_baseline, other_runners, save_run
from .benchmark import BenchmarkRun
from .fingerprint import Fingerprint, build_fingerprint
from .gate import RECORD_KEY, AacoPlugin, ItemRecord
from .jsonio import AacoFileError
from .metrics import other_processes_cores
from .registry import content_hash
from .results import BenchmarkResult
from .verdict import (
    ERROR,
    INCONCLUSIVE,
    REGRESSION,
    SAVED,
    GateSettings,
    Verdict,
    compare,
    confirm,
    needs_confirmation,
    under_contention,
)
from .warnings import AacoBaselineWarning


def item_label(run: BenchmarkRun) -> str:
    """``model[provider]``, as in the regression message."""
    return f"{run.model.name}[{run.provider.short}]"


def item_fingerprint(item: pytest.Item, run: BenchmarkRun) -> Fingerprint:
    """The item's fingerprint, with fields added by ``pytest_aaco_fingerprint`` implementations."""
    feeds = run.feeds
    extra: dict[str, Any] = {}
    item.config.hook.pytest_aaco_fingerprint(config=item.config, item=item, fields=extra)
    return build_fingerprint(
        model_sha256=content_hash(run.handle.model_path),
        input_shapes={k: list(v.shape) for k, v in feeds.items()},
        input_dtypes={k: str(v.dtype) for k, v in feeds.items()},
        provider=run.provider.short,
        ep_name=run.provider.ep_name,
        provider_options=run.handle.options,
        iobinding=run.settings.iobinding,
        intra_op_threads=run.config.intra_op_threads,
        extra=extra,
    )


def gate_settings(plugin: AacoPlugin, run: BenchmarkRun) -> GateSettings:
    """The gate's thresholds for one item: session options plus the item's own threshold and p99 choice."""
    c = plugin.config
    return GateSettings(
        threshold=run.threshold,
        min_history=c.min_history,
        run_noise=c.run_noise,
        strict_inconclusive=c.strict_inconclusive,
        fail_on_improvement=c.fail_on_improvement,
        gate_p99=run.gate_p99,
        memory_threshold=c.memory_threshold,
        memory_slack_mb=c.memory_slack_mb,
    )


def _verdict(plugin: AacoPlugin, item: pytest.Item, run: BenchmarkRun, result: BenchmarkResult,
             fp: Fingerprint) -> Verdict:
    c = plugin.config
    label = item_label(run)
    settings = gate_settings(plugin, run)
    path = baseline_path(c.baseline_dir, fp.machine_key, item.nodeid)
    if c.save_baseline:
        saved = save_run(path, item.nodeid, fp, result, c.history, c.baseline_reset)
        for text in saved.warnings:  # a file moved aside, a history archived: said in the terminal too
            warnings.warn(AacoBaselineWarning(text), stacklevel=1)
        return Verdict(outcome=SAVED, label=label, threshold=settings.threshold, message=f"{label}: {saved.note}",
                       current_mean_ms=result.mean_ms, baseline_runs=saved.baseline.runs, baseline_path=str(path),
                       fingerprint_id=fp.id)
    baseline = load_baseline(path, item.nodeid)
    gated = baseline is not None and fp.matches(baseline.fingerprint)
    lond = plugin.lond()
    level = lond.next_level() if gated else c.fdr
    others = other_runners(c.baseline_dir, fp.machine_key, item.nodeid) if baseline is None else None
    prior = plugin.variance_prior(path.parent) if gated else None
    verdict = compare(result, baseline, fp, settings, level, label, others, prior)
    if c.confirm and needs_confirmation(verdict):
        from .reports.progress import announce

        announce(plugin, f"{label} again (confirmation)", run.settings)
        result.confirmation = run.remeasure()
        second = compare(result.confirmation, baseline, fp, settings, level, label, prior=prior)
        verdict = confirm(verdict, second, settings)
    if c.max_contention is not None:
        looks = [result] + ([result.confirmation] if result.confirmation is not None else [])
        busy = [other_processes_cores(r.telemetry, os.cpu_count() or 1) for r in looks]
        verdict = under_contention(verdict, max((b for b in busy if b is not None), default=0.0),
                                   c.max_contention, settings)
    if gated:
        lond.record(verdict.outcome == REGRESSION and verdict.fails)
    return verdict


def derived(result: BenchmarkResult) -> dict[str, Any]:
    """CoV, IQR, warmup ratio, throughput ... of the measured phase (see :mod:`pytest_aaco.metrics`)."""
    from .metrics import derived_metrics

    return derived_metrics(result.latencies_ms, result.warmup_latencies_ms, result.first_run_ms, result.batch_size)


def diagnose(result: BenchmarkResult, verdict: Verdict, metrics: dict[str, Any]) -> dict[str, Any] | None:
    """The bottleneck diagnosis, for failing, unstable and inconclusive items only."""
    if not (verdict.fails or verdict.unstable or verdict.outcome == INCONCLUSIVE):
        return None
    from .diagnosis import classify

    found = classify(result.telemetry or {}, metrics, os.cpu_count() or 1)
    return found.to_dict() if found is not None else None


def record_properties(item: pytest.Item, record: ItemRecord) -> None:
    """Figures for pytest's own ``--junitxml`` (``record_property``): the same ``aaco_*``
    properties as the ``--aaco-junit`` file (:func:`pytest_aaco.reports.junit.properties`)."""
    from .reports.junit import properties

    item.user_properties.extend(properties(record.to_dict()))


def finish_record(plugin: AacoPlugin, item: pytest.Item, record: ItemRecord) -> None:
    """Store the record: plugin list, junit properties, the bundle (written now), the hook."""
    plugin.records.append(record)
    item.stash[RECORD_KEY] = record
    record_properties(item, record)
    if plugin.bundle is not None:
        plugin.bundle.write_item(item.nodeid, record.to_dict())
    item.config.hook.pytest_aaco_verdict(config=item.config, item=item, record=record.to_dict())


def judge_item(plugin: AacoPlugin, item: pytest.Item, run: BenchmarkRun) -> None:
    """Judge the last result of *run*; fail *item* through ``pytest.fail`` on a regression."""
    result = run.results[-1]
    record = ItemRecord(item.nodeid, run.model.name, run.provider.short, item_label(run),
                        result=result.to_dict(raw=True))
    if run.placement is not None:
        record.extra["placement"] = run.placement
    try:
        fp = item_fingerprint(item, run)
        record.fingerprint = fp.fields
        verdict = _verdict(plugin, item, run, result, fp)
        record.result = result.to_dict(raw=True)
    except AacoFileError as exc:
        verdict = Verdict(outcome=ERROR, label=record.label, threshold=run.threshold, message=str(exc), fails=True)
    record.verdict = verdict.to_dict()
    metrics = derived(result)
    record.extra["derived"] = metrics
    record.diagnosis = diagnose(result, verdict, metrics)
    record.outcome = "failed" if verdict.fails else "passed"
    finish_record(plugin, item, record)
    if verdict.fails:
        text = verdict.message
        if record.diagnosis:
            text += f"\nlikely cause: {record.diagnosis.get('category')}: " + "; ".join(
                record.diagnosis.get("evidence", []))
        pytest.fail(text, pytrace=False)


def record_error(plugin: AacoPlugin, item: pytest.Item, model: str, provider: str, message: str,
                 outcome: str = "failed") -> None:
    """Keep a failed or skipped item in the records so the summary lists every item."""
    record = ItemRecord(item.nodeid, model, provider, f"{model}[{provider}]", outcome=outcome, error=message)
    finish_record(plugin, item, record)
