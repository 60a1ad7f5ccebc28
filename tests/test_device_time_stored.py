"""Device time in stored baselines: traced blocks between the stored rounds (the item's and the
reference workload's), kept in the history, gated with the history test beside wall time.

The tracer is a fake with the documented shape (a :class:`~pytest_aaco.tracers.base.DeviceBlock`
per traced block); the real one, CUPTI, runs on NVIDIA GPUs only (docs/gpu.md).
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from finished import judge_history

from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.history.judge import REGRESSION, device_check, device_series
from pytest_aaco.history.series import ADJUSTED, NORMALIZED, RAW, reference_unstable
from pytest_aaco.history.store import Baseline, load_baseline, run_record
from pytest_aaco.measure.device_time import DEVICE_RUNS, DeviceSeries
from pytest_aaco.measure.results import ReferenceSeries
from pytest_aaco.options import GateSettings
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.tracers.base import DeviceBlock
from pytest_aaco.verdict.metrics import kernel_changes
from tests.test_output import explained

#: the pytester project's conftest: a fake tracer for every EP (the item's kernel time from
#: FAKE_DEVICE_MS, the reference's fixed; a run-level offset and block noise, seeded by FAKE_SEED),
#: or none with FAKE_NO_TRACER (the line tracer_for gives without cupti-python); every verdict
#: record goes to records.jsonl
FAKE_CONFTEST = """
import json, os
from collections import Counter

import numpy as np

from pytest_aaco.tracers import cupti, select
from pytest_aaco.tracers.base import DeviceBlock

ORIGINAL = select.tracer_for


class FakeTracer:
    source = "fake"

    def __init__(self):
        self.rng = np.random.default_rng(int(os.environ.get("FAKE_SEED", "0")))
        self.offset = float(np.exp(self.rng.normal(0, 0.002)))  # this process's run-level offset

    def trace(self, run, runs):
        outputs = None
        for _ in range(runs):
            outputs = run()
        item = np.asarray(outputs[0]).shape == (1, 64)  # the tiny model's output; the reference's differs
        base = float(os.environ.get("FAKE_DEVICE_MS", "0.818")) if item else 0.5
        names = ["conv"] * 200 + ["relu"] * 19 + ["conv3x3"] * int(os.environ.get("FAKE_EXTRA", "0")) if item \\
            else ["ref"] * 50
        ms = base * self.offset * float(np.exp(self.rng.normal(0, 0.001)))
        return DeviceBlock(runs, ms, ms * 0.9, float(len(names)), Counter(names * runs))



def fake_tracer_for(provider, mode):
    if mode == "off":
        return None, None
    if os.environ.get("FAKE_NO_TRACER"):
        return None, ("device time on NVIDIA GPUs needs cupti-python: " + cupti.INSTALL_HINT
                      + "; gated on wall time only")
    return FakeTracer(), None


def pytest_configure(config):
    select.tracer_for = fake_tracer_for


def pytest_unconfigure(config):
    select.tracer_for = ORIGINAL


def pytest_aaco_verdict(config, item, record):
    with open("records.jsonl", "a") as out:
        out.write(json.dumps(record) + "\\n")
"""

REGISTRY = """
models:
  tiny:
    path: tiny.onnx
    iterations: 200
"""
#: wall time's threshold wide (a tiny model's wall time on the loaded test machine moved +420% once, with
#: the reference 71% slower); device time keeps its own 1% (--aaco-device-threshold)
ARGS = ("--aaco-intra-op-threads=1", "--aaco-memory-slack=100000", "--aaco-rounds=6", "--aaco-threshold=99%")


def _records(project) -> list[dict]:
    path = project.pytester.path / "records.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [json.loads(line) for line in lines]


def _history(project) -> list[dict]:
    (path,) = project.pytester.path.glob("baselines/*/*.json")
    return json.loads(path.read_text())["history"]


@pytest.fixture
def traced_project(aaco_project, monkeypatch):
    aaco_project.registry(REGISTRY)
    aaco_project.pytester.makeconftest(FAKE_CONFTEST)
    monkeypatch.setenv("FAKE_DEVICE_MS", "0.818")
    return aaco_project


def test_five_saves_then_unchanged_passes_and_six_percent_device_time_fails_led_by_device_time(
        traced_project, monkeypatch):
    project = traced_project
    for seed in range(5):
        monkeypatch.setenv("FAKE_SEED", str(seed))
        result = project.run("--aaco-save-baseline", *ARGS)
        assert result.ret == 0, result.stdout.str()
    history = _history(project)
    assert len(history) == 5
    for run in history:  # the item's and the reference's device time, one traced block per round
        dev, ref_dev = run["device_time"], run["reference"]["device_time"]
        assert dev["blocks"] == len(dev["log_means"]) == len(run["rounds"]) == 6 and dev["runs"] == DEVICE_RUNS
        assert dev["kernels"] == 219 and dev["kernel_names"] == {"conv": 200.0, "relu": 19.0}
        assert dev["kernel_ms"] == pytest.approx(0.818, rel=0.02) and dev["busy_ms"] < dev["kernel_ms"]
        assert 0 < dev["traced_s"] < dev["measure_s"]
        assert ref_dev["kernel_ms"] == pytest.approx(0.5, rel=0.02) and len(ref_dev["log_means"]) == 6
    _records(project)

    monkeypatch.setenv("FAKE_SEED", "10")
    result = project.run(*ARGS)
    (record,) = _records(project)
    dev = record["verdict"]["device_time"]
    assert result.ret == 0 or dev["wall_outcome"] == "regression", result.stdout.str()  # never for device time
    assert dev["outcome"] == "no-regression" and dev["series"] == ADJUSTED and dev["runs"] == 5
    assert dev["mde"] < 0.03  # the target for a 5-run history
    message = record["verdict"]["message"]
    assert "; device time " in message and "kernels per run 219 -> 219" in message
    assert record["result"]["device_time"]["blocks"] == 6  # the bundle's result carries it too

    monkeypatch.setenv("FAKE_DEVICE_MS", str(0.818 * 1.065))  # k4: +6.5% kernel time, 8 more kernels
    monkeypatch.setenv("FAKE_EXTRA", "8")
    monkeypatch.setenv("FAKE_SEED", "11")
    result = project.run(*ARGS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    records = _records(project)
    verdict = records[-1]["verdict"]
    assert verdict["outcome"] == "regression" and verdict["fails"] and verdict["confirmed"]
    message = verdict["message"]
    assert verdict["device_time"]["outcome"] == "regression"
    if verdict["device_time"]["wall_outcome"] != "regression":  # wall time did not fail (unless under heavy load)
        assert message.startswith("REGRESSION tiny[cpu]: device time +6."), message
        result.stdout.fnmatch_lines(["*REGRESSION tiny?cpu?: device time +6.*"])
    assert "device time +6." in message and "kernels per run 219 -> 227" in message and "added conv3x3 x8" in message
    # both metrics; under heavy load wall time fails too and leads the message
    lead = "; wall time " if verdict["device_time"]["wall_outcome"] != "regression" else ": wall time "
    assert lead in message and "mean " in message


@pytest.mark.slow
def test_no_tracer_says_which_package_and_still_gates_on_wall_time(traced_project, monkeypatch):
    project = traced_project
    monkeypatch.setenv("FAKE_NO_TRACER", "1")
    result = project.run("--aaco-save-baseline", *ARGS)
    assert result.ret == 0
    (record,) = _records(project)
    assert "pytest-aaco[cuda]" in record["verdict"]["message"]
    assert "device_time" not in _history(project)[0]
    result = project.run(*ARGS)
    (record,) = _records(project)
    assert record["verdict"]["ratio"] is not None and "device_time" not in record["verdict"]  # wall time gated
    # how it was gated is a note of the report and the bundle, not the one-line message
    assert "pip install 'pytest-aaco[cuda]'" in " ".join(record["verdict"]["notes"])
    assert "gated on wall time only" in " ".join(record["verdict"]["notes"])


# ----------------------------------------------------------------- judge level, against scipy.stats


def _json(record):
    """A device-time record as a bundle holds it (None stays None)."""
    return None if record is None else record.to_dict()


def _series(ms: float, blocks: int = 30, sd: float = 0.001, seed: int = 0, extra: int = 0) -> DeviceSeries:
    rng = np.random.default_rng(seed)
    names = Counter({"conv": 200 * 10, "relu": 19 * 10, **({"conv3x3": extra * 10} if extra else {})})
    return DeviceSeries("fake", tuple(DeviceBlock(10, float(ms * np.exp(rng.normal(0, sd))), ms * 0.9,
                                                  219.0 + extra, names) for _ in range(blocks)), 0.3, 3.0)


def _baseline(tmp_path: Path, result_factory, levels: list[float], with_reference: bool = False) -> Baseline:
    history = []
    for seed, level in enumerate(levels):
        result = result_factory([2.0] * 10, seed=seed)
        result.device = _series(level, seed=seed)
        if with_reference:
            result.reference = _reference(result, 0.5 * level / 0.818, seed)
        history.append(run_record(result))
    return Baseline(tmp_path / "b.json", "t::x", {"provider": "cpu"}, "fp", history)


def _reference(result, ms: float, seed: int) -> ReferenceSeries:
    log = result.round_log_means - 0.1
    return ReferenceSeries("mix", "mix:0123456789abcdef", log, result.round_log_means - log, 1.8, 100, 0.17,
                           device=_series(ms, seed=100 + seed))


LEVELS = [0.818, 0.8195, 0.8172, 0.8188, 0.8166]


def test_device_history_test_is_the_prediction_interval_of_scipy_stats(tmp_path, result_factory):
    baseline = _baseline(tmp_path, result_factory, LEVELS)
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818 * 1.03, seed=9)
    series = device_series(current, baseline)
    assert series is not None and series.kind == RAW and series.reason == "no reference workload was measured"
    dev = _json(device_check(current, baseline, GateSettings(threshold=0.02), level=0.01))
    assert dev is not None
    means = np.array([np.mean(np.log([b.kernel_ms for b in _series(level, seed=s).blocks]))
                      for s, level in enumerate(LEVELS)])
    y0 = float(np.mean(current.device.log_means))
    se = math.sqrt(np.var(means, ddof=1) * (1 + 1 / len(means)))
    t = (y0 - means.mean()) / se
    assert dev["p_slower"] == pytest.approx(scipy.stats.t.sf(t, len(means) - 1), rel=1e-6)
    assert dev["ratio"] == pytest.approx(math.exp(y0 - means.mean()), rel=1e-9)
    half = scipy.stats.t.ppf(0.975, len(means) - 1) * se
    assert dev["ci_low"] == pytest.approx(math.exp(y0 - means.mean() - half), rel=1e-6)
    assert dev["ci_high"] == pytest.approx(math.exp(y0 - means.mean() + half), rel=1e-6)
    assert dev["outcome"] == REGRESSION  # +3% at a 2% threshold, history sd about 0.1%
    assert dev["kernels"] == {"baseline": 219.0, "candidate": 219.0}


def test_device_time_is_adjusted_by_the_reference_workloads_device_time(tmp_path, result_factory):
    # the clock moved every kernel 4% slower now (item and reference alike): adjusted, no regression;
    # raw device time would call it a regression
    baseline = _baseline(tmp_path, result_factory, LEVELS, with_reference=True)
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818 * 1.04, seed=9)
    current.reference = _reference(current, 0.5 * 1.04, 9)
    settings = GateSettings(threshold=0.03)
    dev = _json(device_check(current, baseline, settings, level=0.05))
    assert dev is not None and dev["series"] == ADJUSTED and dev["outcome"] != REGRESSION
    assert abs(dev["ratio"] - 1) < 0.01
    current.reference = ReferenceSeries(**{**vars(current.reference), "device": None})
    raw = _json(device_check(current, baseline, settings, level=0.05))
    assert raw is not None and raw["series"] == RAW and raw["outcome"] == REGRESSION
    assert raw["reason"] == "the reference workload was not traced"
    # fewer runs with the reference than the adjusted test needs: normalized, ln(item) - ln(reference)
    short = Baseline(baseline.path, baseline.item, baseline.fingerprint, "fp", baseline.history[:2])
    current.reference = _reference(current, 0.5 * 1.04, 9)
    series = device_series(current, short)
    assert series is not None and series.kind == NORMALIZED
    assert series.current == pytest.approx(np.array(current.device.log_means) - current.reference.device.log_means)


def test_device_time_series_honours_the_wall_time_guards(tmp_path, result_factory):
    """Device time's series comes from the builder wall time's does (:func:`build_series`), so its two guards
    apply: a reference that drifted within the measured phase, and an item much longer than the reference,
    give raw figures with the reason (before, the device-time copy normalized by them regardless)."""
    short = _baseline(tmp_path, result_factory, LEVELS[:2], with_reference=True)
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818, seed=9)
    current.reference = _reference(current, 0.5, 9)
    assert device_series(current, short).kind == NORMALIZED  # the control: a valid reference normalizes
    # the reference's device time drifted 12% from the first to the second half of the measured phase
    drifted = _series(0.5, seed=109)
    blocks = tuple(replace(b, kernel_ms=b.kernel_ms * (1.12 if i >= len(drifted.blocks) // 2 else 1.0))
                   for i, b in enumerate(drifted.blocks))
    reference = _reference(current, 0.5, 9)
    current.reference = ReferenceSeries(**{**vars(reference), "device": replace(drifted, blocks=blocks)})
    series = device_series(current, short)
    assert series.kind == RAW and series.reason.startswith("the reference drifted +")
    assert series.reason == reference_unstable(current.reference.device, [r["reference"]["device_time"]
                                                                           for r in short.history])
    # the reference's kernels last 0.05 ms per run against the item's 0.818 ms: more than 3x apart
    tiny = _baseline(tmp_path, result_factory, LEVELS[:2])
    for run, seed in zip(tiny.history, range(2), strict=True):
        run["reference"] = run_record(_with_reference(result_factory, 0.05 * LEVELS[seed] / 0.818, seed))["reference"]
    current.reference = _reference(current, 0.05, 9)
    series = device_series(current, tiny)
    assert series.kind == RAW and "kernel time per run (0.818 ms) and the reference's (0.05 ms)" in series.reason
    assert series.reference is not None  # the drift is still computed and reported
    dev = _json(device_check(current, tiny, GateSettings(), level=0.05))
    assert dev is not None and dev["series"] == RAW and dev["reason"] == series.reason


def _with_reference(result_factory, ms: float, seed: int):
    result = result_factory([2.0] * 10, seed=seed)
    result.device = _series(LEVELS[seed], seed=seed)
    result.reference = _reference(result, ms, seed)
    return result


def test_a_device_time_regression_fails_the_item_and_leads_the_message(tmp_path, result_factory):
    baseline = _baseline(tmp_path, result_factory, LEVELS)
    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                           ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    baseline.fingerprint = fp.fields
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818 * 1.064, seed=9, extra=8)
    v = judge_history(current, baseline, fp, GateSettings(), level=0.05, label="resnet50[cuda]")
    assert v.outcome == REGRESSION and v.fails and v.device_time is not None
    assert v.to_dict()["device_time"]["wall_outcome"] != REGRESSION and v.wall_outcome != REGRESSION
    assert v.message.startswith("REGRESSION resnet50[cuda]: device time +6.4% raw (lower bound +"), v.message
    assert "(kernel time per run 0.818 -> 0.870 ms; kernels per run 219 -> 227; added conv3x3 x8)" in v.message
    assert "; wall time " in v.message and "mean 2.00 ms vs 2.00 ms (+0.0%) over 5 baseline runs" in v.message
    # the bundle keeps it; a verdict without device time writes no key (files as before)
    assert Verdict.from_dict(v.to_dict()).device_time == v.device_time
    plain = judge_history(result_factory([2.0] * 10, seed=9), baseline, fp, GateSettings(), 0.05, "m[cpu]")
    assert "device_time" not in plain.to_dict() and "device time" not in plain.message


def test_a_kernel_count_change_alone_is_named_but_does_not_fail(tmp_path, result_factory):
    baseline = _baseline(tmp_path, result_factory, LEVELS)
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818, seed=9, extra=4)
    dev = _json(device_check(current, baseline, GateSettings(), level=0.05))
    assert dev is not None and dev["outcome"] == "no-regression" and dev["kernels_added"] == [["conv3x3", 4.0]]
    assert kernel_changes({"a": 2, "b": 1}, {"a": 1, "c": 3}) == ([("c", 3.0)], [("a", 1.0), ("b", 1.0)])


def test_an_old_baseline_without_device_time_loads_and_gates_on_wall_time(tmp_path, result_factory):
    history = [run_record(result_factory([2.0] * 10, seed=s)) for s in range(5)]
    old = {"schema_version": 1, "item": "t::x", "fingerprint": {"provider": "cpu"}, "fingerprint_id": "fp",
           "history": history, "latest_latencies_ms": []}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    baseline = load_baseline(path)
    assert baseline is not None and baseline.runs == 5
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818, seed=9)
    assert device_check(current, baseline, GateSettings(), 0.05) is None
    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                           ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    baseline.fingerprint = fp.fields
    v = judge_history(current, baseline, fp, GateSettings(), 0.05, "m[cpu]")
    assert v.ratio is not None and v.device_time is None
    assert "the baseline has no device time yet, gated on wall time" in explained(v)
    # a damaged device-time record is refused naming the file and the key, never a traceback
    bad = copy.deepcopy(old)
    bad["history"][0]["device_time"] = {"log_means": ["x"]}
    path.write_text(json.dumps(bad))
    with pytest.raises(Exception, match=r"history\[0\]\.device_time\.log_means\[0\]"):
        load_baseline(path)


def test_the_overhead_script_reads_a_bundle(tmp_path):
    items = tmp_path / "items"
    items.mkdir()
    dev = {"traced_s": 0.4, "measure_s": 4.0, "kernel_ms": 0.8, "kernels": 219}
    record = {"label": "resnet50[cuda]", "result": {"device_time": dev, "reference": {"device_time": {
        "traced_s": 0.1, "measure_s": 0.0}}, "confirmation": {"device_time": {**dev, "traced_s": 0.3}}}}
    (items / "a.json").write_text(json.dumps(record))
    (items / "b.json").write_text(json.dumps({"label": "cpu-only[cpu]", "result": {}}))
    side = {"label": "k4[cuda]", "verdict": {"side_by_side": {"duration_s": 30.0, "device_time": {"traced_s": 6.0}}}}
    (items / "c.json").write_text(json.dumps(side))
    budgeted = {"label": "densenet121[cuda]", "result": {"device_time": {**dev, "traced_s": 0.9, "measure_s": 9.0,
                                                                         "skipped": 16}}}
    (items / "d.json").write_text(json.dumps(budgeted))
    script = Path(__file__).parent.parent / "studies" / "device_time_overhead.py"
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    # (0.4 item + 0.1 reference + 0.3 confirmation) s traced of 4.0 + 4.0 s measuring
    assert "resnet50[cuda]: traced 0.80 s of 8.00 s measuring = 10.0%" in out.stdout
    assert "cpu-only[cpu]: not traced" in out.stdout
    assert "k4[cuda]: traced 6.00 s of 30.00 s measuring = 20.0%  OVER the 15% target" in out.stdout
    assert "densenet121[cuda]: traced 0.90 s of 9.00 s measuring = 10.0% (16 rounds untraced by the budget)" \
        in out.stdout
    assert "largest share 20.0%; 1 of 3 traced items over 15%" in out.stdout


# ----------------------------------------------------------------- reports

def _device_record(tmp_path: Path, result_factory):
    from pytest_aaco.records.item import ItemRecord

    baseline = _baseline(tmp_path, result_factory, LEVELS)
    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                           ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    baseline.fingerprint = fp.fields
    current = result_factory([2.0] * 10, seed=9)
    current.device = _series(0.818 * 1.064, seed=9, extra=8)
    v = judge_history(current, baseline, fp, GateSettings(), level=0.05, label="resnet50[cuda]")
    plain = judge_history(result_factory([2.0] * 10, seed=9), baseline, fp, GateSettings(), 0.05, "m[cpu]")
    return (ItemRecord("t::a", "resnet50", "cuda", "resnet50[cuda]", result=current.to_dict(), verdict=v),
            ItemRecord("t::b", "m", "cpu", "m[cpu]", result={}, verdict=plain))


def test_reports_show_device_time_beside_wall_time(tmp_path, result_factory):
    from pytest_aaco.reports import html, junit, terminal

    traced, plain = _device_record(tmp_path, result_factory)
    header, _, first, second = terminal.format_table([traced, plain])
    assert "device time" in header and header.index("device time") > header.index("change vs baseline")
    assert "+6.4% raw [" in first and "regression" in first
    assert "device" not in terminal.format_table([plain])[0]  # sessions without device time keep their table
    props = dict(junit.properties(traced))
    assert props["aaco_device_time_outcome"] == "regression"
    assert float(props["aaco_device_time_change_pct"]) == pytest.approx(6.4, abs=0.1)
    assert float(props["aaco_kernels_per_run"]) == 227 and "aaco_device_time_mde" in props
    assert not any(k.startswith("aaco_device") for k, _ in junit.properties(plain))
    page = html.overview_table([traced, plain])
    assert "device time (bound compared)" in page and "kernels 219 -&gt; 227" in page
    assert "device time" not in html.overview_table([plain])


def test_baseline_show_lists_device_time_per_run(tmp_path, result_factory, capsys):
    from pytest_aaco import cli
    from pytest_aaco.history.store import save_run

    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cuda",
                           ep_name="CUDAExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    path = tmp_path / "store" / fp.machine_key / "x.json"
    for seed in range(2):
        result = result_factory([2.0] * 4, seed=seed)
        result.device = _series(0.818, seed=seed)
        save_run(path, "t::x", fp, result, 10, False, {})
    assert cli.main(["baseline", "show", "--baseline-dir", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert "device ms" in out and "busy ms" in out and "kernels" in out
    assert "0.8180" in out.replace("0.8179", "0.8180") and "219.0" in out


def test_a_device_time_regression_needs_the_confirmation_look_to_find_it_too(tmp_path, result_factory):
    from finished import confirm

    baseline = _baseline(tmp_path, result_factory, LEVELS)
    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                           ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    baseline.fingerprint = fp.fields

    def look(factor: float, seed: int) -> Verdict:
        current = result_factory([2.0] * 10, seed=seed)
        current.device = _series(0.818 * factor, seed=seed)
        return judge_history(current, baseline, fp, GateSettings(), 0.05, "m[cuda]")

    confirmed = confirm(look(1.064, 9), look(1.065, 10))
    assert confirmed.fails and confirmed.confirmed and confirmed.message.startswith("REGRESSION m[cuda]: device time")
    first = look(1.064, 9)
    assert first.fails
    unconfirmed = confirm(first, look(1.0, 10))
    assert not unconfirmed.fails and unconfirmed.outcome == "inconclusive" and unconfirmed.confirmed is False
    # the reports do not show a regression
    assert unconfirmed.device_time is not None and unconfirmed.device_time.outcome == "inconclusive"
