"""The records of a regression withheld, or not, because the machine was busy: the CPU contention a
regression was withheld for (:class:`Contention`) and the run's fastest iteration, the witness a regression
stands on under contention (:class:`FastestIteration`); both typed parts of a
:class:`~pytest_aaco.records.verdict.Verdict`."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.records.base import _json_fields, _known


@dataclass(frozen=True)
class Contention:
    """Why a regression was withheld (:func:`pytest_aaco.verdict.finish.under_contention`): other
    processes kept ``cores`` CPU cores busy (mean over the measured phase), above ``limit``
    (``--aaco-max-contention``, cores); ``explained``: the slowdown (current/baseline ratio) contention
    could explain in that run (:func:`pytest_aaco.verdict.finish.contention_bound`), None where not measured
    (and in records written before it)."""

    cores: float
    limit: float
    explained: float | None = None

    def to_dict(self) -> JSONDict:
        data = _json_fields(self)
        if data.get("explained") is None:  # records written before the bound existed stay byte-identical
            data.pop("explained", None)
        return data

    @classmethod
    def from_dict(cls, data: JSONDict) -> Contention:
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class FastestIteration:
    """The run's fastest iteration against the history's (:func:`pytest_aaco.history.judge.fastest_iteration`):
    the stored gate's witness that a slowdown measured under CPU contention is the item's own.

    Waiting for a CPU lengthens the iterations it interrupts, not the ones it does not; a change of the
    item's own work lengthens every iteration, the fastest included. ``current_ms``: this run's fastest
    iteration (ms); ``baseline_ms``: the slowest of the history runs' fastest iterations (ms, the
    conservative side); ``ratio``: current/baseline; ``lower_bound``: the ratio's lower bound at the item's
    level, with the spread of the history's fastest iterations (at least ``--aaco-run-noise``);
    ``reference_ratio``: the reference workload's fastest iteration now against its fastest in the history
    (what shared caches, memory bandwidth and clocks did to an iteration no wait interrupted), None without
    one; ``parallel_bound``: how much slower an uninterrupted iteration of a multi-threaded session can run
    when other processes leave it fewer cores than it used in its history (the cores it used then, at most
    their ratio to the cores it got now; 1 when it got as many), None where the CPU share was not sampled;
    ``runs``: history runs with a fastest iteration; ``stood``: a regression that contention or a machine
    speed change would have withheld stands on this figure (:meth:`stands`)."""

    current_ms: float
    baseline_ms: float
    ratio: float
    lower_bound: float
    reference_ratio: float | None
    runs: int
    parallel_bound: float | None = None
    stood: bool = False

    @property
    def explained(self) -> float | None:
        """The slowdown of an uninterrupted iteration the machine explains (a ratio, >= 1): the larger of the
        reference workload's and the parallel bound; None without both (then nothing bounds it)."""
        if self.reference_ratio is None or self.parallel_bound is None:
            return None
        return max(1.0, self.reference_ratio, self.parallel_bound)

    def stands(self, threshold: float) -> bool:
        """Whether the lower bound clears the *threshold* (a fraction, 0.05 = 5%) beyond what the machine
        explains (:attr:`explained`): ``lower_bound >= (1 + threshold) x explained``. A slower clock slows
        the reference's fastest iteration as it slows the item's, so the item's must move the threshold
        further."""
        explained = self.explained
        return explained is not None and self.lower_bound >= (1.0 + threshold) * explained

    def to_dict(self) -> JSONDict:
        return _json_fields(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> FastestIteration:
        return cls(**_known(cls, data))
