"""The interleaved-block loop: balanced orders, discarded iterations, paired ratios, spin bleed."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from pytest_aaco.measure.interleave import (
    LocalSide,
    balanced_orders,
    block_iterations,
    paired_log_ratios,
    run_cycles,
    spin_bleed,
)


class ScriptedSide:
    """A side whose latencies are given: ``base_ns`` per iteration, and ``first_ns`` for the first
    ``warm`` iterations of a block that follows another side's block (``last`` is shared)."""

    def __init__(self, name: str, base_ns: int, first_ns: int | None = None, warm: int = 0,
                 last: list[str] | None = None) -> None:
        self.name = name
        self.base_ns, self.first_ns, self.warm = base_ns, first_ns or base_ns, warm
        self.last = last if last is not None else []
        self.calls: list[int] = []

    def block(self, iterations: int) -> np.ndarray:
        self.calls.append(iterations)
        lat = np.full(iterations, self.base_ns, dtype=np.int64)
        if self.last and self.last[-1] != self.name:
            lat[: self.warm] = self.first_ns
        self.last.append(self.name)
        return lat


def test_two_sides_lead_equally_often() -> None:
    orders = balanced_orders(["A", "B"], 10, np.random.default_rng(1))
    assert Counter(orders) == {("A", "B"): 5, ("B", "A"): 5}
    odd = balanced_orders(["A", "B"], 7, np.random.default_rng(1))
    assert sorted(Counter(odd).values()) == [3, 4]


def test_three_sides_use_every_rotation() -> None:
    orders = balanced_orders(["a", "b", "c"], 6, np.random.default_rng(0))
    assert Counter(orders) == {("a", "b", "c"): 2, ("b", "c", "a"): 2, ("c", "a", "b"): 2}


def test_orders_are_shuffled_not_alternating() -> None:
    seen = {tuple(balanced_orders(["A", "B"], 8, np.random.default_rng(seed))) for seed in range(20)}
    assert len(seen) > 5  # a fixed AB, BA, AB ... pattern would give one


@pytest.mark.parametrize("sides, cycles", [([], 3), (["A", "A"], 3), (["A", "B"], 0)])
def test_bad_orders_are_refused(sides: list[str], cycles: int) -> None:
    with pytest.raises(ValueError):
        balanced_orders(sides, cycles, np.random.default_rng(0))


def test_block_iterations_aim_at_the_target_and_clip() -> None:
    assert block_iterations(10.0, target_s=0.2) == 20
    assert block_iterations(1000.0) == 3
    assert block_iterations(1e-5) == 2000


def test_run_cycles_discards_and_pairs() -> None:
    a = ScriptedSide("A", base_ns=2_000_000)
    b = ScriptedSide("B", base_ns=2_200_000)
    cycles = run_cycles([a, b], {"A": 4, "B": 6}, cycles=6, discard=2)
    assert len(cycles) == 6 and [c.index for c in cycles] == list(range(6))
    assert a.calls == [6] * 6 and b.calls == [8] * 6
    block = cycles[0].block("B")
    assert block.n == 6 and block.discarded_ms.shape == (2,)
    np.testing.assert_allclose(block.latencies_ms, 2.2)
    np.testing.assert_allclose(paired_log_ratios(cycles, "A", "B"), np.log(1.1))
    with pytest.raises(KeyError, match="no block of side 'C'"):
        cycles[0].block("C")


def test_run_cycles_refuses_bad_counts() -> None:
    side = ScriptedSide("A", 1)
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        run_cycles([side], {"A": 0}, cycles=1)
    with pytest.raises(ValueError, match="discard"):
        run_cycles([side], {"A": 1}, cycles=1, discard=-1)


def test_spin_bleed_separates_blocks_after_another_side() -> None:
    # the first two iterations of a block run 50% slower when the other side ran just before
    last: list[str] = []
    a = ScriptedSide("A", base_ns=1_000_000, first_ns=1_500_000, warm=2, last=last)
    b = ScriptedSide("B", base_ns=1_000_000, first_ns=1_500_000, warm=2, last=last)
    cycles = run_cycles([a, b], {"A": 5, "B": 5}, cycles=8, discard=2, rng=np.random.default_rng(3))
    bleed = spin_bleed(cycles)
    assert bleed.after_other == pytest.approx(np.log(1.5))
    assert bleed.after_same == pytest.approx(0.0)
    assert bleed.blocks_after_same > 0 and bleed.blocks_after_other + bleed.blocks_after_same == 8 * 2 - 1
    # and the discarded iterations kept the bleed out of the measured ones
    np.testing.assert_allclose(paired_log_ratios(cycles, "A", "B"), 0.0)
    assert np.isnan(spin_bleed(run_cycles([a, b], {"A": 2, "B": 2}, cycles=2)).after_other)


def test_local_side_times_real_calls() -> None:
    calls = []
    side = LocalSide("A", lambda: calls.append(1))
    lat = side.block(5)
    assert lat.dtype == np.int64 and lat.shape == (5,) and (lat > 0).all() and len(calls) == 5


def test_run_cycles_discards_per_side():
    a, b = LocalSide("A", lambda: None), LocalSide("B", lambda: None)
    cycles = run_cycles([a, b], {"A": 3, "B": 4}, cycles=2, discard={"A": 5, "B": 1})
    for cycle in cycles:
        assert cycle.block("A").discarded_ms.size == 5 and cycle.block("A").n == 3
        assert cycle.block("B").discarded_ms.size == 1 and cycle.block("B").n == 4
    with pytest.raises(ValueError, match="discard must be >= 0"):
        run_cycles([a, b], {"A": 1, "B": 1}, cycles=1, discard={"A": -1, "B": 0})


def test_the_warmup_extends_to_its_minimum_seconds_unless_that_is_zero():
    """A fast run's warmup is extended towards MIN_WARMUP_S by default (at most MAX_EXTRA_WARMUP more
    iterations); with ``min_s=0`` it is the given iterations only (side by side with device time)."""
    from pytest_aaco.measure.timedloop import MAX_EXTRA_WARMUP, warmup

    calls = []

    def run() -> None:
        calls.append(1)

    first_ms, lat = warmup(run, 5, min_s=0.0)
    assert first_ms >= 0 and lat.size == 5 and len(calls) == 6
    calls.clear()
    first_ms, lat = warmup(run, 5)
    assert lat.size == 5 + MAX_EXTRA_WARMUP and len(calls) == lat.size + 1  # a no-op run: the cap, far below 0.25 s
