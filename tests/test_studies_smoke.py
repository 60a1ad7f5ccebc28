"""Every script kept in ``studies/`` runs: its ``--smoke`` mode (tiny sizes, seconds) exits 0.

The scripts are the provenance of figures the docs quote (``studies/README.md`` lists which), so a
refactor that breaks one fails here rather than a round later. Marked ``slow``
(``-m "not slow"`` leaves them out): about 2 minutes on the project's 2-core VM with ``-n 2``.

Run through another script rather than by themselves (exempt below):

* ``gpu_device_time_stored.sh``, ``stored_gate_summary.py``: run by ``gpu_calibrated_claims.sh``'s smoke (the
  former runs the steps, the latter summarises their ``items.jsonl``).
* ``device_time_overhead.py``: reads a session bundle; ``tests/test_device_time_stored.py`` runs it on one.

The GPU scripts (``gpu_device_time.sh``, ``gpu_calibrated_claims.sh``) run here on the CPU EP
(``PROVIDER=cpu``, squeezenet, one unchanged and one slowed step): the mechanism, not the GPU's figures.

``multi_gpu.sh`` runs in its CPU mode (``PROVIDER=cpu``, one model, 2 rounds), which also runs
``multi_gpu_summary.py`` on the two runs' session bundles. ``layout_figures.py`` reads the checkout
and traces one judgement of the tiny model (seconds as it is), so it has no ``--smoke``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"

#: script -> (command after the interpreter or shell, extra environment); {work} is a private folder
SMOKES: dict[str, tuple[list[str], dict[str, str]]] = {
    "bisect_demo.py": (["studies/bisect_demo.py", "--smoke"], {}),
    # 2 busy processes for about 20 s, stopped by PID; 1 slowed and 1 unchanged gate
    "contention_gate.py": (["studies/contention_gate.py", "--smoke", "--spinners", "2"], {}),
    # squeezenet, 2 saves, 1 unchanged and 1 slowed gate (../shared/tools/slow_model.py makes the variant)
    "stored_calibration.py": (["studies/stored_calibration.py", "gate", "--smoke", "--work", "{work}"], {}),
    "cold_start_study.py": (["studies/cold_start_study.py", "--smoke"], {}),
    "device_session_prior.py": (["studies/device_session_prior.py", "--smoke"], {}),
    "gpu_calibrated_claims.sh": (["studies/gpu_calibrated_claims.sh", "--aaco-rounds=3"],
                                 {"PROVIDER": "cpu", "MODELS": "squeezenet", "BIG": "2", "STEPS": "save save aa big",
                                  "WORK": "{work}", "OUT": "{work}-out"}),
    "gpu_device_time.sh": (["studies/gpu_device_time.sh", "--aaco-compare-budget=5", "--aaco-cold-start=0"],
                           {"PROVIDER": "cpu", "MODELS": "squeezenet", "RUNS": "aa k1", "WORK": "{work}"}),
    "layout_figures.py": (["studies/layout_figures.py"], {}),
    # one release (19 MB, kept in ~/.cache/pytest-aaco/wheels, as tests/test_migraphx_conformance.py keeps it;
    # a wheel the registry cannot give is printed as not checked, exit 0)
    "migraphx_conformance.py": (["studies/migraphx_conformance.py", "--keys", "--work", "{work}", "1.23.2"], {}),
    "multi_gpu.sh": (["studies/multi_gpu.sh", "one", "-k", "squeezenet", "--aaco-rounds=2"],
                     {"PROVIDER": "cpu", "WORK": "{work}"}),
    "plugin_startup.py": (["studies/plugin_startup.py", "--smoke"], {}),
    "pooled_sim.py": (["studies/pooled_sim.py", "--smoke"], {}),
    "sampler_overhead.py": (["studies/sampler_overhead.py", "--smoke"], {}),
    "side_worker_overhead.py": (["studies/side_worker_overhead.py", "--smoke"], {}),
    # one process pair a side (tests/test_sidebyside.py covers the looks that add pairs)
    "sbs_overhead.py": (["studies/sbs_overhead.py", "--smoke", "--layout", "workers:1"], {}),
}
#: kept scripts that are not smoke-run here (the module docstring says why)
EXEMPT = {"gpu_device_time_stored.sh", "stored_gate_summary.py", "multi_gpu_summary.py", "device_time_overhead.py"}

pytestmark = pytest.mark.slow


def _run(name: str, work: Path) -> subprocess.CompletedProcess[str]:
    folder = work / name
    folder.mkdir()
    args = [arg.format(work=folder / "work") for arg in SMOKES[name][0]]
    extra = SMOKES[name][1]
    env = {**os.environ, **{k: v.format(work=folder) for k, v in extra.items()},
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "PYTHON": sys.executable}
    first = ["bash"] if name.endswith(".sh") else [sys.executable]
    return subprocess.run([*first, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The selected scripts' smoke runs, started two at a time: name -> Future of the finished process.
    Under pytest-xdist (each worker collects every item but runs some) none start here: each test
    runs its own."""
    if hasattr(request.config, "workerinput"):
        yield {}
        return
    selected = [n for n in SMOKES if any(f"[{n}]" in item.nodeid for item in request.session.items)]
    work = tmp_path_factory.mktemp("studies-smoke")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: dict[str, Future[subprocess.CompletedProcess[str]]] = {
            n: pool.submit(_run, n, work) for n in sorted(selected, key=lambda n: n != "bisect_demo.py")}
        yield futures


def test_every_kept_script_is_smoked_or_exempt() -> None:
    kept = {p.name for p in STUDIES.iterdir() if p.suffix in (".py", ".sh")}
    assert kept == set(SMOKES) | EXEMPT, "a studies/ script without a smoke run here, or one that left"


@pytest.mark.parametrize("name", sorted(SMOKES))
def test_smoke(name: str, smoke_runs: dict[str, Future[subprocess.CompletedProcess[str]]],
               tmp_path: Path) -> None:
    done = smoke_runs[name].result() if name in smoke_runs else _run(name, tmp_path)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # a step that could not start (a Python without the project's packages: the scripts' child processes take
    # $PYTHON) must not pass as a smoke that ran
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, f"{name}:\n{done.stderr[-3000:]}"
