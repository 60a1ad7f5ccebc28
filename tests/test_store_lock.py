"""The baseline store under concurrent writers, and malformed baseline files of every kind.

Every writer of a baseline file (the gate's save, ``aaco baseline prune``, ``aaco baseline restore``)
takes the file's lock and reads the file again inside it, so nothing saved meanwhile is lost. Every
reader refuses a malformed file naming it, and the next save moves it aside and says so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import baseline_path, load_baseline, runner_priors, save_run
from pytest_aaco.jsonio import AacoFileError, read_json

ROOT = Path(__file__).resolve().parents[1]
NODE = "tests/perf/test_models.py::test_latency[tiny-cpu]"
FIELDS = {"model_sha256": "aa" * 32, "provider": "CPUExecutionProvider", "ort_version": "1.31.1",
          "cpu_model": "AMD EPYC", "cpu_cores": 2, "gpu_name": None, "intra_op_threads": 0,
          "input_shapes": {"x": [1, 64]}, "env": {}}
FP = Fingerprint(dict(FIELDS))

SAVERS, APPENDS = 4, 12  # 48 appends

# one saving process: COUNT runs, each tagged; the fingerprint fields travel as JSON
SAVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import save_run
    from pytest_aaco.measure.results import BenchmarkResult, RoundResult

    path, node, fields = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    tag, count = sys.argv[4], int(sys.argv[5])
    for n in range(count):
        lat = np.full(5, 10.0 + n)
        result = BenchmarkResult(model="m", provider="cpu", rounds=[RoundResult(0, lat, 1_000_000, 2_000_000)],
                                 warmup_iterations=1, warmup_latencies_ms=np.full(1, 10.0), session_create_ms=5.0,
                                 first_run_ms=20.0, providers_used=["CPUExecutionProvider"])
        save_run(path, node, Fingerprint(fields), result, keep=100_000, extra={"tag": f"{tag}-{n}"})
""")
# the command line, as a user runs it: aaco baseline prune in a loop until told to stop
PRUNER = textwrap.dedent("""
    import io, re, sys
    from contextlib import redirect_stdout
    from pathlib import Path
    from pytest_aaco import cli

    root, stop = sys.argv[1], Path(sys.argv[2])
    dropped = 0
    while True:
        last = stop.exists()
        out = io.StringIO()
        with redirect_stdout(out):
            rc = cli.main(["baseline", "prune", "--keep", "3", "--baseline-dir", root])
        assert rc == 0, rc
        dropped += sum(int(m) for m in re.findall(r": (\\d+) oldest run", out.getvalue()))
        if last:
            break
    print("DROPPED", dropped)
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_prune_racing_four_saving_processes_loses_no_append(tmp_path):
    """``aaco baseline prune`` in a loop while 4 processes save 12 runs each: every one of the 48 appends
    is either still in the history or among the runs prune reports it dropped (none overwritten)."""
    root = tmp_path / "baselines"
    path = baseline_path(root, FP.machine_key, NODE)
    env = _env()
    # one first run, so prune has a file to read from the start
    subprocess.run([sys.executable, "-c", SAVER, str(path), NODE, json.dumps(FIELDS), "seed", "1"], env=env,
                   check=True, timeout=120)
    stop = tmp_path / "stop"
    pruner = subprocess.Popen([sys.executable, "-c", PRUNER, str(root), str(stop)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    savers = [subprocess.Popen([sys.executable, "-c", SAVER, str(path), NODE, json.dumps(FIELDS), f"s{i}",
                                str(APPENDS)], env=env, stderr=subprocess.PIPE, text=True) for i in range(SAVERS)]
    for saver in savers:
        _, err = saver.communicate(timeout=300)
        assert saver.returncode == 0, err
    stop.write_text("")
    out, err = pruner.communicate(timeout=300)
    assert pruner.returncode == 0, err
    dropped = int(out.split("DROPPED")[-1])
    final = load_baseline(path)
    assert final is not None
    kept = [run["tag"] for run in final.history]
    appended = 1 + SAVERS * APPENDS
    assert appended >= 40
    assert len(kept) + dropped == appended, f"{appended - len(kept) - dropped} of {appended} appends lost"
    assert len(set(kept)) == len(kept)


def test_prune_and_restore_take_the_store_lock(tmp_path, result_factory, monkeypatch):
    """prune and restore hold the file's lock while they read and write (the lock every writer takes)."""
    from pytest_aaco.history import store

    path = baseline_path(tmp_path, FP.machine_key, NODE)
    for mean in (10.0, 11.0, 12.0):
        save_run(path, NODE, FP, result_factory([mean]))
    save_run(path, NODE, FP, result_factory([13.0]), reset=True)  # one archived history
    held: list[str] = []
    real_load = store.load_baseline

    def spy(target, *args):
        from filelock import FileLock, Timeout

        try:  # another holder must not get the lock while a writer reads
            FileLock(str(store.lock_path(path)), timeout=0).acquire()
            held.append("free")
        except Timeout:
            held.append("held")
        return real_load(target, *args)

    monkeypatch.setattr(store, "load_baseline", spy)
    # filelock is re-entrant within one process object only: a fresh FileLock in this thread blocks
    assert store.prune(path, keep=1) == 0  # the live history holds 1 run
    assert store.restore(path, index=0).startswith("restored the 3 runs history")
    assert store.prune(path, keep=1) == 2
    assert held and set(held) == {"held"}, held


# ------------------------------------------------------------------ malformed baseline files


def _valid(tmp_path, result_factory) -> tuple[Path, dict]:
    path = baseline_path(tmp_path / "b", FP.machine_key, NODE)
    save_run(path, NODE, FP, result_factory([10.0, 10.5]))
    return path, json.loads(path.read_text())


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


#: (name, how to damage the valid file's text) -> each must be refused by name, moved aside by a save
MALFORMED = {
    "deep nesting in a run": lambda text, data: text.replace('"telemetry": {}',
                                                             f'"telemetry": {{"x": {_nested(50_000)}}}'),
    "deep nesting at the top": lambda text, data: _nested(200_000),
    "integer 10^400": lambda text, data: text.replace('"n": 20', '"n": 1' + "0" * 400, 1),
    "integer of 5000 digits": lambda text, data: text.replace('"n": 20', '"n": ' + "9" * 5000, 1),
    "float 1e400": lambda text, data: text.replace('"n": 20', '"n": 1e400', 1),
    "huge float mean": lambda text, data: json.dumps({**data, "history": [{**data["history"][0], "summary": {
        **data["history"][0]["summary"], "mean_ms": 1e300}}]}),
    "-1e400": lambda text, data: text.replace('"n": 20', '"n": -1e400', 1),
    "NaN": lambda text, data: text.replace('"n": 20', '"n": NaN', 1),
    "Infinity": lambda text, data: text.replace('"n": 20', '"n": Infinity', 1),
    "duplicate key at the top": lambda text, data: text.replace('"history": [', '"history": [], "history": [', 1),
    "duplicate key in a round": lambda text, data: text.replace('"n": 20', '"n": 20, "n": 21', 1),
    "string for a number": lambda text, data: text.replace('"n": 20', '"n": "20"', 1),
    "string log-mean": lambda text, data: json.dumps({**data, "history": [{**data["history"][0], "rounds": [
        {**r, "log_mean": str(r["log_mean"])} for r in data["history"][0]["rounds"]]}]}),
    "bool for a number": lambda text, data: text.replace('"n": 20', '"n": true', 1),
    "null for a number": lambda text, data: text.replace('"n": 20', '"n": null', 1),
    "history: []": lambda text, data: json.dumps({**data, "history": []}),
    "history: {}": lambda text, data: json.dumps({**data, "history": {}}),
    "history: null": lambda text, data: json.dumps({**data, "history": None}),
    "a list at the top": lambda text, data: "[]",
    "a number at the top": lambda text, data: "1" + "0" * 400,
    "empty file": lambda text, data: "",
    "not UTF-8": lambda text, data: "\udcff",
    "latencies of strings": lambda text, data: json.dumps({**data, "latest_latencies_ms": [["1.0"]]}),
    "latency 10^400": lambda text, data: json.dumps({**data, "latest_latencies_ms": [[10**400]]}),
}


def _write_damaged(path: Path, text: str) -> None:
    if text == "\udcff":
        path.write_bytes(b"\xff\xfe{")
    else:
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_baseline_is_refused_by_name_and_moved_aside_on_save(tmp_path, result_factory, case):
    """Each damaged neighbour: the reader raises AacoFileError naming the file (no RecursionError,
    OverflowError or ValueError escaping); the runner's priors skip it; a save moves it aside and says so."""
    path, data = _valid(tmp_path, result_factory)
    _write_damaged(path, MALFORMED[case](path.read_text(), data))
    with pytest.raises(AacoFileError) as info:
        load_baseline(path)
    assert str(path) in str(info.value)
    runner_priors(path.parent)  # the other items of the runner folder are not taken down with it
    outcome = save_run(path, NODE, FP, result_factory([10.0]))
    assert any(str(path) in w and "moved aside" in w for w in outcome.warnings), outcome.warnings
    assert "moved aside" in outcome.note
    assert len(list(path.parent.glob("*.corrupt-*.json"))) == 1
    assert load_baseline(path).runs == 1


def test_read_json_strictness():
    """jsonio.read_json: duplicate keys, integers of more than 20 digits, infinite floats and deep nesting
    are AacoFileError naming the file; ordinary JSON (nested up to 64 levels, big finite floats, NaN that
    each reader checks itself) reads as before."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "f.json"
        for text in ('{"a": 1, "a": 1}', '[{"a": {"b": 1, "b": 2}}]', "[" + "9" * 5000 + "]", _nested(100_000),
                     "[" + "9" * 301 + "]", "[1e400]"):
            target.write_text(text)
            with pytest.raises(AacoFileError, match="f.json: not valid JSON"):
                read_json(target)
        target.write_text(json.dumps({"a": [1.5e308, -(10**19), {"b": None}], "c": _nested(60)}))
        assert read_json(target)["a"][0] == 1.5e308
        target.write_text("[NaN]")
        assert str(read_json(target)) == "[nan]"


# ------------------------------------------------------------------ end to end: one damaged file in a runner folder

TWO_MODELS = "models:\n  a:\n    path: tiny.onnx\n  b:\n    path: tiny.onnx\n"
#: damage to a real run's file: keys and values that any saved history holds
E2E_DAMAGE = {
    "deep nesting in a run": lambda text: text.replace('"summary": {', f'"deep": {_nested(50_000)}, "summary": {{', 1),
    "integer 10^400": lambda text: re.sub(r'"n": \d+', '"n": 1' + "0" * 400, text, count=1),
}


@pytest.mark.parametrize("damage", sorted(E2E_DAMAGE))
def test_one_damaged_file_names_itself_and_leaves_the_other_items_alone(aaco_project, damage):
    """One item's file damaged: that item's error names the file, the other item of the runner folder is
    gated as usual, and the next save moves the damaged file aside, saying so (it used to error every item
    of the folder without naming the file, and the save never moved it aside, so CI stayed red)."""
    aaco_project.registry(TWO_MODELS)
    assert aaco_project.run("--aaco-save-baseline").ret == 0
    files = sorted((aaco_project.pytester.path / "baselines").rglob("*test_latency-a-cpu*.json"))
    assert len(files) == 1
    damaged = files[0]
    text = damaged.read_text()
    damaged.write_text(E2E_DAMAGE[damage](text))
    assert damaged.read_text() != text

    result = aaco_project.run("-rA")
    out = result.stdout.str()
    assert str(damaged) in out, out
    assert "RecursionError" not in out and "OverflowError" not in out
    result.stdout.fnmatch_lines(["PASSED test_perf.py::test_latency[[]b-cpu[]]"])
    assert "test_latency[b-cpu] - " not in out  # b has no error line

    result = aaco_project.run("--aaco-save-baseline", "-W", "default")  # the warning is the point, not an error
    out = result.stdout.str()
    assert result.ret == 0, out
    assert f"unreadable baseline {damaged} moved aside" in out, out
    assert len(list(damaged.parent.glob("*.corrupt-*.json"))) == 1


def test_read_baseline_parses_a_file_once_while_it_is_unchanged(tmp_path, result_factory, monkeypatch):
    """history.store.read_baseline: one parse per unchanged file (the same Baseline back); a save
    (a new file) or a damaged file is parsed again; an unreadable file is refused by name on every
    read; a missing one is None; forget_parsed drops what it kept."""
    from collections import Counter

    from pytest_aaco.history import store

    path, _ = _valid(tmp_path, result_factory)
    parsed: Counter[str] = Counter()
    real = store.read_json

    def counting(target, *args, **kwargs):
        parsed[str(target)] += 1
        return real(target, *args, **kwargs)

    monkeypatch.setattr(store, "read_json", counting)
    store.forget_parsed()
    first = store.read_baseline(path)
    assert first is not None and first.runs == 1
    assert store.read_baseline(path) is first and store.runner_priors(path.parent) is not None
    assert parsed[str(path)] == 1
    save_run(path, NODE, FP, result_factory([11.0, 11.5]))  # reads the file itself, under its lock
    parsed.clear()
    assert store.read_baseline(path).runs == 2 and parsed[str(path)] == 1  # the saved file is read again
    _write_damaged(path, "{")
    for _ in range(2):
        with pytest.raises(AacoFileError, match=re.escape(str(path))):
            store.read_baseline(path)
    assert parsed[str(path)] == 2
    store.forget_parsed()
    with pytest.raises(AacoFileError):
        store.read_baseline(path)
    assert parsed[str(path)] == 3
    assert store.read_baseline(path.with_name("missing.json")) is None
