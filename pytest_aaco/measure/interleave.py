"""Interleaved measurement: blocks of several sides alternating in one process, cycle by cycle.

Two sessions measured minutes apart differ by the machine's drift (2% between processes on a
quiet CPU, 8 to 16% on an H100); measured in alternating blocks of 0.1 to 0.3 s, the paired
log-ratio of the two varied 0.85% on CPU and 1.5 to 3.6% on the H100 (studies/RESULTS.md).
This module is that loop, shared by the side-by-side comparison (baseline side vs candidate)
and by the stored-baseline gate (the item vs a fixed reference workload).

* A **side** is anything that can time a block of iterations: :class:`BlockRunner`. In-process
  sides wrap a zero-argument ``run`` callable (:class:`LocalSide`); a side in another interpreter
  implements the same protocol over a pipe.
* A **cycle** runs one block of every side, in an order from :func:`balanced_orders`: with two
  sides AB and BA come equally often, in random order, so a trend within cycles cancels
  (Abedi & Brecht, ICPE 2017, "randomized multiple interleaved trials"; Bulej et al., ICPE 2020,
  duet benchmarking; Chromium Pinpoint's A/B bots).
* ORT's intra-op thread pool spins after each ``run()``; those threads compete with the next
  block of another session. The first ``discard`` iterations of every block are timed but kept
  apart (:attr:`Block.discarded_ms`), and :func:`spin_bleed` measures how much slower they were,
  so the choice of ``discard`` (or of ``session.intra_op.allow_spinning=0``) rests on data.

Units: latencies in ms (``float64`` arrays); clocks in ``time.perf_counter_ns`` nanoseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.timedloop import time_iterations as time_iterations  # shared with the side worker

#: a block aims at this much time (s): long enough to smooth per-iteration jitter, short enough
#: to follow the machine's phases (0.2 to 0.3 s blocks gave the figures in studies/RESULTS.md)
BLOCK_TARGET_S = 0.2
#: bounds on the measured iterations of one block
MIN_BLOCK_ITERATIONS, MAX_BLOCK_ITERATIONS = 3, 2000


class BlockRunner(Protocol):
    """One side of an interleaved measurement.

    ``block(n)`` runs the model ``n`` times back to back and returns the latencies as an int64
    array of shape ``(n,)`` in nanoseconds (``time.perf_counter_ns`` differences). It raises
    whatever the side's runtime raises (a :class:`~pytest_aaco.measure.inference.SessionError` in process).
    A side may also have ``after_block(cycle)``, which :func:`run_cycles` calls with the cycle's index
    after the block's end is stamped (a traced block of device time: outside the block's window).
    """

    @property
    def name(self) -> str: ...

    def block(self, iterations: int) -> np.ndarray: ...


@dataclass
class LocalSide:
    """A side in this process: *run* is a zero-argument callable that runs the model once
    (:func:`pytest_aaco.measure.inference.bind_run` builds it outside the timed loop)."""

    name: str
    run: Callable[[], object]

    def block(self, iterations: int) -> np.ndarray:
        return time_iterations(self.run, iterations)


@dataclass(frozen=True)
class Block:
    """One block of one side inside a cycle.

    ``latencies_ms``: the measured iterations, shape ``(n,)``; ``discarded_ms``: the first
    iterations of the block, timed but not measured (spin bleed from the previous block), shape
    ``(discard,)``; ``position``: 0 for the first block of its cycle; ``after``: the side whose
    block ran just before this one (``None`` for the very first block of a measurement).
    """

    side: str
    position: int
    latencies_ms: np.ndarray
    discarded_ms: np.ndarray
    start_ns: int
    end_ns: int
    after: str | None

    @property
    def n(self) -> int:
        return int(self.latencies_ms.size)

    @property
    def log_mean(self) -> float:
        """Mean of ln(latency in ms) over the measured iterations: the block's summary."""
        return float(np.log(self.latencies_ms).mean())


@dataclass(frozen=True)
class Cycle:
    """One block of every side, in the order they ran."""

    index: int
    blocks: tuple[Block, ...]

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(b.side for b in self.blocks)

    def block(self, side: str) -> Block:
        """This cycle's block of *side*; KeyError when the side did not run in it."""
        for b in self.blocks:
            if b.side == side:
                return b
        raise KeyError(f"cycle {self.index} has no block of side {side!r} (sides: {', '.join(self.order)})")

    def log_ratio(self, baseline: str, candidate: str) -> float:
        """``d = mean ln(candidate block) - mean ln(baseline block)``: > 0 when the candidate is slower."""
        return self.block(candidate).log_mean - self.block(baseline).log_mean


def balanced_orders(sides: Sequence[str], cycles: int, rng: np.random.Generator) -> list[tuple[str, ...]]:
    """Block orders for *cycles* cycles: every rotation of *sides* equally often, shuffled.

    With two sides that is AB and BA in equal numbers (one more of a random one when *cycles* is
    odd), so each side leads as often as it follows; with ``k`` sides, the ``k`` cyclic rotations
    (a Latin square's rows). Raises ValueError for no sides, repeated names or ``cycles < 1``.
    """
    names = list(sides)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"balanced_orders needs distinct side names, got {names}")
    if cycles < 1:
        raise ValueError(f"balanced_orders needs at least one cycle, got {cycles}")
    k = len(names)
    rotations = [tuple(names[i:] + names[:i]) for i in range(k)]
    full, rest = divmod(cycles, k)
    orders = rotations * full + [rotations[i] for i in rng.choice(k, size=rest, replace=False)]
    return [orders[i] for i in rng.permutation(len(orders))]


def block_iterations(per_iteration_ms: float, target_s: float = BLOCK_TARGET_S) -> int:
    """Measured iterations for a block of about *target_s* seconds at *per_iteration_ms*,
    within :data:`MIN_BLOCK_ITERATIONS` .. :data:`MAX_BLOCK_ITERATIONS`."""
    per_s = max(float(per_iteration_ms), 1e-6) / 1000.0
    return int(np.clip(round(target_s / per_s), MIN_BLOCK_ITERATIONS, MAX_BLOCK_ITERATIONS))


def run_cycles(sides: Sequence[BlockRunner], iterations: Mapping[str, int], cycles: int, *,
               discard: int | Mapping[str, int] = 0, rng: np.random.Generator | None = None, first_index: int = 0,
               after: str | None = None) -> list[Cycle]:
    """Run *cycles* cycles of interleaved blocks.

    Each block of side ``s`` runs ``discard + iterations[s]`` iterations; the first ``discard``
    are kept apart as :attr:`Block.discarded_ms`. *discard* may be a mapping of side name to its
    own count (a fast side needs more iterations to cover a slower side's spinning threads).
    Orders come from :func:`balanced_orders` (*rng* defaults to a fixed seed, so a run's order is
    reproducible). *first_index* numbers the cycles when a measurement is extended (the index each
    side's ``after_block`` gets); *after* names
    the side that ran just before the first block (for :func:`spin_bleed`), when extending.
    Raises KeyError for a side without an entry in *iterations* (or in a *discard* mapping),
    ValueError for counts below 1, and whatever a side raises.
    """
    by_name = {s.name: s for s in sides}
    discards = {name: int(discard[name] if isinstance(discard, Mapping) else discard) for name in by_name}
    if min(discards.values(), default=0) < 0:
        raise ValueError(f"discard must be >= 0, got {discard}")
    for name in by_name:
        if int(iterations[name]) < 1:
            raise ValueError(f"side {name!r}: iterations must be >= 1, got {iterations[name]}")
    rng = rng if rng is not None else np.random.default_rng(0)
    result: list[Cycle] = []
    previous = after
    for offset, order in enumerate(balanced_orders(list(by_name), cycles, rng)):
        blocks = []
        for position, name in enumerate(order):
            start = time.perf_counter_ns()
            skip = discards[name]
            side = by_name[name]
            lat_ms = side.block(skip + int(iterations[name])) / 1e6
            blocks.append(Block(name, position, lat_ms[skip:], lat_ms[:skip], start,
                                time.perf_counter_ns(), previous))
            after_block = getattr(side, "after_block", None)
            if after_block is not None:  # e.g. a traced block: after the block's clock, not in it
                after_block(first_index + offset)
            previous = name
        result.append(Cycle(first_index + offset, tuple(blocks)))
    return result


def paired_log_ratios(cycles: Sequence[Cycle], baseline: str, candidate: str) -> np.ndarray:
    """Per-cycle ``d = mean ln(candidate) - mean ln(baseline)``, shape ``(len(cycles),)``."""
    return np.array([c.log_ratio(baseline, candidate) for c in cycles], dtype=float)


@dataclass(frozen=True)
class SpinBleed:
    """How much slower the first iterations of a block ran than the rest of it.

    ``after_other``: median over blocks of ``ln(mean of the discarded iterations) - block log-mean``
    for blocks that followed another side's block; ``after_same``: the same for blocks that
    followed a block of their own side (only at cycle boundaries); ``blocks``: how many blocks
    each figure is over. ``nan`` where no such block had discarded iterations.
    """

    after_other: float
    after_same: float
    blocks_after_other: int
    blocks_after_same: int

    def to_dict(self) -> JSONDict:
        return {"after_other": self.after_other, "after_same": self.after_same,
                "blocks_after_other": self.blocks_after_other, "blocks_after_same": self.blocks_after_same}


def spin_bleed(cycles: Sequence[Cycle]) -> SpinBleed:
    """Measure the bleed of one block into the next (see :class:`SpinBleed`).

    A positive ``after_other`` (ln units; 0.05 = 5% slower) that ``after_same`` lacks is the
    intra-op spinning of the previous session's threads, or its caches, taking time from this
    block: the reason for discarding the first iterations of each block.
    """
    other: list[float] = []
    same: list[float] = []
    for cycle in cycles:
        for b in cycle.blocks:
            if b.discarded_ms.size == 0 or b.after is None or b.latencies_ms.size == 0:
                continue
            excess = float(np.log(b.discarded_ms.mean())) - b.log_mean
            (same if b.after == b.side else other).append(excess)

    def median(values: list[float]) -> float:
        return float(np.median(values)) if values else float("nan")

    return SpinBleed(median(other), median(same), len(other), len(same))
