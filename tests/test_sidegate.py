"""The side-by-side gate of one item, in a temporary git repository with real ONNX Runtime."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import onnx
import pytest
from finished import finish

from pytest_aaco.measure.modelgen import add_extra_work
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.measure.registry import ModelSpec, load_registry
from pytest_aaco.options import GateSettings
from pytest_aaco.sidebyside.gate import ItemMeasure, SideBySideGate, reused_samples
from pytest_aaco.sidebyside.revision import CHANGED, NEW, UNCHANGED, GitRefError
from pytest_aaco.sidebyside.sides import CompareSettings
from tests.conftest import squeezenet_file

CPU = parse_provider("cpu")
FAST = CompareSettings(block_s=0.03, threshold=0.50)  # wide: an A/A under xdist on a loaded 2-core machine
ITEM = ItemMeasure(warmup=3, intra_op_threads=1)
GATE = GateSettings(threshold=0.50)


@pytest.fixture
def repo(model_repo: Path) -> Path:
    return model_repo


def spec(repo: Path) -> ModelSpec:
    return load_registry(repo / "models.yaml")[0]


def provider_for(model: ModelSpec) -> object:
    return CPU.with_options(model.options_for("cpu"))


def test_unchanged_is_not_measured(repo: Path) -> None:
    gate = SideBySideGate("HEAD", None, FAST, repo)
    try:
        side = gate.baseline_for_item(spec(repo), "cpu")
        assert side.status == UNCHANGED
        verdict = finish(gate.static_verdict(side, "net[cpu]", 0.05, 2.0), GATE)
        assert verdict.outcome == "unchanged" and not verdict.fails
        assert verdict.message == ("net[cpu]: unchanged at HEAD; its side at REF is not measured (this side is"
                                   " measured once, as without a comparison)")
    finally:
        gate.close()


def test_cosmetic_change_passes_and_slowdown_fails(repo: Path, git: Any) -> None:
    model = onnx.load(str(repo / "models" / "net.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(repo / "models" / "net.onnx"))
    git(repo, "commit", "-qam", "cosmetic")
    gate = SideBySideGate("HEAD~1", None, FAST, repo)
    try:
        side = gate.baseline_for_item(spec(repo), "cpu")
        assert side.status == CHANGED
        bench, verdict, result = gate.measure(spec(repo), side, provider_for, ITEM, GATE, 0.05, "net[cpu]")
        verdict = finish(verdict, GATE)  # the side-by-side look, finished as the item pipeline finishes it
        assert verdict.outcome in ("no-regression", "inconclusive") and not verdict.fails, verdict.message
        assert len(bench.rounds) == result.measurement.cycles and bench.mean_ms > 0
    finally:
        gate.close()
    onnx.save(add_extra_work(onnx.load(str(squeezenet_file())), matmuls=12, size=256),
              str(repo / "models" / "net.onnx"))
    git(repo, "commit", "-qam", "slower")
    gate = SideBySideGate("HEAD~1", None, FAST, repo)
    try:
        side = gate.baseline_for_item(spec(repo), "cpu")
        bench, verdict, result = gate.measure(spec(repo), side, provider_for, ITEM, GATE, 0.05, "net[cpu]")
        verdict = finish(verdict, GATE)
        assert verdict.outcome == "regression" and verdict.fails, verdict.message
        assert verdict.message.startswith("REGRESSION net[cpu]: latency +") and "paired vs HEAD~1" in verdict.message
        assert "changed since the baseline side: model bytes" in verdict.notes
    finally:
        gate.close()


def test_the_cold_start_reuses_the_fresh_sessions_of_the_side_by_side_measurement(repo: Path, git: Any,
                                                                                  monkeypatch: Any) -> None:
    """Issue 19: on the GPU every fresh session costs its creation and cuDNN's algorithm search, so the
    cold-start pass takes the side-by-side measurement's fresh sessions as its first cycles."""
    import pytest_aaco.measure.inference as inference
    import pytest_aaco.passes.coldstart as coldstart
    import pytest_aaco.sidebyside.sides as sides

    model = onnx.load(str(repo / "models" / "net.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(repo / "models" / "net.onnx"))
    git(repo, "commit", "-qam", "cosmetic")
    built: list[str] = []

    def counted(path: Any, *args: Any, **kwargs: Any) -> Any:
        built.append(Path(path).name)
        return inference.build_session(path, *args, **kwargs)

    monkeypatch.setattr(sides, "build_session", counted)
    monkeypatch.setattr(coldstart, "build_session", counted)
    gate = SideBySideGate("HEAD~1", None, FAST, repo)
    try:
        side = gate.baseline_for_item(spec(repo), "cpu")
        _, _, result = gate.measure(spec(repo), side, provider_for, ITEM, GATE, 0.05, "net[cpu]")
        took = reused_samples(result)
        pairs = len(result.measurement.sides_info["candidate"]["create_ms"]) + (
            len(result.first.sides_info["candidate"]["create_ms"]) if result.first else 0)
        assert len(took[0]) == len(took[1]) == pairs >= 1
        built.clear()
        found = gate.cold_start(spec(repo), side, provider_for, ITEM, None, 5, "net[cpu]", 10.0, reused=took)
        assert len(built) == 2 * (5 - pairs)  # was 2 * (1 discarded + 5)
        assert found.candidate.reused_sessions == found.baseline.reused_sessions == pairs
        info = result.measurement.sides_info
        assert found.candidate.session_create_ms[:pairs][-len(info["candidate"]["create_ms"]):] == \
            info["candidate"]["create_ms"]
        assert found.baseline.first_run_ms[:pairs][-len(info["baseline"]["first_run_ms"]):] == \
            info["baseline"]["first_run_ms"]
        assert not found.verdict.fails, found.verdict.message
        built.clear()
        gate.cold_start(spec(repo), side, provider_for, ITEM, None, 5, "net[cpu]", 10.0)
        assert len(built) == 2 * 6  # without the side-by-side sessions: 1 discarded + 5 per side
    finally:
        gate.close()


def test_new_item_and_bad_ref(repo: Path, git: Any) -> None:
    shutil.copy(squeezenet_file(), repo / "models" / "other.onnx")
    (repo / "models.yaml").write_text("models:\n  net:\n    path: models/net.onnx\n"
                                      "  other:\n    path: models/other.onnx\n")  # net first: spec() is net
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "new model")
    gate = SideBySideGate("HEAD~1", None, FAST, repo)
    try:
        other = load_registry(repo / "models.yaml")[1]
        side = gate.baseline_for_item(other, "cpu")
        assert side.status == NEW
        assert gate.static_verdict(side, "other[cpu]", 0.05, None).outcome == "new"
    finally:
        gate.close()
    with pytest.raises(GitRefError, match="--aaco-compare=nope"):
        SideBySideGate("nope", None, FAST, repo)


def test_python_only_always_measures_the_same_item(repo: Path) -> None:
    gate = SideBySideGate(None, "/usr/bin/python3", FAST, repo)
    side = gate.baseline_for_item(spec(repo), "cpu")
    assert side.status == CHANGED and side.changes == ["environment"] and gate.name == "/usr/bin/python3"
    gate.close()


class _Stop(Exception):
    pass


@pytest.mark.parametrize("traced", [True, False])
def test_fresh_sessions_skip_the_warmup_extension_only_when_device_time_is_traced(repo: Path, git: Any,
                                                                                  monkeypatch: Any,
                                                                                  traced: bool) -> None:
    """With both sides traced, device time decides and each fresh session warms up for the item's
    warmup iterations only (the 0.25 s extension cost each fresh inception_v1 session about 0.23 s on
    the H100, and a changed item opens 8); without a tracer, wall time decides and the extension stays."""
    import pytest_aaco.sidebyside.gate as gate_module
    from pytest_aaco.measure.inference import MIN_WARMUP_S

    model = onnx.load(str(repo / "models" / "net.onnx"))
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(repo / "models" / "net.onnx"))
    git(repo, "commit", "-qam", "cosmetic")
    seen: dict[str, float] = {}

    def fake_compare(baseline: Any, candidate: Any, *args: Any, **kwargs: Any) -> None:
        seen.update(baseline=baseline.min_warmup_s, candidate=candidate.min_warmup_s)
        raise _Stop

    monkeypatch.setattr(gate_module, "tracer_for", lambda short, mode: (object() if traced else None, None))
    monkeypatch.setattr(gate_module, "compare_sides", fake_compare)
    gate = SideBySideGate("HEAD~1", None, FAST, repo)
    try:
        with pytest.raises(_Stop):
            gate.measure(spec(repo), gate.baseline_for_item(spec(repo), "cpu"), provider_for, ITEM, GATE, 0.05,
                         "net[cpu]")
    finally:
        gate.close()
    expected = 0.0 if traced else MIN_WARMUP_S
    assert seen == {"baseline": expected, "candidate": expected}
