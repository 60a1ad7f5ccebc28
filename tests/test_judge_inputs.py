"""The item judgement decides on inputs read before it (issue 41): the fingerprint compared once
(:meth:`pytest_aaco.verdict.comparable.Fingerprint.against`) and the baseline folder's pooled variances
(:func:`pytest_aaco.history.pooled.item_pools`) are gathered by :func:`pytest_aaco.gate.gather`, and the
stored gate's verdict on them is the one it reaches reading them itself."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_aaco.history.fingerprint import build_fingerprint
from pytest_aaco.history.judge import StoredGate, judge_history
from pytest_aaco.history.pooled import item_pools
from pytest_aaco.history.store import Baseline, run_record
from pytest_aaco.options import GateSettings
from pytest_aaco.verdict import pooling
from pytest_aaco.verdict.comparable import Fingerprint


def _fp(**changed: object) -> Fingerprint:
    fp = build_fingerprint(model_sha256="a", input_shapes={"x": [1, 3]}, input_dtypes={"x": "float32"},
                           provider="cpu", ep_name="CPUExecutionProvider", provider_options={}, iobinding="none",
                           intra_op_threads=1)
    return Fingerprint({**fp.fields, **changed})


def test_a_fingerprint_compared_once_says_what_its_methods_say() -> None:
    stored = _fp()
    for current, gates in ((_fp(), True), (_fp(ort_version="9.9.9"), True), (_fp(model_sha256="b"), True),
                           (_fp(provider="cuda"), False), (_fp(provider="cuda", ort_version="9.9.9"), False)):
        match = current.against(stored.fields)
        assert match.id == current.id
        assert match.diff == current.diff(stored.fields)
        assert match.versions == current.version_only(stored.fields)
        assert match.subject_changes == current.subject_changes(stored.fields)
        assert match.described == (current.describe_diff(stored.fields) if match.diff else "")
        assert match.gates is gates, current.fields
    assert _fp(model_sha256="b").against(stored.fields).subject_changes == ["model_sha256"]  # gated, changed


def _folder(tmp_path: Path, result_factory) -> tuple[Baseline, list[Path]]:  # type: ignore[no-untyped-def]
    """Three items' baselines of two runs each in one runner folder (the pooled variance applies); the
    first item's baseline and the files of the other two."""
    fp, baselines, others = _fp(), [], []
    for item in range(3):
        history = [run_record(result_factory([2.0 * (1 + 0.01 * run + 0.002 * item)] * 6, seed=10 * item + run))
                   for run in range(2)]
        path = tmp_path / f"item{item}.json"
        baseline = Baseline(path, f"t::{item}", fp.fields, fp.id, history)
        path.write_text(json.dumps(baseline.to_dict()), encoding="utf-8")
        baselines.append(baseline)
        others.append(path)
    return baselines[0], others[1:]


def test_the_stored_gate_decides_on_the_pools_read_before_it_judges(tmp_path, result_factory) -> None:  # type: ignore[no-untyped-def]
    """With the folder's pools gathered first, the verdict is the pooled one that reading the folder
    gives, and it stays so when the folder's other files are gone by the time the gate judges; a gate
    that reads the folder itself then has no pool (the control: the pools were read before)."""
    baseline, others = _folder(tmp_path, result_factory)
    fp, settings = _fp(), GateSettings()
    current = result_factory([2.01] * 6, seed=99)
    read_now = judge_history(current, baseline, fp, settings, 0.05, "m[cpu]")
    assert read_now.method == pooling.METHOD

    pools = item_pools(tmp_path, current)
    gate = StoredGate(baseline, fp, settings, 0.05, "m[cpu]", match=fp.against(baseline.fingerprint), pools=pools,
                      gated=True)
    for path in others:
        path.unlink()
    gathered = gate.look(current)
    assert gathered.method == pooling.METHOD
    assert (gathered.ratio, gathered.p_value, gathered.notes) == (read_now.ratio, read_now.p_value, read_now.notes)
    assert judge_history(current, baseline, fp, settings, 0.05, "m[cpu]").method != pooling.METHOD
