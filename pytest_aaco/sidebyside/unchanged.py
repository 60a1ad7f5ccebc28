"""What an item costs under ``--aaco-compare=REF``: nothing when it is unchanged, one quick check when
only its model bytes changed.

:func:`triage` decides before the item's InferenceSession is built:

* :data:`UNCHANGED`: model bytes, inputs and provider options are the same at REF
  (:meth:`pytest_aaco.sidebyside.revision.RefTree.side_at_revision`);
* :data:`SAME_COMPUTE`: only the model bytes changed, and the graph is provably the same
  (:func:`pytest_aaco.sidebyside.compute.compare_compute`);
* :data:`MEASURE`: anything else (changed, new, or a compute check that did not prove it; its
  reason is kept for the verdict's notes).

Under ``--aaco-compare-unchanged=skip`` (the default) the first two are skipped with the reason
(``unchanged since REF``, ``unchanged compute since REF``) and keep a record of outcome
``unchanged``; under ``measure`` every item is measured as before (unchanged ones once, as without a
comparison). ``--aaco-save-baseline`` measures them too: a run that saves needs a result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.registry import ModelSpec
from pytest_aaco.options import COMPARE_UNCHANGED_MODES
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.item import TRIAGE_KEY as EXTRA_KEY
from pytest_aaco.records.item import TRIAGE_SAME_COMPUTE as SAME_COMPUTE
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.sidebyside.compute import ComputeCheck, compare_compute
from pytest_aaco.sidebyside.revision import CHANGED, UNCHANGED, BaselineSide, GitRefError

#: triage results (SAME_COMPUTE and the record key are in records, where the reports read them)
MEASURE = "measure"
#: ``--aaco-compare-unchanged=measure``: measure an item unchanged at REF anyway
MEASURE_UNCHANGED = COMPARE_UNCHANGED_MODES[1]


@dataclass(frozen=True)
class Triage:
    """One item's triage: ``status`` (:data:`~pytest_aaco.sidebyside.revision.UNCHANGED`,
    :data:`SAME_COMPUTE` or :data:`MEASURE`), its baseline side, the compute check when one ran,
    and the seconds the triage took (git, hashing, the check)."""

    status: str
    side: BaselineSide
    compute: ComputeCheck | None = None
    seconds: float = 0.0

    @property
    def free(self) -> bool:
        """Whether the item needs no measurement to be judged (unchanged, or the same compute)."""
        return self.status in (UNCHANGED, SAME_COMPUTE)

    def reason(self, ref: str) -> str:
        """The skip reason: ``unchanged since REF`` or ``unchanged compute since REF (model bytes differ:
        same graph ...)``; for a measured item, what it is at REF."""
        if self.status == UNCHANGED:
            return f"unchanged since {ref}"
        if self.status == SAME_COMPUTE and self.compute is not None:
            took = self.compute.seconds
            spent = f"{took:.1f} s" if took >= 1 else f"{took * 1000:.0f} ms"
            return f"unchanged compute since {ref} (model bytes differ: {self.compute.how}, checked in {spent})"
        return self.side.describe(ref)

    def note(self) -> str | None:
        """For a measured item whose compute check ran and did not prove it: the reason, else None."""
        if self.compute is not None and not self.compute.proven:
            return self.compute.reason
        return None

    def to_dict(self) -> JSONDict:
        return {"status": self.status, "changes": list(self.side.changes), "seconds": round(self.seconds, 3),
                "compute": None if self.compute is None else self.compute.to_dict()}


def triage(side: BaselineSide, same_environment: bool, model_file: Path, started: float | None = None,
           checks: dict[tuple[Path, Path], ComputeCheck] | None = None) -> Triage:
    """Triage an item whose baseline side is *side*; *model_file* is the candidate's model file. The
    compute check runs only when the model bytes are the one change and both sides run in this
    environment (*same_environment*: no ``--aaco-compare-python``, whose subject is the environment).
    *started*: when the triage began (``time.perf_counter()``), so its seconds include finding *side*.
    *checks*: the checks made so far, by (REF file, candidate file): a model gated on several EPs is
    checked once (two ONNX loads and up to three ORT sessions, about 2 s for a ResNet-50)."""
    start = time.perf_counter() if started is None else started
    if side.status == UNCHANGED:
        return Triage(UNCHANGED, side, seconds=time.perf_counter() - start)
    if side.status != CHANGED or side.model_file is None or side.changes != ["model bytes"] or not same_environment:
        return Triage(MEASURE, side, seconds=time.perf_counter() - start)
    pair = (side.model_file, model_file)
    check = checks.get(pair) if checks is not None else None
    if check is None:
        check = compare_compute(*pair)
        if checks is not None:
            checks[pair] = check
    return Triage(SAME_COMPUTE if check.proven else MEASURE, side, check, time.perf_counter() - start)


class Triages(Protocol):
    """What :func:`skip_unchanged` reads of the side-by-side gate
    (:class:`pytest_aaco.sidebyside.gate.SideBySideGate`): the revision and each item's triage."""

    ref: str | None

    def triage(self, spec: ModelSpec, provider_short: str) -> Triage: ...


#: the item's triage under ``--aaco-compare`` (set by :func:`skip_unchanged`, copied into its record)
TRIAGE_KEY: pytest.StashKey[Triage] = pytest.StashKey()


def skip_unchanged(gate: Triages, item: pytest.Item, model: ModelSpec, provider_short: str, measure_anyway: bool,
                   threshold: Callable[[], float], keep: Callable[[ItemRecord], None]) -> None:
    """Under ``--aaco-compare=REF``: skip benchmark *item* when it is unchanged at REF or its compute is
    provably the same, after handing *keep* a record of outcome ``unchanged`` (its verdict says which,
    and the compute check's seconds; *threshold()* is the item's threshold, a fraction). Otherwise
    remember the triage for the item's record (:func:`note_triage`) and return. Nothing is skipped
    for items without ``benchmark_model`` or with *measure_anyway* (``--aaco-compare-unchanged=measure``,
    ``--aaco-save-baseline``: a saving run needs a result). A REF that cannot give the item's files is
    left to the measurement, which reports it. Raises pytest's skip exception."""
    if gate.ref is None or "benchmark_model" not in getattr(item, "fixturenames", ()):
        return
    try:
        found = gate.triage(model, provider_short)
    except GitRefError:
        return
    item.stash[TRIAGE_KEY] = found
    if not found.free or measure_anyway:
        return
    label = f"{model.name}[{provider_short}]"
    text = found.reason(gate.ref)
    verdict = Verdict(outcome=Outcome.UNCHANGED, label=label, threshold=threshold(), reason=f"{label}: {text}",
                      message=f"{label}: {text}; not measured (--aaco-compare-unchanged=measure measures it)")
    keep(ItemRecord(item.nodeid, model.name, provider_short, label, verdict=verdict, outcome=Outcome.SKIPPED,
                    extra={EXTRA_KEY: found.to_dict()}))
    pytest.skip(text)


def note_triage(item: pytest.Item, record: ItemRecord) -> None:
    """Copy *item*'s triage (:data:`TRIAGE_KEY`) into *record*'s ``extra``, for the ledger and the reports."""
    found = item.stash.get(TRIAGE_KEY, None)
    if found is not None and EXTRA_KEY not in record.extra:
        record.extra[EXTRA_KEY] = found.to_dict()


__all__ = ["EXTRA_KEY", "MEASURE", "MEASURE_UNCHANGED", "SAME_COMPUTE", "TRIAGE_KEY", "Triage", "Triages",
           "note_triage", "skip_unchanged", "triage"]
