"""Issue 12: nothing lost, nothing leaked, no silent off-switch, tried through the plugin as users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TWO_MODELS = """
models:
  net+fp16:
    path: tiny.onnx
  net-fp16:
    path: tiny.onnx
"""


def _baselines(root: Path) -> list[Path]:
    return sorted(p for p in (root / "baselines").rglob("*.json") if ".corrupt-" not in p.name)


def _save(project, *extra: str) -> pytest.RunResult:
    result = project.run_subprocess("--aaco-save-baseline", *extra)
    assert result.ret == 0, result.stdout.str()
    return result


@pytest.mark.slow
@pytest.mark.parametrize("damage", [
    '{"schema_version": 1, "history": [{"rounds": [{"log_mean"',  # truncated
    '<<<<<<< HEAD\n{"schema_version": 1}\n=======\n{}\n>>>>>>> branch\n',  # a git merge conflict
    "",  # empty
    "[1, 2, 3]\n",  # a JSON list
    '{"schema_version": 1, "history": "yesterday", "fingerprint": {}}\n',  # the wrong schema
], ids=["truncated", "merge-conflict", "empty", "json-list", "wrong-schema"])
def test_a_damaged_baseline_is_moved_aside_byte_for_byte(aaco_project, damage: str) -> None:
    _save(aaco_project)
    [path] = _baselines(aaco_project.pytester.path)
    path.write_text(damage, encoding="utf-8")
    result = _save(aaco_project)
    kept = list(path.parent.glob(f"{path.stem}.corrupt-*.json"))
    assert len(kept) == 1, "the damaged file was not kept"
    assert kept[0].read_bytes() == damage.encode()
    # in the pytest-aaco section itself, and in pytest's warnings summary
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", f"  warning: unreadable baseline *{path.name} moved aside"
                                 f" to *{kept[0].name}*"])
    result.stdout.fnmatch_lines(["*warnings summary*", "*AacoBaselineWarning*moved aside*"])
    assert json.loads(path.read_text())["history"], "a new history was saved"


@pytest.mark.slow
def test_a_fingerprint_change_keeps_the_old_history(aaco_project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    _save(aaco_project)
    _save(aaco_project)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    result = _save(aaco_project)
    result.stdout.fnmatch_lines(["*fingerprint changed*OMP_NUM_THREADS*2 runs history is archived*"])
    [path] = _baselines(aaco_project.pytester.path)
    data = json.loads(path.read_text())
    assert len(data["history"]) == 1
    [archived] = data["archive"]
    assert len(archived["history"]) == 2 and archived["fingerprint"]["env"]["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # back again: the old history goes on
    _save(aaco_project)
    data = json.loads(path.read_text())
    assert len(data["history"]) == 3 and len(data["archive"][0]["history"]) == 1


def test_two_items_never_share_a_baseline_file(aaco_project) -> None:
    aaco_project.registry(TWO_MODELS)
    _save(aaco_project)
    paths = _baselines(aaco_project.pytester.path)
    assert len(paths) == 2, [p.name for p in paths]
    items = sorted(json.loads(p.read_text())["item"] for p in paths)
    assert items == ["test_perf.py::test_latency[net+fp16-cpu]", "test_perf.py::test_latency[net-fp16-cpu]"]


def test_long_ids_with_a_common_prefix_keep_their_own_histories(tmp_path: Path, result_factory) -> None:
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import baseline_path, load_baseline, save_run

    fp = Fingerprint({"cpu_model": "x", "cpu_cores": 2, "gpu_name": None})
    prefix = "tests/perf/test_models.py::test_latency[" + "m" * 200
    first, second = prefix + "-a]", prefix + "-b]"
    for _ in range(2):
        for node in (first, second):
            save_run(baseline_path(tmp_path, fp.machine_key, node), node, fp, result_factory([10.0] * 3))
    for node in (first, second):
        loaded = load_baseline(baseline_path(tmp_path, fp.machine_key, node))
        assert loaded is not None and loaded.item == node and loaded.runs == 2


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from conftest import make_result
from pytest_aaco.history.store import save_run
from pytest_aaco.history.fingerprint import Fingerprint

fp = Fingerprint({{"cpu_model": "x", "cpu_cores": 2, "gpu_name": None}})
for i in range({saves}):
    save_run(Path({path!r}), "item", fp, make_result([10.0 + i] * 3, iterations=3, seed=i), keep=100000)
"""


def test_two_writers_with_different_tmpdirs_lose_nothing(tmp_path: Path) -> None:
    """Saving is a read-append-write; two CI jobs on one host with different TMPDIRs must not lose runs."""
    path = tmp_path / "baselines" / "runner" / "item.json"
    saves = 60
    script = WRITER.format(tests=str(Path(__file__).parent), saves=saves, path=str(path))
    procs = []
    for name in ("a", "b"):
        tmpdir = tmp_path / f"tmp-{name}"
        tmpdir.mkdir()
        env = {**os.environ, "TMPDIR": str(tmpdir)}
        procs.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env))
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert len(json.loads(path.read_text())["history"]) == 2 * saves


def test_a_device_lock_that_cannot_be_taken_never_fails_the_item(aaco_project, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's lock file (0644) gave every item a PermissionError traceback; now it measures and warns.
    (Run as root here, so a directory stands in for the file no one may open.)"""
    import tempfile

    from pytest_aaco.measure import devicelock
    blocked = tmp_path / "locks"
    for stand_in in (blocked / "pytest-aaco-host.lock", blocked / "pytest-aaco-locks" / "host.lock"):
        stand_in.mkdir(parents=True)  # a path no process can open as a file (the old and the new place)
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    monkeypatch.setattr(devicelock, "LOCK_ROOT", blocked / "pytest-aaco-locks", raising=False)
    result = aaco_project.run("-W", "always::pytest_aaco.warnings.AacoWarning")  # this suite makes warnings errors
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*AacoLockWarning*could not take the device lock*measured without it*"])


def test_the_device_lock_folder_is_shared_by_every_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_aaco.measure import devicelock
    monkeypatch.setattr(devicelock, "LOCK_ROOT", tmp_path / "pytest-aaco-locks")
    with devicelock.hold_device(False, 0) as held:
        assert held
    assert (tmp_path / "pytest-aaco-locks").stat().st_mode & 0o7777 == 0o1777
    assert (tmp_path / "pytest-aaco-locks" / "host.lock").stat().st_mode & 0o777 == 0o666
    monkeypatch.setenv("TMPDIR", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(devicelock, "LOCK_ROOT", None)
    monkeypatch.delenv("AACO_LOCK_DIR", raising=False)
    assert devicelock.device_lock_path(True, 1) == Path("/tmp/pytest-aaco-locks/gpu1.lock")  # not per TMPDIR
    monkeypatch.setenv("AACO_LOCK_DIR", str(tmp_path / "shared-mount"))
    assert devicelock.device_lock_path(False, 0) == tmp_path / "shared-mount" / "host.lock"
    with devicelock.hold_device(False, 0) as held:
        assert held
    assert (tmp_path / "shared-mount").stat().st_mode & 0o7777 == 0o1777
    monkeypatch.setenv("AACO_LOCK_DIR", "")
    assert devicelock.device_lock_path(False, 0) == Path("/tmp/pytest-aaco-locks/host.lock")


@pytest.mark.parametrize("option", ["intra_op_num_threads=abc", "no_such_option=1"])
def test_an_option_the_cpu_ep_does_not_take_is_a_usage_error(aaco_project, option: str) -> None:
    """It used to be accepted, ignored by ORT, and to turn the gate off (every item fingerprint-mismatch)."""
    result = aaco_project.run_subprocess(f"--aaco-provider-option={option}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    key = option.partition("=")[0]
    result.stderr.fnmatch_lines([f"*--aaco-provider-option: CPUExecutionProvider takes no provider options*{key}*"])
    if key == "intra_op_num_threads":
        result.stderr.fnmatch_lines(["*--aaco-intra-op-threads*"])


def test_an_option_no_requested_ep_takes_names_the_valid_ones(aaco_project) -> None:
    result = aaco_project.run_subprocess("--aaco-provider=cpu,cuda", "--aaco-provider-option=no_such_option=1")
    # cuda lists its own options once a session exists: the key goes there and only there
    assert result.ret != pytest.ExitCode.USAGE_ERROR


def test_a_registry_option_the_ep_does_not_take_is_a_registry_error(aaco_project) -> None:
    aaco_project.registry("""
        models:
          tiny:
            path: tiny.onnx
            providers:
              cpu: {intra_op_num_threads: 2}
    """)
    result = aaco_project.run_subprocess()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*models.tiny.providers.cpu*takes no provider options*intra_op_num_threads*"])


class _Reported:
    """A session whose EP reports *options* from ``get_provider_options()``."""

    def __init__(self, ep: str, options: dict) -> None:
        self.reported = {ep: options}

    def get_provider_options(self) -> dict:
        return self.reported


def test_an_ep_that_lists_its_options_refuses_unknown_keys() -> None:
    from pytest_aaco.measure.inference import unknown_options
    from pytest_aaco.measure.providers import parse_provider

    spec = parse_provider("tensorrt")
    full = _Reported(spec.ep_name, {"device_id": "0", "trt_fp16_enable": "0", "trt_max_workspace_size": "1"})
    # unknown_options takes what session.get_provider_options() reported (shared with the side worker)
    assert unknown_options(spec, {"device_id": "0", "bogus": "1"}, full.get_provider_options()) == ["bogus"]
    echo = _Reported(spec.ep_name, {"device_id": "0", "bogus": "1"})  # only echoes the request: cannot say
    assert unknown_options(spec, {"device_id": "0", "bogus": "1"}, echo.get_provider_options()) == []
    assert unknown_options(parse_provider("cpu"), {"x": "1"},
                           _Reported("CPUExecutionProvider", {"y": "1"}).get_provider_options()) == []


def test_global_options_go_to_the_eps_that_take_them() -> None:
    from pytest_aaco.measure.providers import ProviderError, check_options, options_for, parse_provider

    cpu, cuda = parse_provider("cpu"), parse_provider("cuda")
    check_options([cpu, cuda], ["cudnn_conv_algo_search"])
    assert options_for(cpu, {"cudnn_conv_algo_search": "HEURISTIC"}) == {}
    assert options_for(cuda, {"cudnn_conv_algo_search": "HEURISTIC"}) == {"cudnn_conv_algo_search": "HEURISTIC"}
    with pytest.raises(ProviderError, match="CPUExecutionProvider takes no provider options.*got api_key$"):
        check_options([cpu], ["api_key"])


# ---------------------------------------------------------------- failures stay in the report (findings 6, 7)


TWO_ITEMS = """
models:
  first:
    path: tiny.onnx
  second:
    path: tiny.onnx
"""
BROKEN_HOOK = """
def pytest_aaco_fingerprint(config, item, fields):
    if "first" in item.nodeid:
        raise OSError(28, "No space left on device")
"""


def _junit_cases(path: Path) -> dict[str, str]:
    """``{test name: outcome}`` of a JUnit XML file (``passed``, ``failure``, ``error`` or ``skipped``)."""
    import xml.etree.ElementTree as ET

    cases = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        cases[case.get("name", "")] = kinds[0] if kinds else "passed"
    return cases


def _bundle_items(root: Path) -> dict[str, dict]:
    [session] = list((root / ".aaco" / "sessions").iterdir())
    items = {}
    for path in (session / "items").glob("*.json"):
        data = json.loads(path.read_text())
        items[data["nodeid"]] = data
    return items


def test_an_exception_in_the_plugins_item_work_is_an_error_row_and_the_session_goes_on(aaco_project) -> None:
    aaco_project.registry(TWO_ITEMS)
    aaco_project.pytester.makeconftest(BROKEN_HOOK)
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, "--aaco-junit=perf.xml", "--junitxml=pytest.xml",
                                                        timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "Traceback" not in out and "site-packages" not in out, "a deep traceback reached the user"
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "first*cpu*error*", "second*cpu*"])
    result.stdout.fnmatch_lines(["*first*pytest-aaco could not judge the measurement: No space left on device;*"])
    root = aaco_project.pytester.path
    items = _bundle_items(root)
    assert sorted(items) == ["test_perf.py::test_latency[first-cpu]", "test_perf.py::test_latency[second-cpu]"]
    first = items["test_perf.py::test_latency[first-cpu]"]
    assert first["outcome"] == "failed" and first["verdict"]["outcome"] == "error"
    assert first["result"]["rounds"], "the measurement is kept in the error row"
    assert "No space left on device" in first["error"]
    # pytest-aaco's JUnit says error; pytest's own says failure (the call phase failed)
    for junit, kind in (("perf.xml", "error"), ("pytest.xml", "failure")):
        cases = {name.replace("test_latency", ""): outcome for name, outcome in _junit_cases(root / junit).items()}
        assert [cases[k] for k in sorted(cases)] == [kind, "passed"], (junit, cases)


def test_a_session_folder_that_is_a_file_is_an_error_not_a_crash(aaco_project) -> None:
    (aaco_project.pytester.path / "sessions").write_text("a file where the bundle folder should be")
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, "--aaco-session-dir=sessions", timeout=120)
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "tiny*cpu*"])
    result.stdout.fnmatch_lines(["*sessions*"])


USER_ASSERTION = """
def test_latency(benchmark_model):
    result = benchmark_model()
    assert result.p99_ms < 0, "my own latency budget"
"""


@pytest.mark.slow
def test_a_users_failing_assertion_still_records_judges_and_saves(aaco_project) -> None:
    aaco_project.tests(USER_ASSERTION)
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, "--aaco-save-baseline", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*my own latency budget*"])
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "tiny*cpu*saved*"])
    assert _baselines(aaco_project.pytester.path), "the valid measurement was not saved"
    [record] = _bundle_items(aaco_project.pytester.path).values()
    assert record["result"] and record["outcome"] == "failed"
    gated = aaco_project.pytester.runpytest_subprocess(*args, timeout=120)  # judged against what was saved
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines(["*= pytest-aaco results =*", "tiny*cpu*%*"])


CRASHING_WORKER = """
import os

def test_latency(benchmark_model):
    benchmark_model()

def test_zz_crash():
    os._exit(3)
"""


@pytest.mark.slow
def test_under_xdist_a_crashed_worker_keeps_the_items_it_finished(aaco_project) -> None:
    aaco_project.registry(TWO_ITEMS)
    aaco_project.tests(CRASHING_WORKER)
    result = aaco_project.run_subprocess("-n", "1", "-p", "xdist", timeout=180)
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*"])
    out = result.stdout.str()
    table = out[out.index("pytest-aaco results"):]
    assert "first" in table and "second" in table, table


@pytest.mark.parametrize("save", [False, True], ids=["gate", "save"])
def test_a_file_in_place_of_the_baseline_folder_is_an_error_row(aaco_project, save: bool) -> None:
    """It used to read as 'no baseline' with exit 0 (gating), or a deep traceback (saving)."""
    (aaco_project.pytester.path / "blocked").write_text("not a folder")
    extra = ["--aaco-save-baseline"] if save else []
    result = aaco_project.run_subprocess("--aaco-baseline-dir=blocked", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "tiny*cpu*error*",
                                 "*blocked is a file, but pytest-aaco keeps baselines in a folder there*"])


BROKEN_MEASUREMENT = """
from pytest_aaco import benchmark

measure = benchmark.BenchmarkRun.run_with

def broken(self, settings):
    if self.model.name == "first":
        raise OSError(5, "Input/output error")
    return measure(self, settings)

benchmark.BenchmarkRun.run_with = broken
"""


def test_an_os_error_mid_measurement_is_an_error_row(aaco_project) -> None:
    aaco_project.registry(TWO_ITEMS)
    aaco_project.pytester.makeconftest(BROKEN_MEASUREMENT)
    args = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(*args, "--aaco-junit=perf.xml", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "first*cpu*error*", "second*cpu*no-baseline*",
                                 "*could not measure first[[]cpu[]]: Input/output error; check that path*"])
    items = _bundle_items(aaco_project.pytester.path)
    assert items["test_perf.py::test_latency[first-cpu]"]["verdict"]["outcome"] == "error"
    assert _junit_cases(aaco_project.pytester.path / "perf.xml")["test_latency[first-cpu]"] == "error"


READ_ONLY_BASELINES = """
from pytest_aaco.history import store as baseline
def refuse(path, data, strict=False):
    raise PermissionError(13, "Permission denied", str(path))


baseline.atomic_write_json = refuse  # what a read-only baseline folder answers (this suite may run as root)
"""


def test_a_baseline_folder_that_cannot_be_written_is_an_error_row(aaco_project) -> None:
    aaco_project.registry(TWO_ITEMS)
    aaco_project.pytester.makeconftest(READ_ONLY_BASELINES)
    result = aaco_project.run_subprocess("--aaco-save-baseline")
    result.assert_outcomes(failed=2)
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*= pytest-aaco results =*", "first*cpu*error*", "second*cpu*error*",
                                 "*cannot save the baseline (Permission denied); make * writable*"])
