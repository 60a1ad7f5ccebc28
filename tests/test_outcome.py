"""The one rule for whether a judged record fails the item: :func:`pytest_aaco.verdict.outcome.fails`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_aaco.options import GateSettings
from pytest_aaco.passes.coldstart import ColdStartVerdict
from pytest_aaco.records.base import Outcome, QuantileComparison
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict
from pytest_aaco.verdict.outcome import fails

P99_REGRESSED = QuantileComparison(q=99.0, ratio=1.5, ci_low=1.2, ci_high=1.8, p_slower=0.001, n_boot=2000,
                              regression=True)
STRICT = GateSettings(strict_inconclusive=True)
IMPROVEMENT_FAILS = GateSettings(fail_on_improvement=True)


def verdict(outcome: Outcome, **kw) -> Verdict:
    return Verdict(outcome, "m[cpu]", 0.05, **kw)


@pytest.mark.parametrize(("outcome", "default", "strict", "improvement_fails"), [
    (Outcome.REGRESSION, True, True, True),
    (Outcome.ERROR, True, True, True),
    (Outcome.IMPROVEMENT, False, False, True),
    (Outcome.INCONCLUSIVE, False, True, False),
    (Outcome.NO_REGRESSION, False, False, False),
    (Outcome.NO_BASELINE, False, False, False),
    (Outcome.MISMATCH, False, False, False),
    (Outcome.SAVED, False, False, False),
    (Outcome.UNCHANGED, False, False, False),
    (Outcome.NEW, False, False, False),
])
def test_the_outcome_decides_with_the_opt_ins(outcome, default, strict, improvement_fails):
    v = verdict(outcome)
    assert fails(v, GateSettings()) is default
    assert fails(v) is default  # no settings: no opt-in
    assert fails(v, STRICT) is strict
    assert fails(v, IMPROVEMENT_FAILS) is improvement_fails


@pytest.mark.parametrize("extra", [{"memory": ["peak RSS 900 MB vs baseline 400 MB"]}, {"p99": P99_REGRESSED}])
def test_memory_or_p99_growth_fails_whatever_the_latency_outcome(extra):
    for outcome in (Outcome.NO_REGRESSION, Outcome.IMPROVEMENT, Outcome.INCONCLUSIVE):
        assert fails(verdict(outcome, **extra))
    assert not fails(verdict(Outcome.NO_REGRESSION, p99=replace(P99_REGRESSED, regression=False)))


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome.REGRESSION, True), (Outcome.INCONCLUSIVE, False), (Outcome.IMPROVEMENT, False),
    (Outcome.NO_REGRESSION, False), (Outcome.NO_BASELINE, False),
])
def test_a_cold_start_verdict_fails_on_a_regression_only(outcome, expected):
    cold = ColdStartVerdict(outcome, "message", threshold=0.2, level=0.05)
    assert fails(cold) is expected and cold.fails is expected
    assert cold.to_dict()["fails"] is expected


def test_an_item_gathers_the_stored_decisions():
    record = ItemRecord("t::x", "m", "cpu", "m[cpu]", verdict=verdict(Outcome.NO_REGRESSION))
    assert not record.fails
    record.cold_start = {"verdict": ColdStartVerdict(Outcome.REGRESSION, "slower", 0.2, 0.05).to_dict()}
    assert record.fails and record.effective_outcome == Outcome.REGRESSION
    failed = ItemRecord("t::y", "m", "cpu", "m[cpu]", outcome=Outcome.FAILED, error="provider missing")
    assert failed.fails and failed.effective_outcome == Outcome.FAILED
