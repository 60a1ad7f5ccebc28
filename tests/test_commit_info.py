"""The project's git commit, branch and dirty flag in session bundles, baseline histories, `aaco ls`,
`aaco baseline show` and the HTML report; unknown, never an error, without git or outside a repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_aaco import cli
from pytest_aaco.measure.commit import commit_info, commit_text, describe_commit
from tests.conftest import FAST_ARGS


def _repo(root: Path, git: Any, branch: str = "perf-work") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "checkout", "-q", "-b", branch)
    (root / "tracked.txt").write_text("one\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


def test_a_clean_checkout_records_commit_branch_and_time(tmp_path: Path, git: Any) -> None:
    root = _repo(tmp_path / "repo", git)
    info = commit_info(root)
    assert info["id"] == git(root, "rev-parse", "HEAD") and len(info["id"]) == 40
    assert info["branch"] == "perf-work" and info["dirty"] is False and info["error"] is None
    assert info["time"] == git(root, "show", "-s", "--format=%cI", "HEAD")
    (root / "sub").mkdir()  # a subfolder of the project finds the same commit
    assert commit_info(root / "sub")["id"] == info["id"]


def test_dirty_means_tracked_changes_not_untracked_files(tmp_path: Path, git: Any) -> None:
    root = _repo(tmp_path / "repo", git)
    (root / "untracked.json").write_text("{}")  # a session bundle or a new baseline file
    assert commit_info(root)["dirty"] is False
    (root / "tracked.txt").write_text("two\n")
    assert commit_info(root)["dirty"] is True
    git(root, "add", "tracked.txt")  # staged counts too
    assert commit_info(root)["dirty"] is True


def test_a_detached_head_has_no_branch(tmp_path: Path, git: Any) -> None:
    root = _repo(tmp_path / "repo", git)
    git(root, "checkout", "-q", "--detach")
    info = commit_info(root)
    assert info["branch"] is None and info["id"] == git(root, "rev-parse", "HEAD")
    assert describe_commit(info) == f"{info['id'][:10]} (detached)"


def test_outside_a_repository_without_commits_or_without_git_it_is_unknown(
        tmp_path: Path, git: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    info = commit_info(plain)
    assert info["id"] is None and info["dirty"] is None and "not a git repository" in info["error"]
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert commit_info(empty)["error"] == "the git repository has no commit yet"
    root = _repo(tmp_path / "repo", git)
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))
    assert commit_info(root) == {"id": None, "branch": None, "dirty": None, "time": None,
                                 "error": "git is not on PATH"}


def test_describe_and_text_for_old_and_unknown_records() -> None:
    info = {"id": "0123456789abcdef" * 2 + "01234567", "branch": "main", "dirty": True,
            "time": "2026-11-27T12:00:00+00:00", "error": None}
    assert describe_commit(info) == "0123456789 main, dirty"
    assert commit_text(info) == ("0123456789 (branch main, committed 2026-11-27T12:00:00+00:00),"
                                 " with uncommitted changes")
    for old in (None, {}, {"id": None, "error": "git is not on PATH"}, "abc"):  # older files, git unknown
        assert describe_commit(old) == "-"
    assert commit_text({"id": None, "error": "git is not on PATH"}) == "unknown (git is not on PATH)"
    assert commit_text(None) == "unknown"


def _args(*extra: str) -> list[str]:
    return ["--aaco-models=models.yaml", *(a for a in FAST_ARGS if a != "--aaco-no-bundle"), "-p", "no:cacheprovider",
            "--aaco-session-dir=sessions", "--aaco-baseline-dir=baselines", *extra]


def _only(folder: Path, pattern: str) -> Path:
    (found,) = sorted(folder.glob(pattern))
    return found


@pytest.mark.slow
def test_bundle_history_ls_show_and_html_carry_the_commit(aaco_project: Any, git: Any,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = aaco_project.pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "checkout", "-q", "-b", "perf-work")
    git(root, "add", "models.yaml", "test_perf.py", "tiny.onnx")
    git(root, "commit", "-qm", "base")
    head = git(root, "rev-parse", "HEAD")

    result = aaco_project.pytester.runpytest(*_args("--aaco-save-baseline", "--aaco-html=report.html"))
    result.assert_outcomes(passed=1)
    meta = json.loads((_only(root / "sessions", "*") / "session_meta.json").read_text())
    assert meta["commit_info"]["id"] == head and meta["commit_info"]["branch"] == "perf-work"
    assert meta["commit_info"]["dirty"] is False  # the session and baseline folders are untracked
    history = json.loads(_only(root / "baselines", "*/*.json").read_text())["history"]
    assert [run["commit_info"]["id"] for run in history] == [head]
    page = (root / "report.html").read_text(encoding="utf-8")
    assert f"Project commit: {head[:10]} (branch perf-work" in page

    (root / "models.yaml").write_text((root / "models.yaml").read_text() + "\n# a change not committed\n")
    aaco_project.pytester.runpytest(*_args("--aaco-save-baseline")).assert_outcomes(passed=1)
    history = json.loads(_only(root / "baselines", "*/*.json").read_text())["history"]
    assert [run["commit_info"]["dirty"] for run in history] == [False, True]

    capsys.readouterr()
    assert cli.main(["ls", "--session-dir", str(root / "sessions")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "commit" in lines[0].split()
    assert f"{head[:10]} perf-work, dirty" in lines[2] and f"{head[:10]} perf-work" in lines[3]
    assert "dirty" not in lines[3]
    assert cli.main(["baseline", "show", "--baseline-dir", str(root / "baselines")]) == 0
    out = capsys.readouterr().out
    assert out.count(f"{head[:10]} perf-work, dirty") == 2  # the latest run in the list, run 2 in the history
    assert out.count(f"{head[:10]} perf-work") == 3
    first = sorted((root / "sessions").iterdir())[0]  # the clean session
    assert cli.main(["report", str(first)]) == 0
    assert f"project commit {head[:10]} (branch perf-work" in capsys.readouterr().out


def test_outside_git_the_commit_is_unknown_and_the_run_passes(aaco_project: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = aaco_project.pytester.path
    # in a subprocess: in process, "-W error" also turns pytest's own "module already imported, cannot be
    # rewritten" warning about this package (imported by earlier tests of the session) into an error
    result = aaco_project.pytester.runpytest_subprocess(*_args("--aaco-save-baseline", "-W", "error"), timeout=120)
    result.assert_outcomes(passed=1)
    meta = json.loads((_only(root / "sessions", "*") / "session_meta.json").read_text())
    assert meta["commit_info"]["id"] is None and "not a git repository" in meta["commit_info"]["error"]
    capsys.readouterr()
    assert cli.main(["ls", "--session-dir", str(root / "sessions")]) == 0
    row = capsys.readouterr().out.splitlines()[2].split()
    assert row[2] == "-"  # session, started, commit


def test_bundles_and_histories_without_a_commit_still_load(tmp_path: Path, result_factory: Any,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_aaco.history.fingerprint import build_fingerprint
    from pytest_aaco.history.store import load_baseline, save_run

    fp = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                           ep_name="CPUExecutionProvider", provider_options={}, iobinding="none", intra_op_threads=0)
    path = tmp_path / "store" / fp.machine_key / "x.json"
    save_run(path, "t::x", fp, result_factory([2.0] * 3), 10, False, {})  # as before: no commit_info
    loaded = load_baseline(path)
    assert loaded is not None and "commit_info" not in loaded.latest()
    assert cli.main(["baseline", "show", "--baseline-dir", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "commit" in out[0] and out[2].split()[-2] == "-"


def test_git_runs_twice_per_session_whatever_the_items(aaco_project: Any, git: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure import commit

    root = aaco_project.pytester.path
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    calls: list[tuple[str, ...]] = []
    real = commit._git

    def counted(where: Path, *args: str) -> Any:
        calls.append(args)
        return real(where, *args)

    monkeypatch.setattr(commit, "_git", counted)
    aaco_project.tests(LATENCY_TESTS)
    aaco_project.pytester.runpytest(*_args("--aaco-save-baseline")).assert_outcomes(passed=3)
    assert [args[0] for args in calls] == ["status", "show"]  # one session: read once, for the bundle and 3 saves
    assert len(list((root / "baselines").glob("*/*.json"))) == 3


LATENCY_TESTS = """
import pytest

@pytest.mark.parametrize("n", [1, 2, 3])
def test_latency(benchmark_model, n):
    benchmark_model()
"""
