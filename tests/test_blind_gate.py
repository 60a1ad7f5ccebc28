"""A gate that cannot see says so: the summary line after the table and --aaco-fail-blind
(pytest_aaco/verdict/blind.py)."""

from __future__ import annotations

import pytest
from verdicts import verdict

from pytest_aaco.options import GateSettings
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict.blind import blind_mde, summary_line
from pytest_aaco.verdict.outcome import fails


def _verdict(outcome: Outcome, mde: float | None, device_mde: float | None = None) -> Verdict:
    device = {"mde": device_mde, "threshold": 0.01, "ratio": 1.0} if device_mde is not None else None
    wall = {"ratio": 1.0, "mde": mde} if mde is not None else {}  # a wall-time test has an estimate
    return verdict(outcome, **wall, **({"device_time": device} if device else {}))


def test_blind_is_inconclusive_with_every_mde_above_its_threshold() -> None:
    assert blind_mde(_verdict(Outcome.INCONCLUSIVE, 0.66)) == pytest.approx(0.66)
    assert blind_mde(_verdict(Outcome.INCONCLUSIVE, 0.04)) is None  # could see 5%
    assert blind_mde(_verdict(Outcome.NO_REGRESSION, 0.66)) is None  # decided
    assert blind_mde(_verdict(Outcome.INCONCLUSIVE, 0.66, device_mde=0.005)) is None  # device time sees 1%
    assert blind_mde(_verdict(Outcome.INCONCLUSIVE, 0.66, device_mde=0.079)) == pytest.approx(0.079)
    assert blind_mde(_verdict(Outcome.NO_BASELINE, None)) is None


def test_fail_blind_fails_only_blind_items() -> None:
    on = GateSettings(fail_blind=True)
    assert fails(_verdict(Outcome.INCONCLUSIVE, 0.66), on)
    assert not fails(_verdict(Outcome.INCONCLUSIVE, 0.66), GateSettings())
    assert not fails(_verdict(Outcome.INCONCLUSIVE, 0.03), on)
    assert not fails(_verdict(Outcome.NO_REGRESSION, 0.66), on)


def test_summary_line_counts_the_judged_items() -> None:
    verdicts = [_verdict(Outcome.INCONCLUSIVE, m) for m in (0.66, 1.04, 0.8)]
    verdicts += [_verdict(Outcome.NO_REGRESSION, 0.01), _verdict(Outcome.INCONCLUSIVE, 0.02),
                 _verdict(Outcome.INCONCLUSIVE, 0.7), _verdict(Outcome.NO_BASELINE, None), None]
    line = summary_line(verdicts)
    assert line == ("4 of 6 items could not detect a slowdown below 66% on this runner (minimum detectable"
                    " effect); use --aaco-compare for pull requests, or --aaco-fail-blind to fail them")
    assert summary_line([_verdict(Outcome.NO_REGRESSION, 0.01)]) is None


#: a runner whose runs differ by 40% (as on a busy 2-core runner, where the stored gate's MDE was
#: 66-104%): the short-history test's run-to-run term, so the item's MDE is far above 5%
BUSY = ("--aaco-run-noise=40%", "--aaco-threshold=5%", "--aaco-intra-op-threads=1")


def test_a_blind_gate_says_so_and_the_option_fails_it(aaco_project) -> None:  # type: ignore[no-untyped-def]
    project = aaco_project
    saved = project.run("--aaco-save-baseline", *BUSY)
    assert saved.ret == 0, saved.stdout.str()
    result = project.run(*BUSY)
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines  # issue 43: the item not judged is named in the results' first line
    first = lines[lines.index(next(x for x in lines if "pytest-aaco results" in x)) + 1]
    assert first.startswith("not judged: 1 of 1 item: tiny[cpu] (minimum detectable effect "), first
    result.stdout.fnmatch_lines([
        "*= pytest-aaco results =*",
        "tiny*cpu*inconclusive*",
        "1 of 1 item could not detect a slowdown below *% on this runner (minimum detectable effect);"
        " use --aaco-compare for pull requests, or --aaco-fail-blind to fail them",
    ])
    strict = project.run(*BUSY, "--aaco-fail-blind")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, strict.stdout.str()
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["1 of 1 item could not detect a slowdown below *%*; they failed (--aaco-fail-blind)"])
    why = "(fails with --aaco-fail-blind or --aaco-strict-inconclusive: minimum detectable effect"
    assert why in strict.stdout.str()  # the failing item's headline says why it failed
    project.pytester.makeini("[pytest]\naaco_fail_blind = true\n")  # the ini twin
    assert project.run(*BUSY).ret == pytest.ExitCode.TESTS_FAILED


def test_an_item_withheld_for_contention_is_not_judged_and_fail_blind_fails_it() -> None:
    """Issue 43: a regression withheld for CPU contention is named first, with the bound contention explains, is
    left out of the MDE line (its own bound says why), and --aaco-fail-blind fails it."""
    from pytest_aaco.records.verdict import Contention
    from pytest_aaco.verdict.blind import not_judged_line

    v = Verdict(Outcome.INCONCLUSIVE, "m[cpu]", 0.05, contention=Contention(3.9, 0.1, 2.45))
    assert not fails(v, GateSettings()) and fails(v, GateSettings(fail_blind=True))
    line = not_judged_line([("m[cpu]", v), ("n[cpu]", Verdict(Outcome.NO_REGRESSION, "n[cpu]", 0.05))])
    assert line == ("not judged: 1 of 2 items: m[cpu] (CPU contention (3.90 other cores busy, explaining a slowdown"
                    " of up to +145.0%)); they passed, --aaco-fail-blind fails them")
    assert summary_line([v]) is None
    assert not_judged_line([("n[cpu]", Verdict(Outcome.NO_REGRESSION, "n[cpu]", 0.05))]) is None
