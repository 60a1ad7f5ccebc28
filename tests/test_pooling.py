"""Pooled run-to-run variance and physical-GPU offsets (pytest_aaco.verdict.pooling), against
scipy.stats and by simulation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps
from verdicts import verdict

from pytest_aaco.verdict import pooling, stats


def _items(rng: np.random.Generator, n_items: int, runs: int, sd: float, gpus: list[str] | None = None,
           offsets: dict[str, float] | None = None) -> list[list[tuple[str | None, float]]]:
    items = []
    for i in range(n_items):
        mu = rng.normal(0, 1) + i
        runs_of = []
        for _ in range(runs):
            g = str(rng.choice(gpus)) if gpus else None
            runs_of.append((g, mu + (offsets or {}).get(g, 0.0) + rng.normal(0, sd)))  # type: ignore[arg-type]
        items.append(runs_of)
    return items


def test_prior_of_a_common_variance_recovers_it_and_caps_d0() -> None:
    rng = np.random.default_rng(1)
    sd = 0.001
    pool = pooling.fit_pool(_items(rng, 40, 3, sd))
    assert pool.prior is not None
    assert pool.prior.s0_sq == pytest.approx(sd**2, rel=0.35)
    assert pool.prior.d0 <= 40  # capped at half the df it was fitted on (40 items x 2 df)


def test_prior_fit_matches_the_chi_square_model() -> None:
    """Variances drawn as s0² d0 / chi²_d0 (the prior) times chi²_d / d (sampling): the moment
    estimator finds d0 and s0² near the truth (Smyth 2004, section 6.2)."""
    rng = np.random.default_rng(7)
    d0, s0_sq, d = 8.0, 4e-6, 2
    true_var = s0_sq * d0 / sps.chi2.rvs(d0, size=4000, random_state=rng)
    sample = true_var * sps.chi2.rvs(d, size=4000, random_state=rng) / d
    prior = stats.fit_variance_prior(sample, np.full(4000, d))
    assert prior is not None
    assert prior.d0 == pytest.approx(d0, rel=0.3)
    assert prior.s0_sq == pytest.approx(s0_sq, rel=0.15)


def test_pooled_test_is_the_moderated_t_of_scipy() -> None:
    prior = stats.VariancePrior(s0_sq=1e-6, d0=6.0, items=5)
    pool = pooling.Pool(prior, pooling.GpuOffsets())
    history = [(None, 0.010), (None, 0.012)]
    current = [0.014, 0.016]
    comp = pooling.pooled_test(current, history, None, pool)
    assert comp is not None
    s2 = float(np.var([0.010, 0.012], ddof=1))
    post = (6 * 1e-6 + 1 * s2) / 7
    se = math.sqrt(post * 1.5)
    t = (0.015 - 0.011) / se
    assert comp.df == 7
    assert comp.se == pytest.approx(se)
    assert comp.p_slower == pytest.approx(sps.t.sf(t, 7))
    lo, hi = comp.ci(0.95)
    assert math.log(hi) == pytest.approx(0.004 + sps.t.ppf(0.975, 7) * se)
    assert comp.mde(0.01) == pytest.approx(math.expm1((sps.t.ppf(0.99, 7) + sps.t.ppf(0.8, 7)) * se))


def test_no_prior_or_one_run_leaves_the_old_test() -> None:
    empty = pooling.Pool(None, pooling.GpuOffsets())
    assert pooling.pooled_test([0.0], [(None, 0.0), (None, 0.1)], None, empty) is None
    pool = pooling.Pool(stats.VariancePrior(1e-6, 4, 3), pooling.GpuOffsets())
    assert pooling.pooled_test([0.0], [(None, 0.0)], None, pool) is None
    assert pooling.fit_pool(_items(np.random.default_rng(0), 2, 3, 0.01)).prior is None


@pytest.mark.parametrize("runs", [2, 3, 5, 10])
def test_false_alarm_rate_is_nominal_by_simulation(runs: int) -> None:
    """Items with different true variances (drawn from the prior the model assumes), 6 items per
    folder: the one-sided pooled test at level 0.05 rejects an unchanged item about 5% of the time."""
    rng = np.random.default_rng(100 + runs)
    alpha, rejected, trials = 0.05, 0, 0
    for _ in range(400):
        sds = np.sqrt(1e-6 * 10 / sps.chi2.rvs(10, size=6, random_state=rng))
        items = [[(None, float(rng.normal(0, s))) for _ in range(runs)] for s in sds]
        pool = pooling.fit_pool(items)
        for item, s in zip(items, sds, strict=True):
            comp = pooling.pooled_test([rng.normal(0, s)], item, None, pool)
            assert comp is not None
            trials += 1
            rejected += comp.p_slower <= alpha
    rate = rejected / trials
    assert 0.025 <= rate <= 0.075, rate


def test_gpu_offsets_are_fitted_shrunk_and_taken_out() -> None:
    rng = np.random.default_rng(3)
    offsets = {"GPU-a": 0.03, "GPU-b": -0.03}
    items = _items(rng, 6, 6, 0.001, gpus=["GPU-a", "GPU-b"], offsets=offsets)
    fitted = pooling.fit_gpu_offsets(items)
    assert fitted.items >= 5  # items whose runs all landed on one GPU do not inform the offsets
    # identified up to a constant (the run-weighted mean is 0), which the items' means absorb
    assert fitted.offsets["GPU-a"] - fitted.offsets["GPU-b"] == pytest.approx(0.06, abs=0.002)
    pool = pooling.fit_pool(items)
    assert pool.prior is not None and math.sqrt(pool.prior.s0_sq) < 0.002  # the offset is not in the variance
    history = [(g, 1.0 + offsets[g] + rng.normal(0, 0.001)) for g in ["GPU-a", "GPU-b"]]
    comp = pooling.pooled_test([1.0 + offsets["GPU-b"]], history, "GPU-b", pool)
    assert comp is not None and abs(comp.estimate) < 0.003  # unbiased on the other GPU
    assert comp.mde(0.01) < 0.01  # and not widened by the 6% gap between the GPUs
    assert pooling.fit_gpu_offsets(_items(rng, 6, 4, 0.001, gpus=["GPU-a"])).offsets == {}


def test_equal_gpus_get_offsets_near_zero() -> None:
    rng = np.random.default_rng(5)
    fitted = pooling.fit_gpu_offsets(_items(rng, 6, 4, 0.001, gpus=["GPU-a", "GPU-b"]))
    assert all(abs(v) < 0.001 for v in fitted.offsets.values())


def _run(device: list[float], gpu: str, rounds: list[float]) -> dict[str, object]:
    return {"timestamp": "2026-11-27T00:00:00Z", "rounds": [{"log_mean": r} for r in rounds],
            "device_time": {"log_means": device}, "gpu": {"uuid": gpu}}


def test_folder_pool_reads_baseline_files_and_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(9)
    for i in range(4):
        runs = []
        for j in range(4):
            gpu = "GPU-aaaa" if j % 2 else "GPU-bbbb"
            shift = 0.02 if gpu == "GPU-aaaa" else -0.02
            runs.append({"gpu": gpu, "dev": [i + shift + rng.normal(0, 1e-3)] * 3,
                         "wall": [i + rng.normal(0, 1e-2)] * 3})
        history = [_run(r["dev"], r["gpu"], r["wall"]) for r in runs]  # type: ignore[arg-type]
        (tmp_path / f"item{i}.json").write_text(json.dumps({"history": history}))
    items = [pooling.run_means(json.loads(p.read_text())["history"], pooling.DEVICE, pooling.RAW)
             for p in sorted(tmp_path.glob("*.json"))]
    assert [len(i) for i in items] == [4, 4, 4, 4]
    pool = pooling.fit_pool(items)
    offsets = pool.offsets.offsets
    assert offsets["GPU-aaaa"] - offsets["GPU-bbbb"] == pytest.approx(0.04, abs=0.002)
    with pytest.raises(ValueError, match="unknown pooled series"):
        pooling.run_means([], "cpu", pooling.RAW)
    odd = [{"rounds": [{"log_mean": None}]}, {"rounds": [{"log_mean": "x"}]}, {"rounds": []}, {"device_time": {}}]
    assert pooling.run_means(odd, pooling.WALL, pooling.RAW) == []  # records without figures are skipped
    assert pooling.run_means(odd, pooling.DEVICE, pooling.RAW) == []


def test_a_gpu_of_unknown_offset_is_left_to_the_unpooled_test() -> None:
    pool = pooling.Pool(stats.VariancePrior(1e-6, 4, 3), pooling.GpuOffsets())
    history = [("GPU-a", 0.0), ("GPU-a", 0.001)]
    assert pooling.pooled_test([0.01], history, "GPU-b", pool) is None
    assert pooling.pooled_test([0.01], history, "GPU-a", pool) is not None
    assert pooling.pooled_test([0.01], history, None, pool) is not None  # no GPU recorded (CPU)


def test_baseline_show_and_the_html_report_show_each_gpu_offset(tmp_path, result_factory, capsys) -> None:  # type: ignore[no-untyped-def]
    """Three items saved alternately on two GPUs, the second 6% slower in wall time: `aaco baseline
    show` prints each GPU's fitted offset (6% apart), and a pooled device-time record's rows name
    this GPU's offset."""
    from pytest_aaco import cli
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import save_run

    fp = Fingerprint({"model_sha256": "aa" * 32, "provider": "CUDAExecutionProvider", "cpu_model": "x", "cpu_cores": 2,
                      "gpu_name": "NVIDIA H200", "input_shapes": {"x": [1, 64]}, "env": {}})
    folder = tmp_path / "runner"
    folder.mkdir()
    for item in range(3):
        node = f"test_perf.py::test_latency[m{item}-cuda]"
        for run in range(4):
            gpu = "GPU-bbbbbbbb" if run % 2 else "GPU-aaaaaaaa"
            mean = (10.0 + item) * (1.06 if gpu == "GPU-bbbbbbbb" else 1.0)
            save_run(folder / f"m{item}.json", node, fp, result_factory([mean] * 5, noise=0.001, seed=run + 10 * item),
                     extra={"gpu": {"uuid": gpu, "pci_bus_id": None, "name": "NVIDIA H200"}})
    assert cli.main(["baseline", "show", "--baseline-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split(": ")[1]: line for line in out.splitlines() if line.startswith("GPU offset in runner:")}
    assert sorted(lines) == ["GPU-aaaaaaaa", "GPU-bbbbbbbb"]
    a = float(lines["GPU-aaaaaaaa"].split("wall time ")[1].split("%")[0])
    b = float(lines["GPU-bbbbbbbb"].split("wall time ")[1].split("%")[0])
    assert b - a == pytest.approx(6.0, abs=0.5)
    assert "(6 runs)" in lines["GPU-aaaaaaaa"]
    rows = dict(pooling.pooled_pairs({"pooled": {"s0_sq": 1e-6, "d0": 4.0, "items": 6, "gpu": "GPU-bbbbbbbb",
                                                 "gpu_offset": math.log(1.03), "gpus": 2}}))
    assert rows["device time: offset of this GPU (fitted, taken out)"] == "+3.00% (GPU-bbbbbbbb)"
    assert rows["device time: run-to-run sd pooled over the runner's items"] == "0.100% (6 items, 4 prior df)"
    assert pooling.pooled_pairs({"ratio": 1.0}) == []


POOLED_REGISTRY = """
models:
  a:
    path: tiny.onnx
    iterations: 50
  b:
    path: tiny.onnx
    iterations: 50
  c:
    path: tiny.onnx
    iterations: 50
"""


def _two_saved_runs(project, monkeypatch):  # type: ignore[no-untyped-def]
    """The three items of POOLED_REGISTRY with a fake kernel tracer, two baseline runs saved each."""
    from tests.test_device_time_stored import ARGS, FAKE_CONFTEST, _records

    project.registry(POOLED_REGISTRY)
    project.pytester.makeconftest(FAKE_CONFTEST)
    monkeypatch.setenv("FAKE_DEVICE_MS", "0.818")
    for seed in (0, 1):
        monkeypatch.setenv("FAKE_SEED", str(seed))
        assert project.run("--aaco-save-baseline", *ARGS).ret == 0
    _records(project)
    return project


@pytest.mark.slow
def test_two_saved_runs_gate_device_time_sharply_with_the_pooled_variance(aaco_project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Three items, two saved runs each, a fake kernel tracer (run-to-run sd about 0.1%): the
    device-time verdicts use the pooled variance, decide `no regression` with an MDE under 1%
    (before pooling: 7.8-7.9% with 3 runs), and +2% kernel time fails every item."""
    from tests.test_device_time_stored import ARGS, _records

    project = _two_saved_runs(aaco_project, monkeypatch)
    monkeypatch.setenv("FAKE_SEED", "10")
    project.run(*ARGS)
    records = _records(project)
    assert len(records) == 3
    for record in records:
        dev = record["verdict"]["device_time"]
        assert dev["method"] == pooling.METHOD and dev["runs"] == 2 and dev["pooled"]["items"] == 3
        assert dev["outcome"] == "no-regression" and dev["mde"] < 0.01, dev
    monkeypatch.setenv("FAKE_DEVICE_MS", str(0.818 * 1.02))
    monkeypatch.setenv("FAKE_SEED", "11")
    result = project.run(*ARGS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    verdicts = [r["verdict"] for r in _records(project)]
    assert [v["device_time"]["outcome"] for v in verdicts] == ["regression"] * 3
    assert all(v["fails"] and v["confirmed"] for v in verdicts)


def test_the_html_verdict_table_shows_the_pooled_variance_and_the_gpu_offset() -> None:
    from pytest_aaco.records.base import Outcome
    from pytest_aaco.reports.html import verdict_table

    v = verdict(Outcome.NO_REGRESSION, "m[cuda]", ratio=1.0, ci_low=0.99, ci_high=1.01, mde=0.2,
                device_time={"ratio": 1.0, "pooled": {"s0_sq": 4e-6, "d0": 3.0, "items": 5, "gpu": "GPU-1234<b>",
                                              "gpu_offset": math.log(0.99), "gpus": 2}})
    page = verdict_table(v)
    assert "0.200% (5 items, 3 prior df)" in page and "run-to-run sd pooled over the runner" in page
    assert "-1.00% (GPU-1234&lt;b&gt;)" in page  # escaped


#: every verdict record to records.jsonl (the hook the plugin calls per judged item)
RECORDS_CONFTEST = """
import json


def pytest_aaco_verdict(config, item, record):
    with open("records.jsonl", "a") as out:
        out.write(json.dumps(record) + "\\n")
"""


@pytest.mark.slow
def test_wall_time_of_a_two_run_history_uses_the_pooled_variance(aaco_project) -> None:  # type: ignore[no-untyped-def]
    """Three items, two saved runs, no reference workload (raw wall time): the gate's method is the
    pooled prediction interval (before: Welch on rounds with the 2% run-to-run prior), and its
    report note names it."""
    project = aaco_project
    project.registry(POOLED_REGISTRY)
    project.pytester.makeconftest(RECORDS_CONFTEST)
    args = ("--aaco-reference=none", "--aaco-intra-op-threads=1", "--aaco-threshold=99%", "--aaco-memory-slack=100000")
    for _ in range(2):
        assert project.run("--aaco-save-baseline", *args).ret == 0
    (project.pytester.path / "records.jsonl").unlink()
    result = project.run(*args)
    assert result.ret == 0, result.stdout.str()
    records = [json.loads(line) for line in (project.pytester.path / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3
    methods = {r["verdict"]["method"] for r in records if r.get("verdict")}
    assert methods == {pooling.METHOD}, methods
    notes = " ".join(n for r in records for n in r["verdict"]["notes"])
    assert "run-to-run variance pooled over this runner's items (moderated t, Smyth 2004)" in notes


@pytest.mark.slow
def test_a_gating_session_parses_each_baseline_file_once(aaco_project, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Three items in one runner folder, gated on device time (raw and against the reference
    workload) and wall time, with the HTML report: the item's own gate, the runner's variance priors,
    each pooled series and the report all read the same files, and each is parsed once."""
    from collections import Counter
    from pathlib import Path

    from pytest_aaco.history import store
    from tests.test_device_time_stored import ARGS, _records

    project = _two_saved_runs(aaco_project, monkeypatch)
    parsed: Counter[str] = Counter()
    real = store.read_json

    def counting(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        parsed[str(Path(path).resolve())] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(store, "read_json", counting)
    monkeypatch.setenv("FAKE_SEED", "10")
    result = project.run(*ARGS, "--aaco-html=report.html")
    assert result.ret == 0, result.stdout.str()
    records = _records(project)
    assert len(records) == 3
    for record in records:  # the pooled tests ran (they read the folder), as in the tests above
        assert record["verdict"]["device_time"]["pooled"]["items"] == 3
    files = sorted(str(p.resolve()) for p in project.pytester.path.glob("baselines/*/*.json"))
    assert len(files) == 3 and len({Path(f).parent for f in files}) == 1, files  # one runner folder, 3 items
    assert dict(parsed) == dict.fromkeys(files, 1)
