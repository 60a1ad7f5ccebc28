"""The ``aaco`` command's exit codes: one table (docs/exit-codes.md) checked against the code, and
reports that never pass on missing data (issue 43: ``aaco report --github-summary FILE`` wrote
"0 jobs: no items" with exit 0 while the latest bundle held a regression; a truncated item file in a
downloaded artifact read "no items in this bundle", exit 0).

The bundles are real: written by a real pytester run of the plugin (a saved baseline, then a model
about 100x slower, pinned to the same fingerprint), then damaged as a download can damage them.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

import pytest

from pytest_aaco.cli import common
from pytest_aaco.reports.markup import md_text
from tests.test_reports import PIN_MODEL_HASH, SLOW_REGISTRY

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "exit-codes.md"


def aaco(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The ``aaco`` command in a subprocess, as a CI step runs it, in the pytester project."""
    return pytester.run(sys.executable, "-c", "from pytest_aaco.cli import main; raise SystemExit(main())", *args,
                        timeout=120)


# ---------------------------------------------------------------- one table, the code's constants


def _documented() -> dict[int, str]:
    """The rows of the table under the ``aaco`` exit-code header (the page also lists pytest's codes)."""
    text = TABLE.read_text(encoding="utf-8")
    table = text[text.index("| `aaco` exit code | meaning |"):].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+?) \|$", table, re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_the_exit_code_table_is_the_codes_constants():
    assert _documented() == common.EXIT_CODES
    assert (common.OK, common.REGRESSION_FOUND, common.USAGE_ERROR) == (0, 1, 2)
    assert common.INCOMPLETE_BUNDLE in common.EXIT_CODES and "partial bundle" in common.EXIT_CODES[2]
    # one table: no other page keeps its own, and the docs site lists the page
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        if page != TABLE:
            assert "exit code | meaning |" not in page.read_text(encoding="utf-8"), page
    assert "exit-codes.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_every_aaco_subcommand_returns_a_named_status():
    """No ``return 0`` / ``return 1`` in the command's modules: every status is a constant of the table,
    so the table cannot drift from what a subcommand returns."""
    literal = []
    for path in sorted((ROOT / "pytest_aaco" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
                    and type(node.value.value) is int:
                literal.append(f"{path.name}:{node.lineno}")
    assert literal == []


# ---------------------------------------------------------------- reports never pass on missing data


def run_with_bundle(project, *extra: str) -> pytest.RunResult:
    """A pytest run of the project that writes its session bundle (the fast arguments, less ``--aaco-no-bundle``)."""
    return project.pytester.runpytest(*[a for a in project.args(*extra) if a != "--aaco-no-bundle"])


@pytest.fixture
def red_bundle(aaco_project) -> Path:
    """A real session bundle holding a regression (``.aaco/sessions/<id>`` in the pytester project)."""
    pytester = aaco_project.pytester
    pytester.makeconftest(PIN_MODEL_HASH)
    run_with_bundle(aaco_project, "--aaco-save-baseline", "--aaco-reference=none").assert_outcomes(passed=1)
    aaco_project.registry(SLOW_REGISTRY)
    gate = run_with_bundle(aaco_project, "--aaco-reference=none")
    gate.assert_outcomes(failed=1)
    assert len(list((pytester.path / ".aaco" / "sessions").iterdir())) == 2
    # the gate's own bundle, as it printed it: two runs started in the same second have names that sort by
    # their random suffix, not by time
    (printed,) = [line.split(": ", 1)[1] for line in gate.outlines if line.startswith("session bundle: ")]
    return Path(printed)


@pytest.mark.slow
def test_a_red_bundle_fails_the_job_summary_and_a_damaged_one_exits_2_naming_the_file(red_bundle, pytester):
    summary = pytester.path / "summary.md"
    # without a bundle named: the latest one, as `aaco report` reads it (was: "0 jobs: no items", exit 0)
    result = aaco(pytester, "report", "--github-summary", str(summary))
    assert result.ret == common.REGRESSION_FOUND, result.stdout.str() + result.stderr.str()
    assert f"latest session bundle: {red_bundle}" in result.stdout.str()
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## pytest-aaco (1 jobs):") and "REGRESSION tiny\\[cpu\\]" in text, text
    assert "no items" not in text and "Incomplete" not in text
    assert aaco(pytester, "report").ret == common.REGRESSION_FOUND

    # a truncated item file, as a broken artifact download leaves it (was: "no items in this bundle", exit 0)
    copy = pytester.path / "downloaded" / red_bundle.name
    shutil.copytree(red_bundle, copy)
    (item,) = (copy / "items").glob("*.json")
    item.write_bytes(item.read_bytes()[: item.stat().st_size // 2])
    for args in (["report", str(copy)], ["report", str(copy), "--github-summary", str(summary)]):
        result = aaco(pytester, *args)
        assert result.ret == common.INCOMPLETE_BUNDLE == 2, (args, result.stdout.str(), result.stderr.str())
        err = result.stderr.str()
        assert f"aaco: error: incomplete bundle: {item}: not valid JSON" in err, err
        assert "Traceback" not in err
    text = summary.read_text(encoding="utf-8")
    last = text[text.rindex("## pytest-aaco"):]
    assert last.startswith("## pytest-aaco (1 jobs, INCOMPLETE):"), last
    assert last.splitlines()[2].startswith("### Incomplete: 1 problem(s)") and md_text(item.name) in last, last

    # an item file gone from the folder: the finished session's own count names what is missing
    item.unlink()
    result = aaco(pytester, "report", str(copy))
    assert result.ret == 2 and f"{copy / 'items'}: 1 item file(s) missing (the session wrote 1, the folder holds 0)" \
        in result.stderr.str(), result.stderr.str()


def test_a_green_bundle_exits_0_and_one_that_never_finished_exits_2(aaco_project):
    pytester = aaco_project.pytester
    run_with_bundle(aaco_project, "--aaco-save-baseline", "--aaco-reference=none").assert_outcomes(passed=1)
    summary = pytester.path / "summary.md"
    assert aaco(pytester, "report", "--github-summary", str(summary)).ret == common.OK
    (bundle,) = (pytester.path / ".aaco" / "sessions").iterdir()
    meta = bundle / "session_meta.json"
    text = meta.read_text(encoding="utf-8")
    meta.write_text(re.sub(r'"bundle_finished_at": "[^"]*",?', "", text), encoding="utf-8")
    result = aaco(pytester, "report", str(bundle))
    assert result.ret == 2, result.stdout.str() + result.stderr.str()
    assert f"{meta}: the session never finished" in result.stderr.str()
