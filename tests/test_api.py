"""The public API (``pytest_aaco.api``): every name is there, documented in its docstring and on docs/api.md,
and the page's example runs."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from pytest_aaco import api

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "api.md"


def test_every_exported_name_exists_and_has_a_docstring() -> None:
    assert len(api.__all__) == len(set(api.__all__))
    for name in api.__all__:
        obj = getattr(api, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert (inspect.getdoc(obj) or "").strip(), f"pytest_aaco.api.{name} has no docstring"
        else:  # a constant: its value is documented on the page
            assert isinstance(obj, int | float), name


def test_the_page_documents_exactly_the_exported_names() -> None:
    headings = re.findall(r"^### (\w+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert len(headings) == len(set(headings)), "a name documented twice"
    assert set(headings) == set(api.__all__), (
        f"only on the page: {sorted(set(headings) - set(api.__all__))}; "
        f"not on the page: {sorted(set(api.__all__) - set(headings))}")


def test_paired_t_through_the_api_is_scipys_one_sample_t_test() -> None:
    d = np.random.default_rng(3).normal(0.01, 0.02, 12)
    comp = api.paired_t([d])
    ref = scipy.stats.ttest_1samp(d, 0.0, alternative="greater")
    assert comp.p_slower == pytest.approx(ref.pvalue, rel=1e-9)
    assert str(api.outcome_of(comp, 0.05, 0.01)) in {"regression", "no-regression", "inconclusive", "improvement"}


def test_level_test_keeping_every_round_is_welch_with_the_run_term() -> None:
    rng = np.random.default_rng(5)
    current, runs = rng.normal(0.02, 0.01, 8), [rng.normal(0.0, 0.01, 8) for _ in range(3)]
    level = api.level_test(current, runs, run_sd=0.01, keep=np.asarray)
    welch = api.welch_rounds(current, np.concatenate(runs), run_sd=0.01, baseline_runs=3)
    assert (level.estimate, level.se, level.p_slower) == pytest.approx((welch.estimate, welch.se, welch.p_slower))
    classic = api.welch_rounds(current, np.concatenate(runs))  # no run term: scipy's Welch test
    ref = scipy.stats.ttest_ind(current, np.concatenate(runs), equal_var=False, alternative="greater")
    assert classic.p_slower == pytest.approx(ref.pvalue, rel=1e-9)
    assert level.p_slower > classic.p_slower  # the run term widens the interval


def test_the_pages_example_runs() -> None:
    """The example block of docs/api.md, as written (an A/A comparison of squeezenet on the CPU EP)."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(PAGE), "exec"), {})  # noqa: S102 - the repository's own page
    word, _, rest = out.getvalue().strip().partition(":")
    assert word in {"no-regression", "inconclusive", "regression", "improvement"}, out.getvalue()
    assert rest.startswith(" candidate/baseline ")
