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
from dataclasses import dataclass
from typing import Any

from pytest_aaco.sidebyside.compute import ComputeCheck, compare_compute
from pytest_aaco.sidebyside.revision import CHANGED, NEW, UNCHANGED, BaselineSide

#: triage results
SAME_COMPUTE, MEASURE = "same-compute", "measure"
#: ``--aaco-compare-unchanged`` values
SKIP_UNCHANGED, MEASURE_UNCHANGED = "skip", "measure"
UNCHANGED_MODES = (SKIP_UNCHANGED, MEASURE_UNCHANGED)
#: the key of an item record's ``extra`` that holds the triage (:meth:`Triage.to_dict`)
EXTRA_KEY = "compare_triage"


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

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "changes": list(self.side.changes), "seconds": round(self.seconds, 3),
                "compute": None if self.compute is None else self.compute.to_dict()}


def triage(side: BaselineSide, same_environment: bool, model_file: Any, started: float | None = None) -> Triage:
    """Triage an item whose baseline side is *side*; *model_file* is the candidate's model file. The
    compute check runs only when the model bytes are the one change and both sides run in this
    environment (*same_environment*: no ``--aaco-compare-python``, whose subject is the environment).
    *started*: when the triage began (``time.perf_counter()``), so its seconds include finding *side*."""
    start = time.perf_counter() if started is None else started
    if side.status == UNCHANGED:
        return Triage(UNCHANGED, side, seconds=time.perf_counter() - start)
    if side.status == NEW or side.status != CHANGED or side.model_file is None:
        return Triage(MEASURE, side, seconds=time.perf_counter() - start)
    if side.changes != ["model bytes"] or not same_environment:
        return Triage(MEASURE, side, seconds=time.perf_counter() - start)
    check = compare_compute(side.model_file, model_file)
    return Triage(SAME_COMPUTE if check.proven else MEASURE, side, check, time.perf_counter() - start)


__all__ = ["EXTRA_KEY", "MEASURE", "MEASURE_UNCHANGED", "SAME_COMPUTE", "SKIP_UNCHANGED", "UNCHANGED_MODES",
           "Triage", "triage"]
