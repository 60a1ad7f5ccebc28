"""Every figure a person reads agrees with the others: one rule for which metrics failed
(:attr:`pytest_aaco.records.verdict.Verdict.failed_metrics`) read by the message, the headline (pytest's short
summary), the terminal table, the HTML, JUnit and the GitHub summary; device time decides the outcome
word when wall time is inconclusive.

Stored verdicts come from :func:`pytest_aaco.history.judge.judge_history` on synthetic results (the
statistics are the gate's own); side-by-side ones from :func:`pytest_aaco.sidebyside.cycles.to_verdict`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
from finished import confirm, finish, judge_history

from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.measure.device_time import DeviceSeries
from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import DEVICE_TIME, Outcome
from pytest_aaco.records.device import HistoryRun, ResultRecord
from pytest_aaco.records.item import FdrRecord, ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.reports import terminal
from pytest_aaco.reports.wording import headline, verdict_cell
from pytest_aaco.tracers.base import DeviceBlock

FP = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cuda",
                       ep_name="CUDAExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
#: wall-time run means that differ by up to 15% from run to run (a GPU VM's launch-bound wall time)
WALL_LEVELS = [2.0, 2.3, 1.8, 2.2, 1.9]
#: device time steady to 0.2% between runs (kernel time per run, ms)
DEVICE_LEVELS = [0.818, 0.8195, 0.8172, 0.8188, 0.8166]


def _device(ms: float, seed: int, extra: int = 0, blocks: int = 10) -> DeviceSeries:
    rng = np.random.default_rng(seed)
    names = Counter({"conv": 2000, "relu": 190, **({"conv3x3": extra * 10} if extra else {})})
    return DeviceSeries("fake", tuple(DeviceBlock(10, float(ms * np.exp(rng.normal(0, 0.001))), ms * 0.9,
                                                  219.0 + extra, names) for _ in range(blocks)), 0.3, 3.0)


def _baseline(tmp_path: Path, result_factory) -> Baseline:
    history = []
    for seed, (wall, dev) in enumerate(zip(WALL_LEVELS, DEVICE_LEVELS, strict=True)):
        result = result_factory([wall] * 10, seed=seed)
        result.device = _device(dev, seed)
        history.append(run_record(result))
    return Baseline(tmp_path / "b.json", "t::x", FP.fields, FP.id, history)


def _stored(tmp_path: Path, result_factory, device_ms: float, extra: int = 0, seed: int = 9) -> Verdict:
    current = result_factory([2.04] * 10, seed=seed)
    current.device = _device(device_ms, seed, extra)
    return judge_history(current, _baseline(tmp_path, result_factory), FP, GateSettings(), 0.05, "vgg19[cuda]")


def _record(v: Verdict) -> ItemRecord:
    return ItemRecord("tests/perf/test_models.py::test_latency[vgg19-cuda]", "vgg19", "cuda", "vgg19[cuda]",
                      verdict=v, outcome=Outcome.FAILED if v.fails else Outcome.PASSED)


# ---------------------------------------------------------------- 1. one "which metrics failed" rule


def test_a_stored_device_time_failure_is_headlined_and_tabled_as_device_time(tmp_path, result_factory):
    """Before: ``Failed: -2.1% adjusted LATENCY REGRESSION ...`` and ``regression (confirmed)``."""
    v = _stored(tmp_path, result_factory, 0.818 * 1.073, extra=8)
    assert v.wall_outcome == Outcome.INCONCLUSIVE and v.device_outcome == Outcome.REGRESSION
    assert v.outcome == Outcome.REGRESSION and v.fails and v.failed_metrics == ["device time"]
    record = _record(v)
    assert headline(record).startswith("REGRESSION vgg19[cuda]: device time +7.3% [lower bound +"), headline(record)
    assert headline(record).endswith("] (raw) vs baseline") and "wall time" not in headline(record)
    assert verdict_cell(record) == "regression (device time)"
    assert v.message.startswith("REGRESSION vgg19[cuda]: device time +7.3% raw (lower bound +"), v.message
    # a fresh session confirms it: the table says so, as side by side does
    second = _stored(tmp_path, result_factory, 0.818 * 1.073, extra=8, seed=10)
    confirmed = confirm(v, second, GateSettings())
    assert confirmed.confirmed and confirmed.failed_metrics == ["device time"]
    assert verdict_cell(_record(confirmed)) == "regression (device time; confirmed)"
    assert "regression (device time; confirmed)" in terminal.format_table([_record(confirmed)])[2]


def test_one_rule_names_the_failed_metrics_for_every_reader(tmp_path, result_factory):
    v = _stored(tmp_path, result_factory, 0.818 * 1.073, extra=8)
    record = _record(v)
    assert record.failed_metrics == v.failed_metrics == ["device time"]
    assert record.fails and record.is_regression
    # a verdict that does not fail names nothing, whatever its figures
    unchanged = _record(_stored(tmp_path, result_factory, 0.818))
    assert unchanged.failed_metrics == [] and not unchanged.fails


# ---------------------------------------------------------------- 2. device time decides the word


def test_an_unchanged_gpu_item_reads_no_regression_by_device_time(tmp_path, result_factory):
    """Before: ``inconclusive`` (wall time decided the word though device time's CI was ±0.5%)."""
    v = _stored(tmp_path, result_factory, 0.818)
    assert v.wall_outcome == Outcome.INCONCLUSIVE and v.device_outcome == Outcome.NO_REGRESSION
    assert v.outcome == Outcome.NO_REGRESSION and not v.fails and v.decided_by == "device time"
    assert v.message.startswith("no regression vgg19[cuda]: device time "), v.message
    assert "wall time " in v.message and "(inconclusive)" in v.message
    assert verdict_cell(_record(v)) == "no-regression (device time)"
    # --aaco-strict-inconclusive does not fail it: the word is device time's
    assert not judge_history(*_args(tmp_path, result_factory), GateSettings(strict_inconclusive=True), 0.05,
                             "vgg19[cuda]").fails


def _args(tmp_path: Path, result_factory):
    current = result_factory([2.04] * 10, seed=9)
    current.device = _device(0.818, 9)
    return current, _baseline(tmp_path, result_factory), FP


# ---------------------------------------------------------------- 5. what is withheld is said, and counted


def _cold_record(verdict: dict) -> ItemRecord:
    v = Verdict(Outcome.NO_REGRESSION, "vgg19[cuda]", 0.05, message="no regression vgg19[cuda]: ...")
    record = ItemRecord("t.py::test_latency[vgg19-cuda]", "vgg19", "cuda", "vgg19[cuda]", verdict=v,
                        cold_start={"verdict": verdict})
    record.outcome = Outcome.FAILED if record.fails else Outcome.PASSED
    return record


def test_a_withheld_cold_start_is_said_in_the_terminal_and_no_table_calls_it_a_regression():
    """Before: a cold start withheld for contention printed nothing, and its figures read "regression"."""
    from pytest_aaco.passes.coldstart import ColdStart, cold_start_verdict

    history = [ColdStart([100.0, 101.0, 99.0], [20.0, 20.5, 19.8]) for _ in range(4)]
    busy = ColdStart([200.0, 202.0, 198.0], [20.0, 20.1, 19.9])
    busy.others_cores = 1.63
    withheld = cold_start_verdict(busy, history, "vgg19[cuda]", max_contention=1.0)
    record = _cold_record(withheld.to_dict())
    assert not record.fails and record.cold_start_withheld and record.worth_a_line
    assert record.failed_metrics == [] and not record.is_regression
    assert verdict_cell(record) == "no-regression (withheld: CPU contention)"
    lines = "\n".join(terminal.detail_lines([record]))
    assert "other processes kept 1.63 cores busy" in lines
    quiet = "\n".join(terminal.summary_lines([record], _context(), verbosity=-1))
    assert "other processes kept 1.63 cores busy" in quiet


def test_the_summary_count_counts_a_cold_start_regression():
    """Before: an item failed on cold start while the summary said ``0 regression(s)``."""
    from pytest_aaco.passes.coldstart import ColdStart, side_by_side_verdict

    base = ColdStart([62.0, 63.0, 61.0, 62.5, 62.0], [20.0] * 5)
    cand = ColdStart([729.0, 731.0, 725.0, 735.0, 728.0], [20.0] * 5)
    cand.others_cores = 1.63  # paired: the same load on both sides, never withheld
    record = _cold_record(side_by_side_verdict(base, cand, "vgg19[cuda]", "HEAD~1").to_dict())
    assert record.fails and record.failed_metrics == ["cold start"] and record.is_regression
    context = _context({"alpha": 0.05, "m": 1, "tests": 1, "discoveries": 0, "method": "LOND"})
    assert "1 gated, 1 regression(s)" in "\n".join(terminal.summary_lines([record], context))
    from pytest_aaco.reports.github import job_summary
    assert "1 gated, 1 regression(s)." in job_summary([record], context.summary)


def _context(fdr: dict | None = None):
    from pytest_aaco.records.item import SessionSummary
    from pytest_aaco.reports import ReportContext

    return ReportContext(summary=SessionSummary(1, {}, fdr))


# ---------------------------------------------------------------- 3. every per cent beside the means it is the ratio of


def test_the_stored_message_and_junit_print_the_means_of_the_raw_per_cent(tmp_path, result_factory):
    """Before: ``raw +13.0%; mean 41.91 ms vs 40.04 ms`` (those means give +4.7%)."""
    import re

    from pytest_aaco.reports.junit import properties
    from tests.test_output import agrees

    baseline = _baseline(tmp_path, result_factory)
    current = result_factory([2.6, 2.2, 2.9, 2.1, 2.5, 2.4, 2.8, 2.3, 2.2, 2.7], noise=0.3, seed=3)
    v = judge_history(current, baseline, FP, GateSettings(), 0.05, "vgg19[cuda]")
    found = re.search(r"latency ([+-][\d.]+%) raw, fastest quarter of rounds \(upper bound [^)]*\); geometric mean of"
                      r" the fastest quarter ([\d.]+) ms vs ([\d.]+) ms;"
                      r" mean ([\d.]+) ms vs ([\d.]+) ms \(([+-][\d.]+%)\)", v.message)
    assert found, v.message
    pct, geo_now, geo_then, now, then, mean_pct = found.groups()
    assert agrees(pct, geo_now, geo_then) and agrees(mean_pct, now, then)
    assert pct != mean_pct  # skewed rounds: the two ratios differ, each printed beside its own means
    props = dict(properties(_record(v)))
    assert float(props["aaco_raw_change_pct"]) / 100 + 1 == float(props["aaco_current_geomean_ms"]) / float(
        props["aaco_baseline_geomean_ms"]) or abs(float(props["aaco_raw_change_pct"]) / 100 + 1 - float(
            props["aaco_current_geomean_ms"]) / float(props["aaco_baseline_geomean_ms"])) < 1e-5
    # an old record without the geometric means still loads, and dumps to the same keys
    old = v.to_dict()
    del old["current_geomean_ms"], old["baseline_geomean_ms"], old["rounds_kept"]
    assert Verdict.from_dict(old).to_dict() == old


# ---------------------------------------------------------------- the interval printed is the one compared

def _comparison(change: float, se: float, df: float = 4.0):
    from scipy.stats import t as student_t

    from pytest_aaco.verdict.stats import Comparison

    estimate = float(np.log1p(change))
    p_slower = float(student_t.sf(estimate / se, df))
    return Comparison("prediction-interval", estimate, se, df, p_slower, 1 - p_slower, 10, 5)


def test_the_interval_printed_is_the_bound_the_rule_compared_with_its_side():
    """Before: ``-26.2% raw [-52.9, +15.8]`` was called no-regression at 10% and ``+3.8% [-1.1, +9.0]``
    inconclusive at 10%: the 95% two-sided CI was printed, the one-sided bound was compared. After:
    the one-sided bound, its side and the threshold it was compared with, from the verdict's own figures."""
    import re

    from pytest_aaco.verdict.finish import compared_text
    from pytest_aaco.verdict.outcome import NO_REGRESSION_ALPHA, outcome_of
    from pytest_aaco.verdict.percent import pct

    level, threshold = 0.05, 0.10
    for change, se in ((-0.262, 0.28), (0.038, 0.06), (0.038, 0.025), (0.30, 0.05), (0.0, 0.01), (0.12, 0.2)):
        comp = _comparison(change, se)
        outcome = outcome_of(comp, threshold, level)
        lo, hi = comp.ci(0.95)
        lower, upper = comp.lower(level), comp.upper(max(level, NO_REGRESSION_ALPHA))
        text = compared_text(comp.ratio, lo, hi, lower, upper, threshold)
        assert "CI" not in text
        if outcome == Outcome.REGRESSION:
            assert text == f"lower bound {pct(lower)} > 0, {pct(comp.ratio)} >= 10%", text
        else:
            found = re.fullmatch(r"upper bound ([+-][\d.]+)% (<|>=) 10%", text)
            assert found, text
            assert found.group(1) + "%" == pct(upper)
            # the relation printed is the rule's: "<" exactly when the verdict is no regression
            assert (found.group(2) == "<") == (outcome == Outcome.NO_REGRESSION), (change, se, text, outcome)
    # the stored verdict carries the bounds; an older record without them prints its 95% CI, labelled
    assert compared_text(1.038, 0.989, 1.09, None, None, threshold) == "95% CI -1.1% .. +9.0%"


def test_the_stored_message_prints_the_bound_the_outcome_was_decided_on(tmp_path, result_factory):
    from pytest_aaco.verdict.percent import pct

    v = _stored(tmp_path, result_factory, 0.818)
    assert v.upper_bound is not None and v.lower_bound is not None
    assert "95% CI" not in v.message
    dev = v.judgements[DEVICE_TIME]
    assert f"device time {pct(dev.ratio)} raw (upper bound {pct(dev.upper_bound)} < 1%)" in v.message, v.message
    assert f"(upper bound {pct(v.upper_bound)} " in v.message
    # the table prints the same bound
    record = _record(v)
    assert f"[upper bound {pct(v.upper_bound)} " in "\n".join(terminal.format_table([record]))
    # round trip: the bounds are stored and read back
    again = Verdict.from_dict(v.to_dict())
    assert (again.lower_bound, again.upper_bound) == (v.lower_bound, v.upper_bound)
    assert "lower_bound" not in Verdict.from_dict({**v.to_dict(), "lower_bound": None}).to_dict()


# ---------------------------------------------------------------- the diagnosis names a change first


def test_a_regression_of_a_changed_model_is_diagnosed_as_the_change_not_the_runner(tmp_path, result_factory):
    """Before: every confirmed regression read ``likely cause: cpu_contention ... run benchmarks on a
    dedicated runner``, even when the model bytes had changed. After: the change is named first, and
    what the telemetry showed follows as later evidence."""
    import os

    from pytest_aaco.gate import diagnose

    changed_fp = build_fingerprint(model_sha256="b", input_shapes={}, input_dtypes={}, provider="cuda",
                                   ep_name="CUDAExecutionProvider", provider_options={}, iobinding="none",
                                   intra_op_threads=0)
    current = result_factory([2.6] * 10, seed=9)
    current.device = _device(0.818 * 1.073, 9, extra=8)
    # a busy runner: the 1-minute load average far above the cores
    current.telemetry = {"summary": {"load_avg_1m": {"max": 10.0 * (os.cpu_count() or 1)}}}
    v = judge_history(current, _baseline(tmp_path, result_factory), changed_fp, GateSettings(), 0.05, "vgg19[cuda]")
    assert v.regressions and v.changed == ["model bytes"] and v.changed_since == "the baseline"
    found = diagnose(current, v, {})
    assert found is not None and found["category"] == "change_at_ref", found
    assert found["evidence"][0] == "model bytes changed since the baseline"
    assert "cpu_contention" in found["evidence"][1] and "dedicated runner" not in found["recommendation"]
    record = _record(v)
    record.diagnosis = found
    assert "likely cause: change_at_ref: model bytes changed since the baseline" in record.explanation()
    # the same model, the same load: the runner is the suspect, as before
    same = judge_history(current, _baseline(tmp_path, result_factory), FP, GateSettings(), 0.05, "vgg19[cuda]")
    assert same.changed == [] and "changed" not in same.to_dict()
    assert (diagnose(current, same, {}) or {}).get("category") == "cpu_contention"
    # stored and read back
    again = Verdict.from_dict(v.to_dict())
    assert (again.changed, again.changed_since) == (["model bytes"], "the baseline")


# ---------------------------------------------------------------- the headline is short; notes go to the report


def test_the_headline_fits_160_characters_and_method_notes_go_to_the_report(tmp_path, result_factory):
    """Before: ``+7.3% raw DEVICE TIME REGRESSION ...`` headlines, and messages of 600 to 700 characters
    of method notes (``raw figures: the item's iteration ... differ more than 3x ...``, the test used, the
    minimum detectable effect and what to do). After: ``OUTCOME item: metric +x.x% [bound] (series) vs
    what`` in at most 160 characters; the notes are the report's (terminal ``note:`` lines, the HTML's
    Notes, pytest's failure text) and the bundle's (the verdict's ``notes``)."""
    failing = _stored(tmp_path, result_factory, 0.818 * 1.073, extra=8)
    current = result_factory([2.6, 2.2, 2.9, 2.1, 2.5, 2.4, 2.8, 2.3, 2.2, 2.7], noise=0.3, seed=3)
    current.device = None
    unsure = judge_history(current, _baseline(tmp_path, result_factory), FP, GateSettings(), 0.05, "vgg19[cuda]")
    assert unsure.outcome == Outcome.INCONCLUSIVE
    for v in (failing, unsure):
        assert "method:" not in v.message and "minimum detectable effect" not in v.message
        assert any(n.startswith("method: prediction-interval t-test") for n in v.notes)  # in the bundle
        assert any(n.startswith("method: ") for n in Verdict.from_dict(v.to_dict()).notes)
    assert "minimum detectable effect" in unsure.report_notes[0]
    record = _record(failing)
    line = headline(record)
    assert len(line) <= 160 and line.startswith("REGRESSION vgg19[cuda]: device time +7.3% [lower bound"), line
    assert "note: method: prediction-interval" in record.explanation()
    assert any(x.startswith("    note: method:") for x in terminal.detail_lines([record]))
    # a long item name and several failed metrics: the bounds go first, then the line is cut, never past 160
    failing.memory = ["RSS growth 900 MB vs baseline 300 MB (+600 MB, limit +10% and +50 MB)"]
    long = ItemRecord("t::x", "m" * 90, "cuda", "m" * 90 + "[cuda]", verdict=failing, outcome=Outcome.FAILED)
    assert long.failed_metrics == ["device time", "memory"]
    assert len(headline(long)) <= 160 and headline(long).startswith("REGRESSION " + "m" * 90)


# ---------------------------------------------------------------- the plot's baseline is the table's figure


def test_the_round_means_plot_draws_the_baseline_the_verdict_table_prints(tmp_path, result_factory):
    """Before: the plot drew the baseline at 35.4 ms (a geometric mean of run means, printed nowhere)
    while the verdict table said 40.04 ms. After: the line is the table's baseline geometric mean,
    labelled with it, and the table prints it beside this run's (the raw change is their ratio)."""
    import re

    import pytest

    pytest.importorskip("matplotlib")
    from pytest_aaco.reports import html, html_plots
    from pytest_aaco.reports.markup import new_figure
    from tests.test_output import agrees

    baseline = _baseline(tmp_path, result_factory)
    current = result_factory([2.6] * 10, seed=9)
    v = judge_history(current, baseline, FP, GateSettings(), 0.05, "vgg19[cuda]")
    record = ItemRecord("t::x", "vgg19", "cuda", "vgg19[cuda]", result=current.to_dict(raw=True), verdict=v)
    table = html.verdict_table(v)
    now = re.search(r"this run geometric mean of the fastest quarter</th><td[^>]*>([\d.]+) ms", table)
    then = re.search(r"baseline geometric mean of the fastest quarter</th><td[^>]*>([\d.]+) ms", table)
    assert now and then, table
    assert agrees(f"{(v.raw_ratio - 1) * 100:+.1f}%", now.group(1), then.group(1))
    fig = new_figure(6, 3)
    ax = fig.subplots()
    html_plots._plot_rounds(ax, record, record.result_record or ResultRecord(),
                      [HistoryRun.from_dict(r) for r in baseline.history])
    drawn = [line for line in ax.get_lines() if str(line.get_label()).startswith("baseline geometric mean")]
    label = f"baseline geometric mean of the fastest quarter {then.group(1)} ms"
    assert len(drawn) == 1 and drawn[0].get_label() == label
    assert float(drawn[0].get_ydata()[0]) == pytest.approx(v.baseline_geomean_ms)


# ---------------------------------------------------------------- every reader, every failing metric


def _matrix(tmp_path: Path, result_factory) -> dict[str, ItemRecord]:
    """One record per case: each failing metric (stored wall time, stored device time, side-by-side wall
    time (recorded), side-by-side device time, cold start, memory, p99), no regression and inconclusive."""
    import json

    from tests.test_output import _record as output_record
    from tests.test_output import _verdict

    found: dict[str, ItemRecord] = {}
    base = _baseline(tmp_path, result_factory)
    slow = result_factory([2.04 * 1.6] * 10, seed=9)
    slow.device = _device(0.818, 9)
    found["stored wall time"] = _record(judge_history(slow, base, FP, GateSettings(), 0.05, "vgg19[cuda]"))
    found["stored device time"] = _record(_stored(tmp_path, result_factory, 0.818 * 1.073, extra=8))
    recorded = json.loads((Path(__file__).parent / "data" / "records" /
                           "compare-test_perf.py__test_latency_slowed-cpu.545cfe89.json").read_text())
    found["side-by-side wall time"] = ItemRecord.from_dict(recorded)
    sbs_dev = {"ref": "main", "outcome": "inconclusive", "cycles": 12,
               "device_time": {"outcome": "regression", "ratio": 1.064, "ci_low": 1.05, "ci_high": 1.08,
                               "lower_bound": 1.052, "upper_bound": 1.076, "threshold": 0.01, "series": "paired",
                               "p_slower": 1e-5, "level": 0.05, "kernel_ms": {"baseline": 0.8, "candidate": 0.85}}}
    found["side-by-side device time"] = output_record(_verdict(side_by_side=sbs_dev, outcome=Outcome.REGRESSION))
    cold = {"verdict": {"outcome": "regression", "fails": True, "method": "side-by-side", "ref": "main",
                        "message": "COLD START REGRESSION mlp[cpu] (first run): first run geometric mean 247 ms vs"
                                   " 143 ms at main (+73%, lower bound +60.0% > 0, +72.7% >= 20%, p=1e-06)",
                        "metrics": {"first_run_ms": {"outcome": "regression", "ratio": 1.727}}}}
    quiet = _verdict(outcome=Outcome.NO_REGRESSION, fails=False, ratio=1.01, series="raw", raw_ratio=1.01)
    found["cold start"] = output_record(quiet, cold_start=cold)
    found["memory"] = output_record(_verdict(memory=["RSS growth 120 MB vs baseline 75 MB (+45 MB)"],
                                             outcome=Outcome.NO_REGRESSION, ratio=1.01, series="raw"))
    found["p99"] = output_record(_verdict(p99={"ratio": 1.4, "regression": True, "ci_low": 1.2, "ci_high": 1.6},
                                          outcome=Outcome.NO_REGRESSION, series="raw"))
    found["no regression"] = _record(_stored(tmp_path, result_factory, 0.818))
    steady = result_factory([2.6, 2.2, 2.9, 2.1, 2.5, 2.4, 2.8, 2.3, 2.2, 2.7], noise=0.3, seed=3)
    found["inconclusive"] = _record(judge_history(steady, base, FP, GateSettings(), 0.05, "vgg19[cuda]"))
    for case in ("side-by-side device time", "cold start", "memory", "p99"):  # rendered as the gate renders
        verdict = found[case].verdict
        assert verdict is not None
        finish(verdict, GateSettings())
    for record in found.values():
        record.outcome = Outcome.FAILED if record.fails else Outcome.PASSED
    return found


METRIC_WORDS = {"stored wall time": "wall time", "stored device time": "device time",
                "side-by-side wall time": "latency", "side-by-side device time": "device time",
                "cold start": "cold start", "memory": "memory", "p99": "p99"}


def _html_names(cell: str, record: ItemRecord, page: str) -> bool:
    """The HTML overview shows the verdict cell as the outcome's badge and the flags after it."""
    import html as html_lib

    flags = cell[len(str(record.effective_outcome)):].strip()
    return html_lib.escape(flags) in page and str(record.effective_outcome) in page


def test_every_reader_names_the_same_metric_and_per_cent(tmp_path, result_factory):
    """The short summary (pytest's ``Failed:`` line: the headline), the message, the terminal table, the
    HTML, JUnit, the GitHub summary and the summary count agree for each failing metric, and for
    no regression and inconclusive; every ``A ms vs B ms (+P%)`` printed agrees with its means."""
    import re

    from pytest_aaco.reports import github, html, junit
    from pytest_aaco.reports.wording import failure_text
    from tests.test_output import agrees

    for case, record in _matrix(tmp_path, result_factory).items():
        cell = verdict_cell(record)
        table = "\n".join(terminal.format_table([record]))
        page = html.overview_table([record]) + html.item_section(record, None, plots=False)
        junit_case = junit.testcase(record)
        commands = github.workflow_commands([record])
        summary = github.job_summary([record], _context({"alpha": 0.05, "m": 1, "tests": 1}).summary)
        count = terminal.lond_line(FdrRecord.from_dict({"alpha": 0.05, "m": 1, "tests": 1}), int(record.is_regression))
        if case in METRIC_WORDS:
            word = METRIC_WORDS[case]
            line = headline(record)
            assert record.fails and len(line) <= 160 and line.startswith(f"REGRESSION {record.label}: {word}"), line
            assert failure_text(record).splitlines()[0] == line  # pytest's short summary
            shown = re.search(r"[+-][\d.]+%", line)
            if shown:  # the headline's per cent is the message's and the table's
                where = (record.message + (record.cold_start_verdict.message or "")
                         if case == "cold start" else record.message)
                assert shown.group(0) in where, (case, line, where)
                if case not in ("cold start", "p99"):
                    assert shown.group(0) in table, (case, table)
            assert cell.startswith("regression") or f"({word})" in cell, (case, cell)
            if word not in ("latency", "wall time") or (record.verdict and record.verdict.device):
                assert word in cell, (case, cell)
            assert cell in table and _html_names(cell, record, page), (case, cell)
            failure = junit_case.find("failure")
            assert failure is not None and failure.get("message") == line, case
            assert len(commands) == 1 and commands[0].split("::", 2)[2].startswith(line.replace("%", "%25")), case
            assert github.md_text(cell) in summary, case
            assert count is not None and count.endswith("1 gated, 1 regression(s)"), (case, count)
        else:
            expected = {"no regression": "no-regression", "inconclusive": "inconclusive"}[case]
            assert cell.startswith(expected) and not record.is_regression, (case, cell)
            assert cell in table and _html_names(cell, record, page) and github.md_text(cell) in summary
            assert count is not None and count.endswith("1 gated, 0 regression(s)"), (case, count)
        # every per cent printed beside two means is their ratio
        text = record.explanation()
        pattern = r"([\d.]+) ms(?: \([^)]*\))? vs ([\d.]+) ms[^(;]*\(([+-][\d.]+%)\)"
        for now, then, per_cent in re.findall(pattern, text):
            assert agrees(per_cent, now, then), (case, now, then, per_cent, text)



def _bound_from_junit(props: dict[str, str], prefix: str, threshold: float, ratio: float) -> str:
    """The bound text rebuilt from JUnit's numbers alone (``aaco_<prefix>lower_bound`` and
    ``upper_bound``, ratios): what every other reader must print."""
    from pytest_aaco.verdict.percent import bound_text, pct

    low, high = props.get(f"aaco_{prefix}lower_bound"), props.get(f"aaco_{prefix}upper_bound")
    text = bound_text(ratio, None if low is None else float(low), None if high is None else float(high), threshold)
    assert text and (pct(float(low)) if text.startswith("lower") else pct(float(high))) in text  # type: ignore[arg-type]
    return text


def test_one_interval_junit_html_github_and_terminal_print_the_bound_compared(tmp_path, result_factory):
    """Issue 43: the terminal printed a lower bound of +51.3% while JUnit's ``aaco_ci_low`` said 1.570
    (+57%, the two-sided 95% CI). Every reader prints the one-sided bound the outcome rule compared: the
    number in JUnit's ``aaco_lower_bound`` / ``aaco_upper_bound`` is the one in the terminal's table, the
    HTML's overview cell and verdict table, and the job summary; so for device time."""
    import html as html_lib

    from pytest_aaco.reports import github, html, junit
    from pytest_aaco.reports.wording import change_text

    checked = 0
    for case, record in _matrix(tmp_path, result_factory).items():
        v = record.verdict
        if v is None or v.ratio is None or v.lower_bound is None or v.upper_bound is None:
            continue
        props = dict(junit.properties(record))
        assert "aaco_ci_low" not in props and "aaco_ci_high" not in props, case  # one interval, not two
        bound = _bound_from_junit(props, "", v.threshold, float(props["aaco_change_pct"]) / 100 + 1)
        assert props["aaco_bound_compared"] == bound, case
        table = "\n".join(terminal.format_table([record]))
        overview = html.overview_table([record])
        figures = html.verdict_table(v)
        summary = github.job_summary([record], _context().summary)
        assert f"[{bound}]" in table, (case, bound, table)
        assert f"[{html_lib.escape(bound)}]" in overview, (case, bound)
        assert f"<td>{html_lib.escape(bound)}</td>" in figures, (case, bound, figures)
        assert github.md_text(f"[{bound}]") in summary, (case, bound)
        assert f"[{bound}]" in change_text(v), case
        checked += 1
        dev = v.judgements.get(DEVICE_TIME)
        if dev is not None and record.device_record is not None and dev.lower_bound is not None:
            dev_bound = _bound_from_junit(props, "device_time_", dev.threshold, dev.ratio)
            assert props["aaco_device_time_bound_compared"] == dev_bound
            assert f"[{dev_bound}]" in terminal.device_change(record), case
            assert f"({html_lib.escape(dev_bound)})" in html.overview_table([record]), case
    assert checked >= 3


def test_a_record_written_before_bounds_prints_its_95_ci_in_every_reader():
    """An older bundle's verdict has no one-sided bounds: every reader falls back to the same 95% CI."""
    from pytest_aaco.reports import github, junit
    from tests.test_output import _record as output_record
    from tests.test_output import _verdict

    record = output_record(_verdict(ratio=1.6, ci_low=1.57, ci_high=1.63, series="raw", raw_ratio=1.6))
    props = dict(junit.properties(record))
    assert (props["aaco_ci_low"], props["aaco_ci_high"]) == ("1.57", "1.63")
    assert "aaco_lower_bound" not in props and "aaco_bound_compared" not in props
    assert "[+57.0, +63.0]" in "\n".join(terminal.format_table([record]))
    assert github.md_text("[+57.0, +63.0]") in github.job_summary([record], _context().summary)


def test_every_judged_metric_is_one_judgement_with_the_figures_the_reports_print(tmp_path, result_factory):
    """A verdict's judgements by metric (:attr:`Verdict.judgements`, built by the one constructor
    ``judgement_of``) carry the figures the message prints and the outcome ``failed_metrics`` reads."""
    from pytest_aaco.records.base import DEVICE_TIME, LATENCY, Judgement

    v = _stored(tmp_path, result_factory, 0.818 * 1.073, extra=8)
    judged = v.judgements
    assert set(judged) == {LATENCY, DEVICE_TIME}
    wall, dev = judged[LATENCY], judged[DEVICE_TIME]
    assert (wall.ratio, wall.lower_bound, wall.upper_bound, wall.p_slower, wall.level) == (
        v.ratio, v.lower_bound, v.upper_bound, v.p_value, v.level)
    assert wall.outcome == v.wall_outcome and dev.outcome == v.device_outcome == Outcome.REGRESSION
    assert [m for m, j in judged.items() if j.outcome == Outcome.REGRESSION] == v.failed_metrics == [DEVICE_TIME]
    assert v.device_time is not None and v.device_time.judgement == dev  # the record holds the judgement
    written = v.to_dict()["device_time"]
    assert dev.to_dict() == {k: written[k] for k in dev.to_dict()}  # its JSON keys are the judgement's
    assert written["wall_outcome"] == str(wall.outcome)  # wall time's own outcome, as files written before it
    assert Verdict.from_dict(v.to_dict()).judgements == judged  # read back, the same judgements
    assert Judgement.from_dict(DEVICE_TIME, dev.to_dict()) == dev


# ---------------------------------------------------------------- p99 is a judgement like the others


def test_p99_is_a_judgement_whose_bound_is_the_one_the_message_prints():
    """The p99 part of a verdict reads as a :class:`Judgement` (``records.p99_judgement``): the bootstrap's
    two-sided interval at ``1 - 2·level`` gives the one-sided bounds at the item's level, so the lower bound
    lies above 1 when the bootstrap p is at most the level; the message prints that bound (before: an
    unlabelled "CI"), and a p99 regression a confirmation look cleared reads as no regression."""
    from dataclasses import replace

    import numpy as np

    from pytest_aaco.records.base import P99, p99_judgement
    from pytest_aaco.verdict import bootstrap
    from pytest_aaco.verdict.percent import bound_text, pct
    from tests.test_output import _verdict

    rng = np.random.default_rng(5)
    base = [rng.gamma(20, 0.1, 400) for _ in range(6)]
    level = 0.05
    for factor, tail in ((1.0, 1.0), (1.0, 1.6), (1.0, 1.02)):
        cur = [np.where(rng.random(400) < 0.03, r * tail, r * factor) for r in (rng.gamma(20, 0.1, 400)
                                                                                for _ in range(6))]
        comp = bootstrap.bootstrap_quantile_ratio(cur, base, q=99.0, level=1 - 2 * level)
        regression = comp.p_slower <= level and comp.ratio - 1 >= 0.05
        judged = p99_judgement(replace(comp, regression=regression), 0.05, level)
        assert judged.metric == P99 and judged.level == level and judged.ratio == comp.ratio
        assert (judged.lower_bound, judged.upper_bound) == (comp.ci_low, comp.ci_high)
        # the percentile bootstrap: the alpha-quantile of the ratios is above 1 when few ratios are <= 1
        if judged.lower_bound > 1.0 + 1e-12:
            assert comp.p_slower <= level + 1.0 / comp.n_boot
        assert (judged.outcome == Outcome.REGRESSION) == regression
        v = _verdict(p99=replace(comp, regression=regression), outcome=Outcome.NO_REGRESSION, series="raw",
                     level=level, threshold=0.05)
        assert v.judgements[P99] == judged
        assert (P99 in v.regressions) == regression
        finish(v, GateSettings())
        bound = bound_text(comp.ratio, comp.ci_low, comp.ci_high, 0.05)
        assert f"p99 {pct(comp.ratio)} vs the latest baseline run ({bound})" in v.message, v.message
        assert ("REGRESSED" in v.message) == regression
        assert Verdict.from_dict(v.to_dict()).judgements[P99] == judged
    cleared = p99_judgement(replace(comp, regression=False), 0.05, level)
    assert cleared.outcome != Outcome.REGRESSION
