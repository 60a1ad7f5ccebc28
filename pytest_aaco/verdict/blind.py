"""A gate that cannot see says so: the minimum detectable effect (MDE) of an inconclusive stored
verdict against its threshold.

A stored-baseline verdict is *blind* when it is inconclusive and every timing metric it was
judged on has a minimum detectable effect (power 0.8 at the item's level,
:meth:`pytest_aaco.verdict.stats.Comparison.mde`) above that metric's practical threshold: wall
time's ``mde`` against ``threshold``, device time's ``device_time.mde`` against its own
``threshold`` (``--aaco-device-threshold``). Such a gate passes a slowdown it could not have seen.
The session says so in one line after the table (:func:`summary_line`), and
``--aaco-fail-blind`` fails such items (:func:`fails_blind`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_aaco.records import Outcome, Verdict


def blind_mde(verdict: object) -> float | None:
    """The smallest MDE (fraction) of *verdict*'s timing metrics when every one exceeds its
    threshold and the verdict is inconclusive, else None. Side-by-side verdicts and verdicts
    without an MDE (no baseline, saved, errors) are never blind."""
    if getattr(verdict, "outcome", None) != Outcome.INCONCLUSIVE or getattr(verdict, "side_by_side", None) is not None:
        return None
    if getattr(verdict, "contention", None) is not None or getattr(verdict, "withheld", None):
        return None  # not judged for contention or a machine speed change: its own reason says why
    found: list[tuple[float, float]] = []
    mde, threshold = getattr(verdict, "mde", None), getattr(verdict, "threshold", None)
    if isinstance(mde, (int, float)) and isinstance(threshold, (int, float)):
        found.append((float(mde), float(threshold)))
    judged = getattr(getattr(verdict, "device_time", None), "judgement", None)  # a DeviceTimeRecord's
    if judged is not None and judged.mde is not None:
        found.append((float(judged.mde), float(judged.threshold)))
    if not found or any(m <= t for m, t in found):
        return None
    return min(m for m, _ in found)


def fails_blind(verdict: object, settings: object) -> bool:
    """Whether ``--aaco-fail-blind`` (``settings.fail_blind``) fails *verdict*: it is blind (:func:`blind_mde`)."""
    return bool(getattr(settings, "fail_blind", False)) and blind_mde(verdict) is not None


def not_judged_reason(verdict: object) -> str | None:
    """Why *verdict* could not be judged (``CPU contention`` when a regression was withheld for it,
    :func:`pytest_aaco.verdict.finish.under_contention`; ``machine speed change: the machine ran 187% slower
    than in the history (...)`` when the reference workload showed it, :attr:`Verdict.withheld`;
    ``minimum detectable effect 64% > threshold 5%`` when it is blind, :func:`blind_mde`), None when it was
    judged."""
    if getattr(verdict, "outcome", None) != Outcome.INCONCLUSIVE:
        return None
    contention = getattr(verdict, "contention", None)
    if contention is not None:
        explained = getattr(contention, "explained", None)
        return (f"CPU contention ({contention.cores:.2f} other cores busy"
                + ("" if explained is None else f", explaining a slowdown of up to {(explained - 1) * 100:+.1f}%")
                + ")")
    withheld = getattr(verdict, "withheld", None)
    if withheld:
        return f"machine speed change: {str(withheld).split(';')[0]}"
    runner = getattr(verdict, "baseline_runner", None)
    if runner and getattr(verdict, "ratio", None) is None and getattr(verdict, "reason", None):
        return f"no series comparable with runner {runner}'s history"
    mde = blind_mde(verdict)
    if mde is None:
        return None
    return f"minimum detectable effect {mde:.0%} > threshold {getattr(verdict, 'threshold', 0.0):.0%}"


def not_judged_line(labelled: Sequence[tuple[str, Verdict | None]]) -> str | None:
    """``not judged: 2 of 5 items: a[cpu] (CPU contention (3.90 other cores busy, ...)); b[cpu] (...); they
    passed, --aaco-fail-blind fails them`` over (label, verdict) pairs; ``they failed (--aaco-fail-blind)``
    when every one did; None when every item was judged. The session summary's first line."""
    found = [(label, why, v) for label, v in labelled if v is not None and (why := not_judged_reason(v)) is not None]
    if not found:
        return None
    failed = all(v.fails for _, _, v in found)
    return (f"not judged: {len(found)} of {len(labelled)} item{'s' * (len(labelled) != 1)}: "
            + "; ".join(f"{label} ({why})" for label, why, _ in found)
            + ("; they failed (--aaco-fail-blind)" if failed else "; they passed, --aaco-fail-blind fails them"))


def summary_line(verdicts: Sequence[Verdict | None]) -> str | None:
    """``3 of 6 items could not detect a slowdown below 66% on this runner (minimum detectable
    effect); use --aaco-compare for pull requests, or --aaco-fail-blind to fail them`` (counting the
    items judged against a stored baseline, the per cent the smallest MDE of the blind ones; ``they
    failed (--aaco-fail-blind)`` when they did); None when no item is blind."""
    judged = [v for v in verdicts if v is not None and v.side_by_side is None
              and v.outcome in (Outcome.REGRESSION, Outcome.IMPROVEMENT, Outcome.NO_REGRESSION, Outcome.INCONCLUSIVE)]
    blind = [(m, v) for v in judged if (m := blind_mde(v)) is not None]
    if not blind:
        return None
    failed = all(v.fails for _, v in blind)
    return (f"{len(blind)} of {len(judged)} item{'s' * (len(judged) != 1)} could not detect a slowdown below"
            f" {min(m for m, _ in blind):.0%} on this runner (minimum detectable effect); use --aaco-compare for"
            " pull requests" + ("; they failed (--aaco-fail-blind)" if failed
                                else ", or --aaco-fail-blind to fail them"))
