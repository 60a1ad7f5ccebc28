"""The console output quoted in the README and docs/ is what the plugin prints (issue 41 item 3, issue 43 item 7).

Every block marked ``<!-- output: NAME -->`` is compared with :data:`tests.examples.EXAMPLES`, built
through the real gate and renderers; a message format that changes fails here until the pages are
updated (``python -m tests.examples`` prints the blocks as they must read).
"""

from __future__ import annotations

import re
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


#: an inline code span quoting a verdict: ``REGRESSION ...``, ``no regression ...``, a bound the rule compared
QUOTE = re.compile(r"`((?:REGRESSION|IMPROVEMENT|no regression) [^`]+|(?:lower|upper) bound [^`]+)`")


def quoted_verdicts(text: str) -> list[str]:
    """The verdict fragments quoted inline in *text* (a trailing ``...`` or ``…`` marks an abridged quote)."""
    return [" ".join(m.group(1).split()) for m in QUOTE.finditer(text)]


def test_every_inline_verdict_quote_is_what_the_plugin_prints():
    """An inline quote of a message is the start of one of the examples (abridged with ``...``); a
    quoted bound is what :func:`pytest_aaco.verdict.percent.bound_text` prints for its own figures."""
    from pytest_aaco.verdict.percent import bound_text

    printed = [build() for build in examples.EXAMPLES.values()]
    wrong = []
    for page in [examples.ROOT / "README.md", *sorted((examples.ROOT / "docs").glob("*.md"))]:
        for quote in quoted_verdicts(page.read_text(encoding="utf-8")):
            head = quote.removesuffix("...").removesuffix("…").rstrip()
            bound = re.fullmatch(r"(lower|upper) bound ([+-][\d.]+)% (>|<|>=) (0|[\d.]+%)"
                                 r"(?:, ([+-][\d.]+)% >= ([\d.]+)%)?", head)
            if bound:
                side, value, _, limit, ratio, threshold = bound.groups()
                level = 1 + float(value) / 100
                if side == "lower":
                    text = bound_text(1 + float(ratio) / 100, level, None, float(threshold) / 100)
                else:
                    text = bound_text(1.0, None, level, float(limit.rstrip("%")) / 100)
                ok = text == head
            else:
                ok = any(message.startswith(head) for message in printed)
            if not ok:
                wrong.append(f"{page.name}: `{quote}`")
    assert not wrong, "quoted but never printed so:\n" + "\n".join(wrong)


def test_the_inline_check_sees_a_made_up_quote():
    assert quoted_verdicts("reads `REGRESSION m[cpu]: +9.4% vs origin/main (95% CI +7.1 .. +11.8%)` and"
                           " `upper bound +7.7% < 10%`") == [
        "REGRESSION m[cpu]: +9.4% vs origin/main (95% CI +7.1 .. +11.8%)", "upper bound +7.7% < 10%"]
    made_up = "REGRESSION resnet50[cpu]: +9.4% vs origin/main (95% CI +7.1 .. +11.8%)"
    assert not any(build().startswith(made_up) for build in examples.EXAMPLES.values())


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
