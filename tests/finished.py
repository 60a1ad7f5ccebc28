"""The gates' looks finished as the item pipeline finishes them, for tests that judge one look directly.

The stored gate (:func:`pytest_aaco.history.judge.judge_history`) and the side-by-side gate
(:func:`pytest_aaco.sidebyside.cycles.to_verdict`) return *unfinished* verdicts; the item pipeline
(:func:`pytest_aaco.gate.judge`) finishes each once with :func:`pytest_aaco.verdict.finish.settle`.
These wrappers do the same for one look (no confirmation look, no contention unless asked), so a
test reads ``fails`` and ``message`` as the reports do.
"""

from __future__ import annotations

from typing import Any

from pytest_aaco.history.judge import judge_history as _judge_history
from pytest_aaco.options import GateSettings
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.sidebyside.cycles import SideBySide
from pytest_aaco.sidebyside.cycles import to_verdict as _to_verdict
from pytest_aaco.verdict.finish import confirm as _confirm
from pytest_aaco.verdict.finish import settle
from pytest_aaco.verdict.finish import under_contention as _under_contention


def judge_history(*args: Any, **kwargs: Any) -> Verdict:
    """:func:`pytest_aaco.history.judge.judge_history`, finished with its *settings* (4th argument)."""
    settings = kwargs["settings"] if "settings" in kwargs else args[3]
    return settle(_judge_history(*args, **kwargs), settings)


def to_verdict(result: SideBySide, label: str, settings: GateSettings | None = None) -> Verdict:
    """:func:`pytest_aaco.sidebyside.cycles.to_verdict`, finished with *settings* (default: the result's threshold)."""
    return settle(_to_verdict(result, label), settings or GateSettings(threshold=result.threshold))


def confirm(first: Verdict, second: Verdict, settings: GateSettings | None = None) -> Verdict:
    """The confirmation rule (:func:`pytest_aaco.verdict.finish.confirm`) on two looks, finished."""
    settings = settings or GateSettings(threshold=second.threshold)
    return settle(_confirm(first, second, settings), settings)


def under_contention(v: Verdict, others_cores: float, limit: float, settings: GateSettings) -> Verdict:
    """The contention rule (:func:`pytest_aaco.verdict.finish.under_contention`), finished."""
    return settle(_under_contention(v, others_cores, limit), settings)


def finish(v: Verdict, settings: GateSettings) -> Verdict:
    """A verdict finished with no further rule."""
    return settle(v, settings)
