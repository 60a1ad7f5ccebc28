"""What does having pytest-aaco installed cost a pytest run that never uses it?

A one-test project (``def test_one(): assert True``, no configuration file) in a temporary folder,
run *N* times each, alternating (ABAB..., so a drifting machine hits both arms alike):
``python -m pytest -q test_one.py`` (the plugin loads through its ``pytest11`` entry point) and the
same with ``-p no:aaco``. Wall time from ``time.perf_counter`` around each child, peak resident
memory from ``os.wait4``'s ``ru_maxrss`` (kB on Linux). Printed: each arm's median, the median
difference and ratio, and once per arm the ``pytest_aaco`` modules and which of numpy, PyYAML,
onnx, onnxruntime, scipy and matplotlib a run imported, and the lines the plugin adds to ``--help``.
The target: within 15% of ``-p no:aaco``, near what pytest-benchmark adds (0.02-0.06 s).

Bytecode: installed packages have their ``.pyc`` files, so the children run with
``PYTHONDONTWRITEBYTECODE`` unset and ``PYTHONPYCACHEPREFIX`` in the temporary folder (filled by the
warm-up runs); ``--as-is`` keeps the environment as it is. POSIX only (``os.wait4``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = "def test_one():\n    assert True\n"
#: imports by the end of a run, printed as JSON by the child (a conftest-free probe through pytest.main)
PROBE = """
import json, sys, pytest
code = pytest.main(sys.argv[1:])
heavy = ("numpy", "yaml", "onnx", "onnxruntime", "scipy", "matplotlib")
print("AACO-PROBE " + json.dumps({
    "exit": int(code),
    "aaco_modules": sorted(m for m in sys.modules if m == "pytest_aaco" or m.startswith("pytest_aaco.")),
    "heavy": sorted(h for h in heavy if h in sys.modules),
}))
"""


#: the children's environment (see the module docstring)
ENV = dict(os.environ)


def run_once(python: str, folder: Path, extra: list[str]) -> tuple[float, int, int]:
    """One ``pytest -q test_one.py`` in *folder*: (wall s, peak RSS kB, exit code)."""
    start = time.perf_counter()
    child = subprocess.Popen([python, "-m", "pytest", "-q", "test_one.py", *extra], cwd=folder, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: tell Popen
    return wall, usage.ru_maxrss, child.returncode


def probe(python: str, folder: Path, extra: list[str]) -> dict[str, object]:
    """The package modules and heavy libraries imported by the end of one run (:data:`PROBE`)."""
    out = subprocess.run([python, "-c", PROBE, "-q", "test_one.py", *extra], cwd=folder, capture_output=True,
                         text=True, check=False, env=ENV).stdout
    line = next(x for x in out.splitlines() if x.startswith("AACO-PROBE "))
    return dict(json.loads(line.removeprefix("AACO-PROBE ")))


def help_lines(python: str, folder: Path, extra: list[str]) -> int:
    """Lines of ``pytest --help`` in *folder*."""
    out = subprocess.run([python, "-m", "pytest", "--help", *extra], cwd=folder, capture_output=True, text=True,
                         check=True, env=ENV).stdout
    return len(out.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per arm (default 10)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with pytest and pytest-aaco")
    parser.add_argument("--as-is", action="store_true", help="keep PYTHONDONTWRITEBYTECODE and the bytecode"
                        " cache settings of the environment")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    arms = {"plugin": [], "no:aaco": ["-p", "no:aaco"]}
    with tempfile.TemporaryDirectory(prefix="aaco-startup-") as tmp:
        folder = Path(tmp) / "project"
        folder.mkdir()
        (folder / "test_one.py").write_text(TEST)
        if not args.as_is:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        for _ in range(2):  # warm the file cache and the bytecode caches, not counted
            for extra in arms.values():
                run_once(args.python, folder, extra)
        walls: dict[str, list[float]] = {arm: [] for arm in arms}
        rss: dict[str, list[int]] = {arm: [] for arm in arms}
        for _ in range(args.runs):
            for arm, extra in arms.items():
                wall, peak, code = run_once(args.python, folder, extra)
                if code != 0:
                    raise SystemExit(f"pytest exited {code} ({arm}); run it by hand in a folder with test_one.py")
                walls[arm].append(wall)
                rss[arm].append(peak)
        probes = {arm: probe(args.python, folder, extra) for arm, extra in arms.items()}
        helps = {arm: help_lines(args.python, folder, extra) for arm, extra in arms.items()}
    cache = "as the environment has it" if args.as_is else "bytecode cached (PYTHONPYCACHEPREFIX)"
    print(f"{args.runs} runs per arm, alternating; {args.python}; {cache}; {os.cpu_count()} CPUs;"
          f" load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'arm':<10} {'wall median s':>14} {'min s':>8} {'max s':>8} {'peak RSS median MB':>19}")
    for arm in arms:
        print(f"{arm:<10} {statistics.median(walls[arm]):>14.3f} {min(walls[arm]):>8.3f} {max(walls[arm]):>8.3f}"
              f" {statistics.median(rss[arm]) / 1024:>19.1f}")
    paired = [a - b for a, b in zip(walls["plugin"], walls["no:aaco"], strict=True)]
    ratio = statistics.median(walls["plugin"]) / statistics.median(walls["no:aaco"])
    extra_mb = (statistics.median(rss["plugin"]) - statistics.median(rss["no:aaco"])) / 1024
    print(f"plugin - no:aaco: wall median of pairs {statistics.median(paired):+.3f} s, ratio of medians"
          f" {ratio:.2f}x, peak RSS {extra_mb:+.1f} MB")
    for arm, found in probes.items():
        modules = found["aaco_modules"]
        assert isinstance(modules, list)
        print(f"{arm}: {len(modules)} pytest_aaco modules imported, heavy libraries: {found['heavy'] or 'none'}")
    print(f"pytest --help: {helps['plugin']} lines, {helps['no:aaco']} with -p no:aaco"
          f" ({helps['plugin'] - helps['no:aaco']} added by the plugin)")


if __name__ == "__main__":
    main()
