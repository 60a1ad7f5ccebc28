"""pytest-aaco under pytest-xdist (``-n 2``), as the README promises: every item judged and
reported once, baselines written by the workers, one merged session bundle, and LOND's levels
counted over the whole session.

Each run is a fresh process (``runpytest_subprocess``): xdist starts its own workers. The
slowdown is made large (extra MatMul work, hundreds of times slower than the tiny model) and the
threshold wide (90%), so neither outcome can flip on a loaded machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("xdist")

#: four benchmark items: two models x two test functions; "fast" never changes, "slowed" may
REGISTRY = """
models:
  fast:
    path: tiny.onnx
  slowed:
    path: tiny.onnx
"""
SLOWER = REGISTRY + "    extra_work: {matmuls: 40, size: 256}\n"

TESTS = """
def test_latency(benchmark_model):
    assert benchmark_model().measure_iterations > 0


def test_latency_again(benchmark_model):
    assert benchmark_model().measure_iterations > 0
"""

#: extra_work changes the model file, hence its hash: pin it so the slowed model is gated
PIN_MODEL_HASH = """
def pytest_aaco_fingerprint(config, item, fields):
    fields["model_sha256"] = "pinned-for-the-xdist-tests"
"""

FDR = 0.05
ITEMS = 4
ARGS = ("-n", "2", "-p", "no:cacheprovider", "--aaco-models=models.yaml", "--aaco-warmup=2", "--aaco-rounds=3",
        "--aaco-iterations=5", "--aaco-max-contention=off", "--aaco-threshold=90%", "--aaco-intra-op-threads=1",
        "--aaco-memory-slack=100000", "--aaco-session-dir=sessions", f"--aaco-fdr={FDR}",
        "--aaco-reference=none")


def _run(project, *extra: str) -> pytest.RunResult:
    return project.pytester.runpytest_subprocess(*ARGS, *extra, timeout=300)


def _bundles(root: Path) -> list[Path]:
    return sorted(p for p in (root / "sessions").iterdir() if p.is_dir())


def _items(bundle: Path) -> dict[str, dict]:
    items = [json.loads(p.read_text()) for p in (bundle / "items").glob("*.json")]
    return {item["nodeid"]: item for item in items}


@pytest.fixture
def project(aaco_project):
    aaco_project.registry(REGISTRY)
    aaco_project.tests(TESTS)
    aaco_project.pytester.makeconftest(PIN_MODEL_HASH)
    return aaco_project


@pytest.mark.slow
def test_two_workers_save_gate_and_merge_one_bundle(project):
    root = project.pytester.path

    # 1. record a baseline: each worker writes its own items' files
    saved = _run(project, "--aaco-save-baseline")
    assert saved.ret == 0, saved.stdout.str()
    saved.assert_outcomes(passed=ITEMS)
    files = sorted(p.name for p in root.glob("baselines/*/*.json"))
    assert len(files) == ITEMS and len(set(files)) == ITEMS

    # 2. nothing changed: every item passes, the controller's table lists each item once
    gated = _run(project)
    assert gated.ret == 0, gated.stdout.str()
    gated.assert_outcomes(passed=ITEMS)
    table = [line for line in gated.outlines if line.startswith(("fast ", "slowed "))]
    # two tests share a model there: the table adds the test's name to tell them apart
    assert len(table) == ITEMS and all("cpu" in line.split()[1:3] for line in table)
    gated.stdout.fnmatch_lines([f"false-alarm control: LOND at FDR {FDR:g} over {ITEMS} benchmark items;"
                                f" {ITEMS} gated, 0 regression(s)"])

    # one merged bundle per session: the workers wrote their items into the controller's folder
    bundles = _bundles(root)
    assert len(bundles) == 2
    latest = bundles[-1]
    items = _items(latest)
    assert len(items) == ITEMS
    assert {item["verdict"]["outcome"] for item in items.values()} <= {"no-regression", "inconclusive"}
    meta = json.loads((latest / "session_meta.json").read_text())
    assert meta["summary"]["items"] == ITEMS and sum(meta["summary"]["verdicts"].values()) == ITEMS
    assert meta["items_written"] == ITEMS and (latest / "environment.json").is_file()
    assert meta["summary"]["fdr_control"]["m"] == ITEMS and meta["summary"]["fdr_control"]["tests"] == ITEMS


@pytest.mark.slow
def test_lond_levels_count_the_whole_session_under_xdist(project):
    """Each worker tests at ``q (D_worker + 1) / m`` with m the session's benchmark items (not the
    worker's share) and D_worker <= D_session, so every level is at most what one LOND over the
    whole session would allow: the condition of LOND's FDR bound (Javanmard & Montanari 2018)."""
    root = project.pytester.path
    assert _run(project, "--aaco-save-baseline").ret == 0
    project.registry(SLOWER)
    result = _run(project)
    result.assert_outcomes(passed=2, failed=2)
    items = _items(_bundles(root)[-1])
    assert len(items) == ITEMS
    for nodeid, item in items.items():
        assert (item["verdict"]["outcome"] == "regression") == ("[slowed-" in nodeid), (nodeid, item["verdict"])
    regressions = 2
    levels = [item["verdict"]["level"] for item in items.values()]
    allowed = {round(FDR * (k + 1) / ITEMS, 12) for k in range(regressions + 1)}
    assert {round(level, 12) for level in levels} <= allowed, levels
    assert min(levels) == pytest.approx(FDR / ITEMS)  # m is the session's 4 items, not a worker's 2
    result.stdout.fnmatch_lines([f"false-alarm control: LOND at FDR {FDR:g} over {ITEMS} benchmark items;"
                                 f" {ITEMS} gated, 2 regression(s)"])


def test_merge_lond_sums_the_workers_tests_and_discoveries():
    from pytest_aaco.xdist import merge_lond

    assert merge_lond([]) is None
    one = {"method": "LOND", "alpha": 0.05, "m": 4, "tests": 2, "discoveries": 1}
    assert merge_lond([one]) is one
    merged = merge_lond([one, {"method": "LOND", "alpha": 0.05, "m": 4, "tests": 2, "discoveries": 0}])
    assert merged == {"method": "LOND", "alpha": 0.05, "m": 4, "tests": 4, "discoveries": 1, "workers": 2}


def test_the_xdist_hooks_live_in_their_own_plugin_object(pytester):
    pytester.makepyfile(test_a="def test_a(): pass")
    pytester.makeconftest(
        "def pytest_collection_modifyitems(config):\n"
        "    import pytest_aaco.xdist as x\n"
        "    bridge = config.pluginmanager.get_plugin(x.XDIST_PLUGIN_NAME)\n"
        "    assert isinstance(bridge, x.XdistBridge)\n"
        "    assert bridge is config.pluginmanager.get_plugin('aaco-plugin').xdist\n")
    # an --aaco-* option: the run uses the plugin, so its session (and the bridge) start at configure
    pytester.runpytest("-p", "no:cacheprovider", "--aaco-warmup=2").assert_outcomes(passed=1)


def test_a_run_that_does_not_use_the_plugin_registers_neither_object(pytester):
    pytester.makepyfile(test_a="def test_a(): pass")
    pytester.makeconftest(
        "def pytest_unconfigure(config):\n"
        "    assert config.pluginmanager.get_plugin('aaco-xdist') is None\n"
        "    assert config.pluginmanager.get_plugin('aaco-plugin') is None\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.ret == 0


@pytest.mark.slow
def test_an_unwritable_session_dir_is_a_warning_under_xdist(project):
    """The controller opens the bundle for its workers: a folder that cannot be made is one warning
    naming it and the option, never an INTERNALERROR, and the items are still judged."""
    (project.pytester.path / "blocker").write_text("a file, not a folder", encoding="utf-8")
    result = project.pytester.runpytest_subprocess(*ARGS, "--aaco-session-dir=blocker/sessions", timeout=300)
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert result.ret == 0, text
    assert "blocker/sessions" in text and "--aaco-session-dir" in text
    assert text.count("the session goes on without a bundle") == 1


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


def test_a_distributed_run_without_aaco_items_writes_nothing(pytester):
    """The controller opens the session bundle for its workers before it knows whether any item
    measures: when none does, the run leaves no ``.aaco`` folder behind."""
    pytester.makepyfile(test_a="def test_a(): pass\n\ndef test_b(): pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=2)
    assert not (pytester.path / ".aaco").exists(), _tree(pytester.path)


def test_an_existing_aaco_folder_keeps_its_content_and_gets_no_empty_bundle(pytester):
    """Only what the run made goes: a ``.aaco`` that existed (here with a baseline-like file in it)
    and its ``sessions`` folder stay, without an empty bundle folder."""
    pytester.makepyfile(test_a="def test_a(): pass\n\ndef test_b(): pass\n")
    sessions = pytester.path / ".aaco" / "sessions"
    sessions.mkdir(parents=True)
    (pytester.path / ".aaco" / "keep.txt").write_text("mine", encoding="utf-8")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=2)
    assert sessions.is_dir() and list(sessions.iterdir()) == []
    assert (pytester.path / ".aaco" / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_a_run_with_an_aaco_option_but_no_aaco_item_writes_nothing(pytester):
    pytester.makepyfile(test_a="def test_a(): pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--aaco-warmup=2", timeout=300)
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".aaco").exists()


def test_remove_empty_bundle_leaves_a_bundle_with_items(tmp_path):
    from pytest_aaco.xdist import remove_empty_bundle

    bundle = tmp_path / ".aaco" / "sessions" / "20261127-120000_0123abcd"
    (bundle / "items").mkdir(parents=True)
    (bundle / "items" / "a.json").write_text("{}", encoding="utf-8")
    remove_empty_bundle(bundle, [tmp_path / ".aaco" / "sessions", tmp_path / ".aaco"])
    assert (bundle / "items" / "a.json").exists()
    (bundle / "items" / "a.json").unlink()
    (tmp_path / ".aaco" / ".gitignore").write_text("# Created by pytest-aaco automatically\n*\n", encoding="utf-8")
    remove_empty_bundle(bundle, [tmp_path / ".aaco" / "sessions", tmp_path / ".aaco"])
    assert not (tmp_path / ".aaco").exists()
