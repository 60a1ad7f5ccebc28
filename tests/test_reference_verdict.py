"""Stored baselines with a reference workload: series choice, machine drift, regime changes and
version-only fingerprint changes, on injected samples (no ONNX Runtime)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from finished import judge_history

from pytest_aaco.history.fingerprint import Fingerprint, build_fingerprint
from pytest_aaco.history.judge import INCONCLUSIVE, MISMATCH, NO_REGRESSION, REGRESSION, GateSettings
from pytest_aaco.history.series import ADJUSTED, NORMALIZED, RAW, reference_drift
from pytest_aaco.history.store import SCHEMA_VERSION, Baseline, load_baseline, run_record, runner_priors, save_run
from pytest_aaco.jsonio import AacoFileError
from pytest_aaco.measure.results import ReferenceSeries
from pytest_aaco.verdict.run_stats import common_offset
from tests.test_output import explained

FIELDS = {"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "cpu_model": "AMD EPYC", "cpu_cores": 2, "gpu_name": None, "gpu_driver": None}
FP = Fingerprint(dict(FIELDS))
REF_ID = "mix:0123456789abcdef"
LEVEL = 0.05


def run(result_factory, item_ms: float, machine: float = 1.0, seed: int = 0, rounds: int = 10,
        ref_id: str = REF_ID, ref_trend: float = 0.0, with_reference: bool = True, ref_ms: float = 2.0,
        sensitivity: float = 1.0):
    """One run: the machine's speed factor *machine* multiplies the reference, and the item by
    ``machine ** sensitivity``, with a common per-round wobble (what normalization cancels) and
    small independent noise. *ref_trend* adds a linear drift of the reference alone across the
    rounds (ln units, end to end)."""
    rng = np.random.default_rng(seed)
    common = 0.04 * rng.standard_normal(rounds)  # machine noise shared by item and reference: 4% per round
    item_rounds = item_ms * machine**sensitivity * np.exp(sensitivity * common + 0.003 * rng.standard_normal(rounds))
    result = result_factory(list(item_rounds), iterations=20, noise=0.002, seed=seed)
    ref_log = (np.log(ref_ms * machine) + common + 0.003 * rng.standard_normal(rounds)
               + np.linspace(0, ref_trend, rounds))
    if with_reference:
        result.reference = ReferenceSeries("mix", ref_id, ref_log, result.round_log_means - ref_log,
                                           float(np.exp(ref_log).mean()), 50, 0.17)
    return result


def history(result_factory, runs: int = 5, item_ms: float = 10.0, machine: float | list[float] = 1.0,
            **kwargs) -> Baseline:
    """*runs* recorded runs; *machine* one speed factor for all, or one per run."""
    speeds = machine if isinstance(machine, list) else [machine] * runs
    records = [run_record(run(result_factory, item_ms, speeds[i], seed=100 + i, **kwargs)) for i in range(runs)]
    return Baseline(Path("/b/m.json"), "t::m", dict(FIELDS), FP.id, records, [])


def judge(current, baseline, fp=FP, **kwargs):
    return judge_history(current, baseline, fp, GateSettings(threshold=0.05), LEVEL, "m[cpu]", **kwargs)


def test_machine_slowdown_cancels_in_the_normalized_series(result_factory):
    """The GPU case of issue 11: history at one speed, gate 20% slower with nothing changed."""
    v = judge(run(result_factory, 10.0, machine=1.20, seed=7), history(result_factory))
    assert v.series == ADJUSTED
    assert v.outcome == NO_REGRESSION and not v.fails
    assert v.raw_ratio == pytest.approx(1.20, abs=0.05)
    assert v.ratio == pytest.approx(1.0, abs=0.02)
    assert v.reference_drift == pytest.approx(0.20, abs=0.05)
    drift = round(v.reference_drift * 100)
    assert f"the machine ran {drift}% slower than in the history (reference workload mix" in explained(v)
    assert "adjusted for the reference workload mix (sensitivity 1.0" in explained(v)
    assert v.to_dict()["reference_drift"] == v.reference_drift


def test_true_regression_on_a_slower_machine_is_caught(result_factory):
    v = judge(run(result_factory, 11.0, machine=1.20, seed=7), history(result_factory))
    assert v.series == ADJUSTED and v.outcome == REGRESSION and v.fails
    assert v.ratio == pytest.approx(1.10, abs=0.02)


def test_normalized_series_is_more_sensitive(result_factory):
    """The shared 4% per-round wobble cancels: the MDE is far smaller than on raw figures."""
    base = history(result_factory, with_reference=True)
    v_norm = judge(run(result_factory, 10.0, seed=7), base)
    raw_base = history(result_factory, with_reference=False)
    v_raw = judge(run(result_factory, 10.0, seed=7, with_reference=False), raw_base)
    assert v_norm.series == ADJUSTED and v_raw.series == RAW
    assert v_norm.mde < v_raw.mde / 3


def test_short_history_of_a_like_sized_item_is_normalized(result_factory):
    """Fewer than min-history runs: no slope can be fitted, so ln(item) - ln(reference) is tested
    when the two iterations last about as long."""
    v = judge(run(result_factory, 11.0, machine=1.2, seed=7, ref_ms=10.0),
              history(result_factory, runs=3, ref_ms=10.0))
    assert v.series == NORMALIZED and v.ratio == pytest.approx(1.10, abs=0.03)
    assert "normalized by the reference workload mix" in explained(v)


def test_short_history_of_an_item_unlike_the_reference_stays_raw(result_factory):
    """A 10 ms item and a 2 ms reference: dividing would assume they slow down alike."""
    v = judge(run(result_factory, 10.0, seed=7), history(result_factory, runs=3))
    assert v.series == RAW and v.reference is not None
    assert "differ more than 3x, so dividing by it would add noise until 5 runs" in explained(v)


def test_adjusted_test_fits_the_items_own_sensitivity(result_factory):
    """The CPU case of issue 11: the item moves 0.4x as much as the reference from run to run.
    Dividing by the reference (slope 1) calls an unchanged item 13% faster on a machine 25% slower
    than usual; the fitted slope predicts it, and a true +12% is still caught."""
    speeds = [0.95, 1.0, 1.1, 1.2, 1.02, 0.9]
    base = history(result_factory, runs=6, machine=speeds, sensitivity=0.4)
    same = judge(run(result_factory, 10.0, machine=1.25, seed=7, sensitivity=0.4), base)
    assert same.series == ADJUSTED and same.outcome == NO_REGRESSION
    assert same.reference.sensitivity == pytest.approx(0.4, abs=0.05)
    assert "sensitivity 0.40 over 6 runs" in explained(same)
    slow = judge(run(result_factory, 11.2, machine=1.25, seed=7, sensitivity=0.4), base)
    assert slow.outcome == REGRESSION and slow.ratio == pytest.approx(1.12, abs=0.02)
    normalized = (run(result_factory, 10.0, machine=1.25, seed=7, sensitivity=0.4).reference.normalized.mean()
                  - np.mean([r["reference"]["normalized"] for r in base.history]))
    assert np.expm1(normalized) < -0.1  # what slope 1 would have tested


def test_changed_reference_falls_back_to_raw_and_says_why(result_factory):
    v = judge(run(result_factory, 11.0, seed=7, ref_id="mix:ffffffffffffffff"), history(result_factory))
    assert v.series == RAW and v.reference is None
    assert "raw figures: the reference changed since the history (mix:0123456789abcdef -> mix:ffffffffffffffff)" \
        in explained(v)


def test_old_history_without_reference_is_judged_raw(result_factory):
    v = judge(run(result_factory, 10.0, seed=7), history(result_factory, with_reference=False))
    assert v.series == RAW and "the history has no reference workload" in explained(v)


def test_a_machine_far_slower_withholds_even_a_normalized_regression(result_factory):
    """Beyond NORMALIZED_REGIME_LIMIT (30%) the reference is not trusted to cancel the machine's change."""
    v = judge(run(result_factory, 11.0, machine=1.6, seed=7), history(result_factory))
    assert v.series == ADJUSTED and v.ratio == pytest.approx(1.10, abs=0.02)
    assert v.outcome == INCONCLUSIVE and not v.fails
    assert "regression withheld: the machine ran" in explained(v)
    assert "beyond the 30% the reference is trusted to cancel" in explained(v)


def test_regime_change_withholds_a_raw_regression(result_factory):
    """The reference drifted within the run (so it cannot normalize) and shows the machine 20%
    slower: the raw +20% may not be called a regression."""
    current = run(result_factory, 10.0, machine=1.20, seed=7, ref_trend=0.15)
    v = judge(current, history(result_factory))
    assert v.series == RAW and v.outcome == INCONCLUSIVE and not v.fails
    assert "the reference drifted" in explained(v)
    assert "regression withheld: the machine ran" in explained(v) and "slower than in the history" in explained(v)


def test_a_withheld_regression_is_not_judged_and_says_why(result_factory):
    """Before: ``inconclusive m[cpu]: latency +20.0% raw (lower bound +14% > 0, +20% >= 5%)`` with the reason
    in a note only, and the summary's first line blamed the minimum detectable effect. After: the message and
    the not-judged line name the machine's change, and --aaco-fail-blind fails the item."""
    from pytest_aaco.options import GateSettings
    from pytest_aaco.verdict.blind import not_judged_line
    from pytest_aaco.verdict.outcome import fails

    current = run(result_factory, 10.0, machine=1.20, seed=7, ref_trend=0.15)
    v = judge(current, history(result_factory))
    assert v.withheld and v.withheld.startswith("the machine ran")
    assert v.message.startswith("inconclusive m[cpu]: not judged: the machine ran"), v.message
    assert "looks like +" in v.message and "lower bound" in v.message
    line = not_judged_line([("m[cpu]", v)])
    assert line is not None and "m[cpu] (machine speed change: the machine ran" in line, line
    assert not fails(v, GateSettings()) and fails(v, GateSettings(fail_blind=True))
    assert type(v).from_dict(v.to_dict()).withheld == v.withheld


def test_a_confirmation_withheld_for_the_machine_leaves_the_item_not_judged(result_factory):
    """A first look that says regression, and a confirmation withheld because the machine ran slower: the item
    is not judged, for that reason (before: the summary's first line blamed the minimum detectable effect)."""
    from pytest_aaco.verdict.blind import not_judged_reason
    from pytest_aaco.verdict.finish import confirm

    history_ = history(result_factory)
    first = judge(run(result_factory, 13.0, seed=5), history_)
    second = judge(run(result_factory, 10.0, machine=1.20, seed=7, ref_trend=0.15), history_)
    assert second.withheld
    v = confirm(first, second)
    assert v.outcome == INCONCLUSIVE and v.confirmed is False and v.withheld == second.withheld
    assert (not_judged_reason(v) or "").startswith("machine speed change: the machine ran")


def test_a_regression_far_beyond_the_machines_change_is_still_declared(result_factory):
    """A 10x slowdown is never hidden by a machine running 20% slower (raw) or 60% slower (adjusted)."""
    raw = judge(run(result_factory, 100.0, machine=1.2, seed=7, ref_trend=0.15), history(result_factory))
    assert raw.series == RAW and raw.outcome == REGRESSION and raw.fails
    normalized = judge(run(result_factory, 100.0, machine=1.6, seed=7), history(result_factory))
    assert normalized.series == ADJUSTED and normalized.outcome == REGRESSION and normalized.fails


def test_common_offset_withholds_a_raw_regression(result_factory):
    current = run(result_factory, 12.0, seed=7, with_reference=False)
    base = history(result_factory, with_reference=False)
    assert judge(current, base).outcome == REGRESSION
    v = judge(current, base, machine_offset=0.19)
    assert v.outcome == INCONCLUSIVE and "items are 19% slower together than their histories" in explained(v)


def test_common_offset_does_not_touch_a_normalized_regression(result_factory):
    v = judge(run(result_factory, 11.0, machine=1.2, seed=7), history(result_factory), machine_offset=0.2)
    assert v.series == ADJUSTED and v.outcome == REGRESSION


def test_version_only_change_is_compared_raw_and_named(result_factory):
    upgraded = Fingerprint({**FIELDS, "ort_version": "1.32.0"})
    v = judge(run(result_factory, 12.0, seed=7), history(result_factory), fp=upgraded)
    assert v.outcome == REGRESSION and v.series == RAW and v.version_change == ["ort_version"]
    assert "compared across a version change (ort_version: '1.31.1' -> '1.32.0') on raw figures" in explained(v)
    assert "weaker than a side-by-side comparison" in explained(v)


def test_other_fingerprint_changes_are_still_not_gated(result_factory):
    other = Fingerprint({**FIELDS, "ort_version": "1.32.0", "cpu_cores": 4})
    v = judge(run(result_factory, 12.0, seed=7), history(result_factory), fp=other)
    assert v.outcome == MISMATCH and "cpu_cores" in explained(v)


def test_reference_drift_matches_scipy_welch():
    rng = np.random.default_rng(3)
    now = np.log(2.2) + 0.01 * rng.standard_normal(10)
    past = [list(np.log(2.0) + 0.01 * rng.standard_normal(10)) for _ in range(3)]
    found = reference_drift(now, past)
    expected = scipy.stats.ttest_ind(now, np.concatenate(past), equal_var=False)
    assert found.p_value == pytest.approx(expected.pvalue, rel=1e-6)
    assert found.drift == pytest.approx(np.exp(now.mean() - np.concatenate(past).mean()) - 1)
    assert found.ci_low < found.drift < found.ci_high and found.runs == 3


@pytest.mark.parametrize(("changes", "expected"), [
    ([0.18, 0.2, 0.22, 0.19], np.expm1(0.195)),
    ([0.18, -0.2, 0.22, -0.19], None),  # no agreement
    ([0.2, 0.2], None),  # too few items
    ([0.0, 0.0, 0.0], None),
    ([-0.1, -0.12, -0.09, 0.01, -0.11], np.expm1(-0.1)),  # 4 of 5 agree
])
def test_common_offset(changes, expected):
    found = common_offset(changes)
    assert (found is None) if expected is None else found == pytest.approx(expected)


# ---------------------------------------------------------------- baseline file content


def test_history_stores_raw_normalized_and_reference_series(result_factory, tmp_path):
    current = run(result_factory, 10.0, seed=7)
    save_run(tmp_path / "m.json", "t::m", FP, current)
    data = json.loads((tmp_path / "m.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 3
    stored = data["history"][0]
    assert [r["log_mean"] for r in stored["rounds"]] == pytest.approx(list(current.round_log_means))
    assert stored["reference"]["id"] == REF_ID
    assert stored["reference"]["normalized"] == pytest.approx(list(current.reference.normalized))
    assert stored["reference"]["log_means"] == pytest.approx(list(current.reference.log_means))
    loaded = load_baseline(tmp_path / "m.json")
    assert loaded.reference_ids() == [REF_ID]
    assert [ref["id"] for _, ref in loaded.reference_pairs(REF_ID)] == [REF_ID]
    assert loaded.reference_pairs("other:1") == []


def test_version_1_files_are_read(result_factory, tmp_path):
    record = run_record(run(result_factory, 10.0, seed=7, with_reference=False))
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"schema_version": 1, "item": "t::m", "fingerprint": FIELDS,
                                "fingerprint_id": FP.id, "history": [record], "latest_latencies_ms": []}))
    loaded = load_baseline(path)
    assert loaded.runs == 1 and loaded.reference_ids() == []


def test_reference_series_survive_an_archive(result_factory, tmp_path):
    """A reset archives the history with its reference series; the file stays version 3."""
    path = tmp_path / "m.json"
    save_run(path, "t::m", FP, run(result_factory, 10.0, seed=7))
    save_run(path, "t::m", FP, run(result_factory, 10.0, seed=8, with_reference=False), reset=True)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and "reference" in data["archive"][0]["history"][0]
    assert load_baseline(path).reference_ids() == []  # the current history has none


def test_malformed_reference_record_names_the_file(result_factory, tmp_path):
    record = run_record(run(result_factory, 10.0, seed=7))
    record["reference"]["normalized"] = record["reference"]["normalized"][:3]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema_version": 2, "item": "t::m", "fingerprint": FIELDS,
                                "fingerprint_id": FP.id, "history": [record], "latest_latencies_ms": []}))
    with pytest.raises(AacoFileError, match=r"bad\.json: a history run's 'reference' needs"):
        load_baseline(path)


def test_reference_identity_is_recorded_but_not_compared():
    fields = dict(model_sha256="aa", input_shapes={"x": [1]}, input_dtypes={"x": "float32"}, provider="cpu",
                  ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    with_ref = build_fingerprint(**fields, reference=REF_ID)
    other_ref = build_fingerprint(**fields, reference="mix:ffff")
    without = build_fingerprint(**fields)
    assert with_ref.fields["reference"] == REF_ID and "reference" not in without.fields
    assert with_ref.id == other_ref.id == without.id
    assert with_ref.matches(other_ref.fields) and with_ref.version_only(other_ref.fields) == []


def test_machine_offset_tracks_the_session(result_factory):
    from pytest_aaco.history.judge import MachineOffset

    offset = MachineOffset()
    base = history(result_factory, with_reference=False)
    for seed in range(3):
        assert offset.current() is None  # fewer than 3 items so far
        offset.record(judge(run(result_factory, 12.0, seed=seed, with_reference=False), base))
    assert offset.current() == pytest.approx(0.2, abs=0.03)
    offset.record(judge(run(result_factory, 12.0, seed=9), None))  # no baseline: no raw ratio, ignored
    assert len(offset.log_changes) == 3


def test_runner_priors_fit_raw_and_residual_variances(result_factory, tmp_path):
    """Three items with 5 runs each measured with the reference: both priors are fitted; a file
    with too few reference runs only counts for the raw prior, a broken file for neither."""
    speeds = [0.95, 1.0, 1.1, 1.2, 1.02]
    for item in range(3):
        for i, speed in enumerate(speeds):
            save_run(tmp_path / f"m{item}.json", f"t::m{item}", FP,
                     run(result_factory, 10.0, machine=speed, seed=10 * item + i, sensitivity=0.5))
    for i in range(3):
        save_run(tmp_path / "short.json", "t::short", FP, run(result_factory, 10.0, seed=90 + i))
    (tmp_path / "broken.json").write_text("{not json")
    priors = runner_priors(tmp_path)
    assert priors.raw is not None and priors.raw.items == 4
    assert priors.adjusted is not None and priors.adjusted.items == 3
    # the machine's speed moved the item's run means by about 5%; the fitted line leaves far less
    assert priors.adjusted.s0_sq < priors.raw.s0_sq / 10
