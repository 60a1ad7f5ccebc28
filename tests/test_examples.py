"""The console output quoted in the README and docs/ is what the plugin prints (issue 41 item 3, issue 43 item 7).

Every block marked ``<!-- output: NAME -->`` is compared with :data:`tests.examples.EXAMPLES`, built
through the real gate and renderers; a message format that changes fails here until the pages are
updated (``python -m tests.examples`` prints the blocks as they must read).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_aaco.verdict import finish
from tests import examples


def test_every_output_block_is_what_the_plugin_prints():
    problems = examples.stale()
    assert not problems, "\n\n".join(problems)


def test_the_readme_shows_real_output_and_every_example_is_quoted():
    blocks = examples.marked_blocks()
    readme = [name for page, name, _ in blocks if page.name == "README.md"]
    assert {"side-by-side-regression", "side-by-side-table"} <= set(readme)
    assert {name for _, name, _ in blocks} == set(examples.EXAMPLES)


def test_no_page_quotes_the_interval_the_plugin_never_prints():
    """The README once showed ``95% CI +7.1 .. +11.8%``: the gate prints the bound it compared."""
    for page in [examples.ROOT / "README.md", *sorted((examples.ROOT / "docs").glob("*.md"))]:
        assert "95% CI +7.1 .. +11.8%" not in page.read_text(encoding="utf-8"), page.name


def test_a_changed_message_format_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The check must be able to fail: print the two-sided CI again, as before the bound was printed,
    and the README's block no longer matches."""
    page = tmp_path / "page.md"
    page.write_text("<!-- output: side-by-side-regression -->\n```text\n"
                    + examples.side_by_side_regression() + "```\n", encoding="utf-8")
    assert examples.stale([page]) == []
    monkeypatch.setattr(finish, "compared_text",
                        lambda ratio, lo, hi, *rest: f"95% CI {(lo - 1) * 100:+.1f} .. {(hi - 1) * 100:+.1f}%")
    [problem] = examples.stale([page])
    assert "differs from what the plugin prints" in problem and "95% CI" in problem
    assert examples.stale([examples.ROOT / "README.md"])  # the README's block fails the same way


def test_a_block_naming_no_example_is_reported(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("<!-- output: nothing-like-this -->\n```text\nREGRESSION x\n```\n", encoding="utf-8")
    assert examples.stale([page]) == ["page.md: <!-- output: nothing-like-this --> names no example in"
                                      " tests/examples.py"]
