"""Side-by-side comparison: looks, confirmation, session pairs, memory, the message; and real ORT."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from finished import to_verdict

from pytest_aaco.sidebyside.cycles import MEMORY_SESSIONS, compare_sides, more_footprints, side_memory_growth
from pytest_aaco.sidebyside.sides import (
    BASELINE,
    CANDIDATE,
    MAX_PROCESS_PAIRS,
    CompareSettings,
    LocalFactory,
    OpenedSide,
)
from tests.test_output import explained


@dataclass
class NoisySide:
    """Latencies ``base_ms * factor * exp(N(0, sd))`` per iteration, seeded."""

    name: str
    base_ms: float
    sd: float
    rng: np.random.Generator

    def block(self, iterations: int) -> np.ndarray:
        lat = self.base_ms * np.exp(self.rng.normal(0, self.sd, iterations))
        return (lat * 1e6).astype(np.int64)


@dataclass
class ScriptedFactory:
    """Opens :class:`NoisySide` sides; ``factors`` gives each successive session's speed factor."""

    base_ms: float
    factors: list[float] = field(default_factory=lambda: [1.0])
    sd: float = 0.01
    footprint_mb: float = 100.0
    opened: int = 0
    closed: int = 0
    seed: int = 0

    def open(self, name: str) -> OpenedSide:
        factor = self.factors[min(self.opened, len(self.factors) - 1)]
        self.opened += 1
        rng = np.random.default_rng(self.seed + self.opened)
        side = NoisySide(name, self.base_ms * factor, self.sd, rng)

        def close() -> None:
            self.closed += 1

        return OpenedSide(side, self.base_ms * factor, self.footprint_mb, 5.0, 2.0, {"ort_version": "x"}, close)


FAST = CompareSettings(block_s=0.0, discard=1)  # 3 iterations per block: scripted sides cost nothing


def test_equal_sides_pass_at_the_first_look() -> None:
    a, b = ScriptedFactory(2.0), ScriptedFactory(2.0, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.05, baseline_label="origin/main")
    assert result.outcome == "no-regression" and result.measurement.cycles == 10 and result.confirmed is None
    assert a.opened == b.opened == 1 and a.closed == b.closed == 1
    assert result.memory == []
    data = result.to_dict()
    assert data["cycles"] == 10 and len(data["ratios"][0]) == 10 and data["looks"][0]["outcome"] == "no-regression"
    assert data["companion"]["method"].startswith("wilcoxon")
    verdict = to_verdict(result, "m[cpu]")
    assert verdict.outcome == "no-regression" and not verdict.fails and verdict.method == "side-by-side"
    assert verdict.message.startswith("no regression m[cpu]: ") and "vs origin/main" in verdict.message


def test_a_slowdown_is_confirmed_on_fresh_sessions_and_named_plainly() -> None:
    a, b = ScriptedFactory(2.0), ScriptedFactory(2.0, factors=[1.2], seed=100)
    result = compare_sides(a, b, FAST, alpha=0.01, baseline_label="origin/main")
    assert result.outcome == "regression" and result.confirmed is True
    assert a.opened == b.opened == 2  # the confirmation opened fresh sessions
    message = to_verdict(result, "resnet50[cpu]").message
    assert re.match(r"REGRESSION resnet50\[cpu\]: latency \+20\.\d% paired vs origin/main \(lower bound"
                    r" \+\d+\.\d% > 0, \+20\.\d% >= 5%\); geometric mean [\d.]+ ms vs [\d.]+ ms \(\+[\d.]+%\);"
                    r" measured side by side over 10 cycles, p=\S+ at level \S+; confirmed", message), message
    assert to_verdict(result, "resnet50[cpu]").fails


def test_an_unconfirmed_slowdown_is_inconclusive() -> None:
    a, b = ScriptedFactory(2.0), ScriptedFactory(2.0, factors=[1.2, 1.0], seed=100)
    result = compare_sides(a, b, FAST, alpha=0.01, baseline_label="HEAD~1")
    assert result.outcome == "inconclusive" and result.confirmed is False
    assert "fresh sessions did not confirm it" in to_verdict(result, "m[cpu]").message
    assert not to_verdict(result, "m[cpu]").fails


def test_inconclusive_adds_cycles_up_to_the_last_look_and_reports_the_mde() -> None:
    # a 5% slowdown under 15% per-iteration noise: more cycles, never a pass or fail
    a, b = ScriptedFactory(2.0, sd=0.4), ScriptedFactory(2.0, factors=[1.05], sd=0.4, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.001, baseline_label="HEAD~1")
    assert result.outcome == "inconclusive"
    assert [look.cycles for look in result.measurement.looks] == [10, 20, 30, 40]
    levels = [look.level for look in result.measurement.looks]
    assert levels == sorted(levels, reverse=True)  # Pocock: the first look gets the most of alpha
    assert "minimum detectable effect" in explained(to_verdict(result, "m[cpu]")) and result.mde() > 0.05


def test_the_budget_stops_adding_cycles() -> None:
    ticks = itertools.count(0, 5.0)  # every clock reading is 5 s later
    a, b = ScriptedFactory(2.0, sd=0.4), ScriptedFactory(2.0, factors=[1.05], sd=0.4, seed=100)
    settings = CompareSettings(block_s=0.0, discard=1, budget_s=8.0)
    result = compare_sides(a, b, settings, alpha=0.001, baseline_label="HEAD~1", clock=lambda: next(ticks))
    assert len(result.measurement.looks) == 1 and result.outcome == "inconclusive"


def test_device_sides_use_session_pairs_as_a_level() -> None:
    # each fresh candidate session lands on its own algorithm: -3% and +3% (mean 0)
    a = ScriptedFactory(2.0)
    b = ScriptedFactory(2.0, factors=[0.97, 1.03] * 3, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.05, baseline_label="HEAD~1", device=True)
    # two pairs at the first look, then one fresh pair per look: the between-pair spread needs pairs
    assert [len(c) for c in result.measurement.cycles_by_pair] == [5, 5, 10, 10, 10]
    assert a.opened == b.opened == 5
    assert result.comparison.method == "paired-t, session level"
    assert result.outcome == "inconclusive"
    # the pooled cycles would claim a tight interval; the session level keeps it honest (wide)
    lo, hi = result.ci()
    assert hi - lo > 0.05
    assert "over 40 cycles on 5 fresh session pairs" in explained(to_verdict(result, "m[cuda]"))


@dataclass
class ProcessFactory(ScriptedFactory):
    """A :class:`ScriptedFactory` whose every session is a fresh process (as a worker's): ``factors`` are
    the processes' own speed offsets."""

    fresh_processes: ClassVar[bool] = True


def _process_aa(processes: int, offset_sd: float, slowdown: float = 1.0, runs: int = 40) -> Counter[str]:
    """Outcome words of *runs* comparisons whose every process runs ``exp(N(0, offset_sd))`` slower or
    faster for its whole life (memory layout, CPU placement), the candidate *slowdown* times slower."""
    words: Counter[str] = Counter()
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        # up to 20 process pairs at the looks, and as many at a confirmation
        a = ProcessFactory(2.0, factors=list(np.exp(rng.normal(0, offset_sd, 40))), sd=0.03, seed=1000 + seed)
        b = ProcessFactory(2.0, factors=list(slowdown * np.exp(rng.normal(0, offset_sd, 40))), sd=0.03,
                           seed=2000 + seed)
        result = compare_sides(a, b, replace(FAST, processes=processes, seed=seed), alpha=0.05, baseline_label="x")
        words[result.outcome] += 1
    return words


def test_worker_sides_run_on_several_process_pairs_tested_with_the_process_as_a_level() -> None:
    a, b = ProcessFactory(2.0), ProcessFactory(2.0, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.05, baseline_label="python3.11")
    assert FAST.processes == 3  # --aaco-compare-processes' default
    assert [len(c) for c in result.measurement.cycles_by_pair] == [4, 3, 3]  # the first look's 10 cycles
    assert a.opened == b.opened == 3 and a.closed == b.closed == 3
    assert result.comparison.method == "paired-t, session level" and result.outcome == "no-regression"
    one = compare_sides(ProcessFactory(2.0), ProcessFactory(2.0, seed=100), replace(FAST, processes=1), alpha=0.05,
                        baseline_label="python3.11")
    assert len(one.measurement.cycles_by_pair) == 1 and one.comparison.method == "paired-t"
    # sides in this process are not process pairs: one session pair on CPU EPs, as before
    local = compare_sides(ScriptedFactory(2.0), ScriptedFactory(2.0, seed=100), FAST, alpha=0.05,
                          baseline_label="HEAD~1")
    assert len(local.measurement.cycles_by_pair) == 1
    assert CompareSettings().pairs_for(False, workers=True) == 3 and CompareSettings().pairs_for(True, True) == 3
    assert CompareSettings(processes=1).pairs_for(True, workers=True) == 2  # device EPs keep their 2 session pairs
    assert CompareSettings(session_pairs=5).pairs_for(False, workers=True) == 5


def test_later_looks_add_process_pairs_up_to_twenty() -> None:
    # processes 15% apart: inconclusive at every look, so every look is taken
    a = ProcessFactory(2.0, factors=[0.85, 1.15] * 20)
    b = ProcessFactory(2.0, factors=[1.15, 0.85, 1.0] * 14, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.05, baseline_label="python3.11")
    assert result.outcome == "inconclusive"
    looks = [look.cycles for look in result.measurement.looks]
    assert looks == [10, 20, 30, 40, 50, 60, 70]
    sizes = [len(c) for c in result.measurement.cycles_by_pair]
    # 3 pairs at the first look, 3 more at each later look, the last capped at 20 pairs (2 more)
    assert sizes == [4, 3, 3] * 6 + [5, 5] and a.opened == b.opened == 20 == MAX_PROCESS_PAIRS
    assert result.comparison.method == "paired-t, session level"
    # sides in this process keep one more pair a look, up to 40 cycles
    assert CompareSettings().max_cycles_for(2, workers=False) == 40
    assert CompareSettings(processes=5).max_cycles_for(5, workers=True) == 10 + 10 * 3


def test_a_per_process_offset_widens_the_interval_instead_of_becoming_a_verdict() -> None:
    # every process 8% faster or slower (sd) for its whole life, 3% noise per iteration: on one pair of
    # processes the A/A reads that offset as a change; on three, the between-process term widens the interval
    one, three = _process_aa(1, 0.08), _process_aa(3, 0.08)
    assert one["regression"] + one["improvement"] >= 12, one
    assert three["regression"] == 0 and three["improvement"] <= 3, three
    # offsets of about 1.3% (the quiet 2-core VM's, studies/sbs_overhead.py): the A/A says no regression
    # and a +10% slowdown is caught in every run
    quiet = _process_aa(3, 0.013)
    assert quiet["no-regression"] >= 38 and not quiet["regression"] and not quiet["improvement"], quiet
    assert _process_aa(3, 0.013, slowdown=1.10)["regression"] == 40


def test_memory_is_judged_on_each_sides_own_footprint() -> None:
    a, b = ScriptedFactory(2.0, footprint_mb=100.0), ScriptedFactory(2.0, footprint_mb=400.0, seed=100)
    result = compare_sides(a, b, FAST, alpha=0.05, baseline_label="HEAD~1")
    assert result.outcome == "no-regression" and result.memory
    assert "own footprint 400 MB (the smallest of 5 fresh sessions) vs 100 MB (the largest of 5)" in result.memory[0]
    assert a.opened == b.opened == MEMORY_SESSIONS  # the suspicion opened 4 more pairs before it was reported
    assert to_verdict(result, "m[cpu]").fails
    same = compare_sides(ScriptedFactory(2.0, footprint_mb=100.0), ScriptedFactory(2.0, footprint_mb=130.0, seed=9),
                         FAST, alpha=0.05, baseline_label="HEAD~1")
    assert same.memory == []  # +30 MB is within the slack


def test_wilcoxon_can_decide() -> None:
    a, b = ScriptedFactory(2.0), ScriptedFactory(2.0, factors=[1.2], seed=100)
    result = compare_sides(a, b, CompareSettings(block_s=0.0, discard=1, method="wilcoxon", confirm=False),
                           alpha=0.01, baseline_label="HEAD~1")
    assert result.outcome == "regression" and result.to_dict()["test"].startswith("wilcoxon")
    assert result.to_dict()["companion"]["method"] == "paired-t"
    with pytest.raises(ValueError, match="method"):
        compare_sides(a, b, CompareSettings(method="sign"), alpha=0.01, baseline_label="HEAD~1")


def _model_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    import onnx

    from pytest_aaco.measure.modelgen import add_extra_work
    from tests.conftest import squeezenet_file

    original = squeezenet_file()
    model = onnx.load(str(original))
    cosmetic = tmp_path / "cosmetic.onnx"
    model.doc_string = "same compute, different bytes"
    onnx.save(model, str(cosmetic))
    slowed = tmp_path / "slowed.onnx"
    onnx.save(add_extra_work(onnx.load(str(original)), matmuls=24, size=256), str(slowed))
    return original, cosmetic, slowed


@pytest.mark.slow
def test_real_onnxruntime_sides(tmp_path: Path) -> None:
    from pytest_aaco.measure.providers import parse_provider
    from pytest_aaco.measure.registry import load_registry

    original, cosmetic, slowed = _model_files(tmp_path)
    spec = next(s for s in load_registry() if s.name == "squeezenet")
    cpu = parse_provider("cpu")
    settings = CompareSettings(block_s=0.05, threshold=0.50)  # wide: the A/A must never flip on a loaded machine

    def factory(path: Path) -> LocalFactory:
        return LocalFactory(path, spec, cpu, warmup=3, intra_op_threads=1)

    same = compare_sides(factory(original), factory(cosmetic), settings, alpha=0.05, baseline_label="HEAD~1")
    assert same.outcome in ("no-regression", "inconclusive") and same.memory == []
    slow = compare_sides(factory(original), factory(slowed), settings, alpha=0.05, baseline_label="HEAD~1")
    assert slow.outcome == "regression", to_verdict(slow, "squeezenet[cpu]").message
    assert slow.comparison.ratio > 1.3
    data = slow.to_dict()
    assert data["sides"][BASELINE]["ort_version"] and data["sides"][CANDIDATE]["memory_source"] == "rss"
    assert data["spin_bleed"]["blocks_after_other"] > 0


def test_the_candidates_blocks_become_its_result() -> None:
    from pytest_aaco.sidebyside.cycles import candidate_result

    result = compare_sides(ScriptedFactory(2.0), ScriptedFactory(2.5, seed=100), FAST, alpha=0.05,
                           baseline_label="HEAD~1")
    bench = candidate_result(result, "m", "cpu")
    assert len(bench.rounds) == result.measurement.cycles and bench.measure_iterations == 3 * len(bench.rounds)
    assert bench.mean_ms == pytest.approx(2.5, rel=0.05) and bench.session_create_ms == 5.0


def test_memory_tolerates_the_spread_of_one_sides_sessions() -> None:
    # recorded on the H100 (docs/gpu.md): an extra 128 MB arena chunk in some sessions of either side
    recorded = {BASELINE: [404.0, 416.0, 278.0, 274.0], CANDIDATE: [278.0, 280.0, 404.0, 404.0, 410.0]}
    settings = CompareSettings()
    assert side_memory_growth(recorded, settings) == []  # medians 341 vs 404 MB, sessions spread 142 MB
    chunked = {BASELINE: [384.0, 258.0, 254.0], CANDIDATE: [384.0, 386.0, 384.0]}
    assert side_memory_growth(chunked, settings) == []
    # an A/A run on the H100 whose baseline sessions all drew the low mode and candidate ones the high
    assert side_memory_growth({BASELINE: [284.0, 284.0, 390.0], CANDIDATE: [404.0, 404.0, 410.0]}, settings) == []
    # a model that needs 200 MB more needs it in every session
    grown = {BASELINE: recorded[BASELINE], CANDIDATE: [m + 200.0 for m in recorded[CANDIDATE]]}
    found = side_memory_growth(grown, settings)
    assert found and "own footprint 478 MB (the smallest of 5 fresh sessions) vs 416 MB (the largest of 4)" in found[0]


def test_a_suspected_memory_growth_opens_more_sessions_before_it_is_reported() -> None:
    # each fresh session draws the allocator's low (275 MB) or high (405 MB) mode at random
    class Modal(ScriptedFactory):
        def __init__(self, modes: list[float], **kw: object) -> None:
            super().__init__(2.0, **kw)
            self.modes = modes

        def open(self, name: str) -> OpenedSide:
            side = super().open(name)
            return replace(side, footprint_mb=self.modes[(self.opened - 1) % len(self.modes)])

    # the first measurement's sessions: baseline low, candidate high; later sessions mix
    base, cand = Modal([275.0, 405.0]), Modal([405.0, 275.0])
    footprints = {BASELINE: [275.0], CANDIDATE: [405.0]}
    assert side_memory_growth(footprints, CompareSettings())
    merged = more_footprints(base, cand, footprints)
    assert len(merged[BASELINE]) == len(merged[CANDIDATE]) == MEMORY_SESSIONS
    assert side_memory_growth(merged, CompareSettings()) == []
    # a real growth stays: every candidate session above every baseline one
    grown = more_footprints(Modal([275.0, 280.0]), Modal([405.0, 410.0]), {BASELINE: [], CANDIDATE: []})
    assert side_memory_growth(grown, CompareSettings())
