"""The ``aaco`` command: exit codes (0 ok, 1 regression, 2 usage/input error), output, and no tracebacks.

Bundles and baselines are written here as JSON, in the layout pytest-aaco writes them.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_aaco import cli
from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.history.store import load_baseline
from pytest_aaco.reports.bundle import safe_file_stem

NODE_A = "tests/perf/test_models.py::test_latency[resnet50-cpu]"
NODE_B = "tests/perf/test_models.py::test_latency[bert-cpu]"
FIELDS = {"cpu_model": "AMD EPYC 7763", "cpu_cores": 64, "model_sha256": "abc", "ort_version": "1.20.0"}


def _rounds(mean_ms: float, n: int = 10, noise: float = 0.01, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    means = mean_ms * np.exp(noise * rng.standard_normal(n))
    return [{"n": 20, "mean_ms": float(m), "log_mean": math.log(m), "p50_ms": float(m), "p99_ms": float(m) * 1.2}
            for m in means]


def write_baseline(path: Path, nodeid: str, run_means_ms: list[float], fields: dict | None = None) -> Path:
    """A baseline file with one history run per entry of *run_means_ms* (10 rounds each)."""
    fields = fields or FIELDS
    history = []
    for i, mean in enumerate(run_means_ms):
        rounds = _rounds(mean, seed=100 + i)
        history.append({"timestamp": f"2025-01-{i + 1:02d}T00:00:00+00:00", "rounds": rounds, "telemetry": {},
                        "summary": {"mean_ms": float(np.mean([r["mean_ms"] for r in rounds])), "p50_ms": mean,
                                    "p99_ms": mean * 1.2}})
    data = {"schema_version": 1, "item": nodeid, "fingerprint": fields, "fingerprint_id": Fingerprint(fields).id,
            "history": history, "latest_latencies_ms": [[mean] * 5 for mean in run_means_ms[-1:]]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def item_record(nodeid: str, mean_ms: float, outcome: str = "no-baseline", seed: int = 0,
                fields: dict | None = None) -> dict:
    fields = fields or FIELDS
    label = nodeid.rsplit("[", 1)[-1].rstrip("]").replace("-", "[", 1) + "]"
    rounds = _rounds(mean_ms, seed=seed)
    return {
        "nodeid": nodeid, "model": label.split("[")[0], "provider": "cpu", "label": label,
        "result": {"summary": {"mean_ms": mean_ms, "p50_ms": mean_ms, "p99_ms": mean_ms * 1.2, "std_ms": 0.1,
                               "throughput": 1000 / mean_ms, "rounds": len(rounds)},
                   "rounds": rounds, "latencies_ms": [[r["mean_ms"]] * 4 for r in rounds],
                   "warmup_latencies_ms": [mean_ms * 2], "telemetry": {}},
        "verdict": {"outcome": outcome, "message": f"{outcome} {label}", "threshold": 0.05,
                    "fails": outcome == "regression", "fingerprint_id": Fingerprint(fields).id},
        "fingerprint": fields, "outcome": "failed" if outcome == "regression" else "passed", "error": None,
        "diagnosis": None,
    }


def write_bundle(root: Path, name: str, records: list[dict], started: str = "2025-01-01T00:00:00+00:00") -> Path:
    """A session bundle folder ``root/name`` with meta, environment and one file per item."""
    folder = root / name
    (folder / "items").mkdir(parents=True)
    counts: dict[str, int] = {}
    for record in records:
        outcome = record["verdict"]["outcome"]
        counts[outcome] = counts.get(outcome, 0) + 1
        (folder / "items" / f"{safe_file_stem(record['nodeid'])}.json").write_text(json.dumps(record))
    meta = {"schema_version": 1, "session_id": name[-8:], "started_at": started, "providers": ["cpu"],
            "bundle_finished_at": started, "summary": {"items": len(records), "verdicts": counts}}
    (folder / "session_meta.json").write_text(json.dumps(meta))
    (folder / "environment.json").write_text(json.dumps({"python": {"version": "3.11"}}))
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ---------------------------------------------------------------- help and usage


@pytest.mark.parametrize("argv", [[], ["info"], ["diff"], ["report"], ["ls"], ["baseline"], ["baseline", "show"],
                                  ["baseline", "prune"]])
def test_every_command_has_help(capsys, argv):
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0
    assert out.startswith("usage: aaco")


@pytest.mark.parametrize("argv", [[], ["bogus"], ["diff", "only-one"], ["baseline"], ["baseline", "prune"],
                                  ["baseline", "prune", "--keep", "0"], ["diff", "a", "b", "--threshold", "7"]])
def test_usage_errors_exit_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "usage: aaco" in err


# ---------------------------------------------------------------- diff


def test_diff_bundles_finds_the_regression(tmp_path, capsys):
    a = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0, seed=1),
                                                            item_record(NODE_B, 5.0, seed=2)])
    b = write_bundle(tmp_path, "20250102-000000_bbbbbbbb", [item_record(NODE_A, 13.0, seed=3),
                                                            item_record(NODE_B, 5.0, seed=4)])
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert code == 1
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("resnet50", "bert"))}
    resnet, bert = lines["resnet50[cpu]"].split(), lines["bert[cpu]"].split()
    assert resnet[-1] == "regression" and resnet[-2] == "welch" and 28 < float(resnet[3].rstrip("%")) < 32
    # one run against one run, with the 2% run-to-run term: the 95% upper bound still stays below 5%
    assert bert[-1] == "no-regression"
    assert "Benjamini-Hochberg at FDR 0.05 over 2 compared item(s)" in out
    # a larger assumed run-to-run noise widens the interval until it cannot exclude 5%
    code, out, _ = run(capsys, "diff", str(a), str(b), "--run-noise", "10%")
    assert [line.split()[-1] for line in out.splitlines() if line.startswith("bert")] == ["inconclusive"]


def test_diff_without_regression_exits_0_and_lists_unmatched_items(tmp_path, capsys):
    a = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0, seed=1),
                                                            item_record(NODE_B, 5.0, seed=2)])
    b = write_bundle(tmp_path, "20250102-000000_bbbbbbbb", [item_record(NODE_A, 9.0, seed=3)])
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert code == 0
    assert "improvement" in out and f"only in A (1): {NODE_B}" in out


def test_diff_threshold_option_changes_the_verdict(tmp_path, capsys):
    a = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0, seed=1)])
    b = write_bundle(tmp_path, "20250102-000000_bbbbbbbb", [item_record(NODE_A, 10.8, seed=3)])
    assert run(capsys, "diff", str(a), str(b))[0] == 1  # +8% against the item's 5%
    code, out, _ = run(capsys, "diff", str(a), str(b), "--threshold", "20%")
    assert code == 0 and "no-regression" in out


def test_diff_against_a_long_history_uses_the_prediction_interval(tmp_path, capsys):
    base = write_baseline(tmp_path / "baselines" / "runner" / "a.json", NODE_A, [10.0, 10.3, 9.8, 10.1, 9.9, 10.2])
    slow = write_bundle(tmp_path, "20250102-000000_bbbbbbbb", [item_record(NODE_A, 12.5, seed=5)])
    code, out, _ = run(capsys, "diff", str(base), str(slow))
    assert code == 1 and "prediction-interval" in out
    same = write_bundle(tmp_path, "20250103-000000_cccccccc", [item_record(NODE_A, 10.05, seed=6)])
    code, out, _ = run(capsys, "diff", str(base.parent), str(same))  # a folder of baselines works too
    assert code == 0 and "prediction-interval" in out


def test_diff_two_baseline_files_with_different_items_and_fingerprints(tmp_path, capsys):
    a = write_baseline(tmp_path / "a.json", NODE_A, [10.0])
    b = write_baseline(tmp_path / "b.json", NODE_B, [10.0, 10.01], fields={**FIELDS, "ort_version": "1.21.0"})
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert code == 0
    assert "fingerprint differs: ort_version" in out


@pytest.mark.parametrize("make", ["missing", "malformed", "empty-folder", "disjoint", "bad-schema"])
def test_diff_bad_input_exits_2_naming_the_file(tmp_path, capsys, make):
    good = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0)])
    if make == "missing":
        other = tmp_path / "nope"
    elif make == "malformed":
        other = tmp_path / "bad.json"
        other.write_text("{not json")
    elif make == "empty-folder":
        other = tmp_path / "empty"
        other.mkdir()
    elif make == "disjoint":
        other = write_bundle(tmp_path, "20250102-000000_bbbbbbbb", [item_record(NODE_B, 10.0)])
    else:
        other = tmp_path / "schema.json"
        other.write_text(json.dumps({"schema_version": 1, "item": NODE_A, "fingerprint": {}, "history": [{}]}))
    code, out, err = run(capsys, "diff", str(good), str(other))
    assert code == 2
    assert err.startswith("aaco: error: ")
    assert (str(other) if make != "disjoint" else "no item is in both") in err


def test_unexpected_errors_are_one_line(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("kaput")

    monkeypatch.setattr(cli, "cmd_ls", boom)
    monkeypatch.delenv("AACO_DEBUG", raising=False)
    code, _, err = run(capsys, "ls")
    assert code == 2 and err.strip() == "aaco: error: RuntimeError: kaput (set AACO_DEBUG=1 to see the traceback)"


# ---------------------------------------------------------------- report and ls


def test_report_prints_the_table_and_writes_html(tmp_path, capsys):
    bundle = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0, "regression"),
                                                                 item_record(NODE_B, 5.0, "no-regression")])
    out_html = tmp_path / "out" / "report.html"
    code, out, _ = run(capsys, "report", str(bundle), "--html", str(out_html))
    assert code == 1  # the bundle holds a regression
    assert "resnet50" in out and "regression" in out and f"HTML report: {out_html}" in out
    page = out_html.read_text(encoding="utf-8")
    assert "resnet50[cpu]" in page and "Environment" in page
    assert ("<svg" in page) == (importlib.util.find_spec("matplotlib") is not None)


def test_report_of_a_clean_bundle_exits_0_and_bad_bundle_exits_2(tmp_path, capsys):
    bundle = write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0, "no-regression")])
    assert run(capsys, "report", str(bundle))[0] == 0
    code, _, err = run(capsys, "report", str(tmp_path))
    assert code == 2 and "not a session bundle" in err and str(tmp_path) in err


def test_ls_lists_newest_first(tmp_path, capsys):
    write_bundle(tmp_path, "20250101-000000_aaaaaaaa", [item_record(NODE_A, 10.0)])
    write_bundle(tmp_path, "20250301-000000_cccccccc", [item_record(NODE_A, 10.0, "regression")])
    write_bundle(tmp_path, "20250201-000000_bbbbbbbb", [])
    code, out, _ = run(capsys, "ls", "--session-dir", str(tmp_path))
    assert code == 0
    names = [line.split()[0].rsplit("/", 1)[-1] for line in out.splitlines()[2:]]
    assert names == ["20250301-000000_cccccccc", "20250201-000000_bbbbbbbb", "20250101-000000_aaaaaaaa"]
    assert "1 regression" in out.splitlines()[2]


def test_ls_without_sessions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "ls")
    # the project root is the folder itself: no pytest configuration above it
    assert code == 0 and f"no session bundles under {tmp_path.resolve() / '.aaco' / 'sessions'}" in out
    code, _, err = run(capsys, "ls", "--session-dir", str(tmp_path / "nope"))
    assert code == 2 and "nope" in err


# ---------------------------------------------------------------- baseline show / prune


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "baselines"
    write_baseline(root / "runner-a" / "resnet.json", NODE_A, [10.0, 10.1, 9.9, 10.2])
    write_baseline(root / "runner-a" / "bert.json", NODE_B, [5.0, 5.1])
    write_baseline(root / "runner-b" / "resnet.json", NODE_A, [20.0])
    return root


def test_baseline_show_lists_and_filters(store, capsys):
    code, out, _ = run(capsys, "baseline", "show", "--baseline-dir", str(store))
    assert code == 0 and out.count("test_latency[") == 3
    code, out, _ = run(capsys, "baseline", "show", "--baseline-dir", str(store), "*bert*")
    assert code == 0 and "history of" in out and out.count("2025-01-0") == 3  # table row + 2 history rows


def test_baseline_show_reports_unreadable_files(store, capsys):
    (store / "runner-a" / "broken.json").write_text("{")
    code, out, err = run(capsys, "baseline", "show", "--baseline-dir", str(store))
    assert code == 2 and "broken.json" in err and out.count("test_latency[") == 3
    code, _, err = run(capsys, "baseline", "show", "--baseline-dir", str(store / "nope"))
    assert code == 2 and "nope" in err


def test_baseline_prune_keeps_the_newest_runs(store, capsys):
    before = (store / "runner-a" / "resnet.json").read_text()
    code, out, _ = run(capsys, "baseline", "prune", "--keep", "2", "--dry-run", "--baseline-dir", str(store))
    assert code == 0 and "would trim" in out and (store / "runner-a" / "resnet.json").read_text() == before
    code, out, _ = run(capsys, "baseline", "prune", "--keep", "2", "--baseline-dir", str(store), "resnet")
    assert code == 0 and "1 of 2 baseline file(s) trimmed to 2 run(s)" in out
    pruned = load_baseline(store / "runner-a" / "resnet.json")
    assert pruned is not None and [r["timestamp"][:10] for r in pruned.history] == ["2025-01-03", "2025-01-04"]
    assert load_baseline(store / "runner-a" / "bert.json").runs == 2  # not matched by the pattern
    assert not list(store.rglob(".*.tmp"))  # atomic writes leave no temporary files


# ---------------------------------------------------------------- info


def test_info_json_has_ort_and_the_machine_fingerprint(capsys):
    code, out, _ = run(capsys, "info", "--json", "--provider", "cpu")
    assert code == 0
    info = json.loads(out)
    assert info["onnxruntime"]["version"] and "CPUExecutionProvider" in info["onnxruntime"]["available_providers"]
    cpu = info["fingerprint"]["cpu"]
    assert cpu["fields"]["cpu_cores"] >= 1 and cpu["machine_key"]


def test_info_text_and_bad_provider(capsys):
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert out.startswith("pytest-aaco ") and "ONNX Runtime" in out and "governor:" in out
    assert "machine fingerprint for --aaco-provider=cpu" in out
    code, _, err = run(capsys, "info", "--provider", "bogus")
    assert code == 2 and "bogus" in err


@pytest.mark.parametrize(("package", "said"), [
    (None, "amdsmi not installed"),
    ("raise OSError('libamd_smi.so: cannot open shared object file: No such file or directory')\n",
     "amdsmi unusable (OSError: libamd_smi.so: cannot open shared object file: No such file or directory)"),
    ("def amdsmi_init():\n    raise RuntimeError('Error code:\\n\\t8 | AMDSMI_STATUS_INIT_ERROR')\n"
     "def amdsmi_shut_down():\n    pass\n", "amdsmi_init failed: RuntimeError: Error code:"),
])
def test_info_says_why_amdsmi_failed(package, said, capsys, tmp_path, monkeypatch):
    """Issue 40 finding 7: ``aaco info --provider migraphx`` said only that no GPU was found."""
    import sys

    from pytest_aaco.samplers import amd

    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    if package is None:
        monkeypatch.setitem(sys.modules, "amdsmi", None)  # import amdsmi raises ModuleNotFoundError
    else:
        (tmp_path / "amdsmi").mkdir()
        (tmp_path / "amdsmi" / "__init__.py").write_text(package)
        monkeypatch.syspath_prepend(str(tmp_path))
    amd.reset_amdsmi_import()
    monkeypatch.setattr(amd, "_AMDSMI_FAILURE", [])
    code, out, _ = run(capsys, "info", "--provider", "migraphx")
    assert code == 0
    assert f"note: amdsmi could not be read: {said}" in out
    code, out, _ = run(capsys, "info", "--json", "--provider", "migraphx")
    assert json.loads(out)["errors"]["amdsmi"].startswith(said)


# ---------------------------------------------------------------- baseline archived / restore (issue 12)


def test_baseline_archived_lists_and_restore_brings_back(tmp_path, capsys, result_factory):
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import baseline_path, save_run

    root = tmp_path / "baselines"
    old = Fingerprint({"cpu_model": "x", "cpu_cores": 2, "gpu_name": None, "env": {"OMP_NUM_THREADS": "1"}})
    new = Fingerprint({**old.fields, "env": {"OMP_NUM_THREADS": "2"}})
    path = baseline_path(root, old.machine_key, NODE_A)
    for seed in range(3):
        save_run(path, NODE_A, old, result_factory([10.0] * 3, seed=seed))
    save_run(path, NODE_A, new, result_factory([12.0] * 3))
    code, out, _ = run(capsys, "baseline", "archived", "--baseline-dir", str(root))
    assert code == 0 and NODE_A in out and "#1" in out and "fingerprint changed" in out
    code, out, _ = run(capsys, "baseline", "restore", "--baseline-dir", str(root), "resnet", "1")
    assert code == 0 and "restored the 3 runs history" in out
    restored = load_baseline(path)
    assert restored.runs == 3 and restored.fingerprint["env"] == {"OMP_NUM_THREADS": "1"}
    assert [len(a["history"]) for a in restored.archive] == [1]
    code, _, err = run(capsys, "baseline", "restore", "--baseline-dir", str(root), "resnet", "5")
    assert code == 2 and "no archived history #5; it has 1" in err


def test_baseline_restore_a_repaired_copy(tmp_path, capsys, result_factory):
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import baseline_path, save_run

    root = tmp_path / "baselines"
    fp = Fingerprint({"cpu_model": "x", "cpu_cores": 2, "gpu_name": None})
    path = baseline_path(root, fp.machine_key, NODE_A)
    save_run(path, NODE_A, fp, result_factory([10.0] * 3))
    save_run(path, NODE_A, fp, result_factory([10.0] * 3, seed=1))
    good = path.read_text()
    path.write_text("<<<<<<< HEAD\n" + good)  # a merge conflict
    save_run(path, NODE_A, fp, result_factory([11.0] * 3))
    [copy] = path.parent.glob("*.corrupt-*.json")
    code, out, _ = run(capsys, "baseline", "archived", "--baseline-dir", str(root))
    assert code == 0 and f"moved aside (unreadable): {copy}" in out
    code, _, err = run(capsys, "baseline", "restore", str(copy))
    assert code == 2 and "not valid JSON" in err and copy.exists()  # still broken: nothing changes
    copy.write_text(good)  # repaired by hand
    code, out, _ = run(capsys, "baseline", "restore", str(copy))
    assert code == 0 and "restored" in out and not copy.exists()
    restored = load_baseline(path)
    assert restored.runs == 2 and [len(a["history"]) for a in restored.archive] == [1]
