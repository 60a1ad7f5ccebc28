"""Verdicts for tests, built the way a bundle's JSON holds them (:meth:`pytest_aaco.records.verdict.Verdict.from_dict`).

The wall-time figures are the verdict's own keys there (``ratio``, ``ci_low``, ``p_value``, ``mde`` ...),
device time a ``device_time`` object; typed parts given as records are written with their ``to_dict()``.
"""

from __future__ import annotations

from typing import Any

from pytest_aaco.records.base import Outcome
from pytest_aaco.records.verdict import Verdict


def verdict(outcome: Outcome | str, label: str = "m[cpu]", threshold: float = 0.05, **fields: Any) -> Verdict:
    """A :class:`~pytest_aaco.records.verdict.Verdict` from its JSON keys (*fields*: ``ratio``, ``mde``,
    ``device_time``, ``p99`` ...), as :meth:`~pytest_aaco.records.verdict.Verdict.from_dict` reads a bundle."""
    data: dict[str, Any] = {"outcome": str(outcome), "label": label, "threshold": threshold}
    for key, value in fields.items():
        data[key] = value.to_dict() if hasattr(value, "to_dict") else value
    return Verdict.from_dict(data)
