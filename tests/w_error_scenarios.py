"""One scenario per pytest-aaco warning class under ``filterwarnings = error`` (issue 39, item 1).

Each scenario makes a fresh project (the tiny model, a registry, two benchmark items and a plain test,
a ``pytest.ini`` with ``filterwarnings = error`` as this project's own ini has), brings about the
warning's cause and runs pytest in a fresh interpreter. The cause is the real one where a CPU-only
machine can make it; where it cannot (a CPU governor, an ONNX Runtime EP the machine lacks), the
project's ``conftest.py`` replaces the one function that reads that machine state, and says so.

tests/test_warnings_as_errors.py asserts on these runs; run as a script, this module prints the
before/after table of the closing note for any interpreter that has pytest-aaco installed, and with
``--setups`` the same for issue 39 item 4's pytest set-ups (tests/test_setups.py)::

    python tests/w_error_scenarios.py [PYTHON ...]
    python tests/w_error_scenarios.py --setups [PYTHON ...]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: warmup 2, 3 rounds of 5 iterations (tests/conftest.py FAST_ARGS, the bundle left on where a scenario needs it)
FAST_ARGS = ("--aaco-warmup=2", "--aaco-rounds=3", "--aaco-iterations=5", "--aaco-max-contention=off",
             "--aaco-models=models.yaml", "-p", "no:cacheprovider")

TESTS = """
def test_latency(benchmark_model):
    benchmark_model()


def test_latency_again(benchmark_model):
    benchmark_model()


def test_plain():
    assert 1 + 1 == 2
"""

REGISTRY = """
models:
  tiny:
    path: tiny.onnx
"""

INI = "[pytest]\nfilterwarnings =\n    error\n"


@dataclass
class Outcome:
    """What one run showed: exit code, its output, and the lines a reader of the table needs."""

    ret: int
    text: str

    @property
    def internal_error(self) -> bool:
        return "INTERNALERROR" in self.text

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.text

    @property
    def results_table(self) -> bool:
        return "pytest-aaco results" in self.text

    @property
    def summary(self) -> str:
        """The counts of pytest's last ``= ... =`` line (``1 failed, 2 passed``); empty when there is none
        (a usage error)."""
        ends = re.findall(r"^=+ (.*(?:passed|failed|error|errors|skipped|no tests ran).*) in [0-9.]+s.* =+$",
                          self.text, re.MULTILINE)
        return ends[-1] if ends else ""

    def first_line(self, needle: str, warning: str = "") -> str:
        """The first line naming *needle* and *warning*, else the first naming *needle*, shortened to 110
        characters."""
        lines = [" ".join(line.split()) for line in self.text.splitlines() if needle in line]
        line = next((line for line in lines if warning and warning in line), lines[0] if lines else "")
        return line if len(line) <= 110 else line[:107] + "..."


@dataclass
class Scenario:
    """*warning*: the class; *cause*: what the scenario does; *seen*: words of the line that names the cause
    (the table quotes the first such line); *prepare(project, python)* returns the extra
    arguments and environment variables of the run (it may write a conftest or run pytest once first)."""

    warning: str
    cause: str
    prepare: Callable[[Path, str], tuple[list[str], dict[str, str]]]
    seen: str
    bundle: bool = False


def blocked(project: Path, name: str) -> Path:
    """A path under a plain file: no process can create it (no permissions needed, works as root)."""
    plain = project / "a-file"
    plain.write_text("")
    return plain / name


def _clock(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    (project / "conftest.py").write_text(textwrap.dedent("""
        # A CPU-only CI machine (a container, a VM) has no cpufreq to read: the one function that reads the
        # clock settings answers as a laptop's sysfs would (governor 'powersave').
        import importlib

        for name in ("pytest_aaco.session", "pytest_aaco.session_parts"):  # where the version at hand reads them
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            if hasattr(module, "read_clock_state"):
                module.read_clock_state = lambda *a, **k: {"cpu_governors": {"policy0": "powersave"}}
    """))
    return [], {}


def _reference(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    (project / "conftest.py").write_text(textwrap.dedent("""
        # The reference workload is a model the plugin generates for ORT's CPU EP, which always builds it:
        # the cause seen on GPUs (TensorRT listed, libnvinfer.so.10 missing) is ORT refusing the session,
        # so the one function that makes the reference's InferenceSession refuses as ORT does there.
        import pytest_aaco.measure.reference_workload as reference
        from pytest_aaco.measure.inference import SessionError

        def build_session(path, provider, *args, **kwargs):
            raise SessionError("libnvinfer.so.10: cannot open shared object file: No such file or directory")

        reference.build_session = build_session
    """))
    return [], {}


def _baseline(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    run(project, python, ["--aaco-save-baseline", "-W", "default"], {})  # the first baseline
    for path in (project / "baselines").rglob("*.json"):
        path.write_text('{"schema_version": 1, "history": [{"rounds": [{"log_mean"', encoding="utf-8")  # truncated
    return ["--aaco-save-baseline"], {}


def _lock(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    folder = blocked(project, "locks")
    (project / "conftest.py").write_text(textwrap.dedent(f"""
        # af54b7b had no AACO_LOCK_DIR: its lock folder is the module's LOCK_ROOT (the same folder, no patching
        # of machine state: both point at a path under a plain file, which no process can create)
        from pathlib import Path

        import pytest_aaco.measure.devicelock as devicelock

        if not hasattr(devicelock, "LOCK_DIR_ENV"):
            devicelock.LOCK_ROOT = Path({str(folder)!r})
    """))
    return [], {"AACO_LOCK_DIR": str(folder)}


def _report(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    return [f"--aaco-session-dir={blocked(project, 'sessions')}", f"--aaco-junit={project / 'a-file' / 'perf.xml'}"], {}


def _cache(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    return [], {"AACO_CACHE_DIR": str(blocked(project, "cache"))}


def _provider(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    return ["--aaco-provider=vitisai|dml|cpu"], {}


DEVICE_TIME_TEST = """

def test_side_by_side_on_amd():
    # rocprofv3's trace fails only beside an AMD GPU (an AMD EP in a side-by-side run): the item calls the one
    # function the side-by-side gate calls when it does (pytest_aaco/sidebyside/gate.py _child_device_time)
    from pytest_aaco.sidebyside.gate import wall_time_only

    wall_time_only("tiny[migraphx]", "no rocpd database in the trace folder")
"""


def _device_time(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    with (project / "test_perf.py").open("a") as tests:
        tests.write(DEVICE_TIME_TEST)
    return [], {}


def _flavor(project: Path, python: str) -> tuple[list[str], dict[str, str]]:
    """Two builds over each other, as tests/test_flavors.py makes them: the interpreter's real
    ``onnxruntime`` package (a link) with its real dist-info, and a second flavor whose RECORD owns the
    same ``onnxruntime/__init__.py``, in one folder first on PYTHONPATH."""
    real = Path(subprocess.run([python, "-c", "import onnxruntime; print(onnxruntime.__file__)"],
                               capture_output=True, text=True, check=True).stdout.strip()).parent
    site = project.parent / "site"
    site.mkdir(exist_ok=True)
    (site / "onnxruntime").symlink_to(real, target_is_directory=True)
    [meta] = real.parent.glob("onnxruntime-*.dist-info")
    shutil.copytree(meta, site / meta.name)
    gpu = site / "onnxruntime_gpu-1.31.1.dist-info"
    gpu.mkdir()
    (gpu / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.31.1\n")
    (gpu / "top_level.txt").write_text("onnxruntime\n")
    (gpu / "RECORD").write_text("onnxruntime/__init__.py,sha256=x,1\n")
    return [], {"PYTHONPATH": str(site)}


SCENARIOS = [
    Scenario("AacoProviderWarning", "--aaco-provider='vitisai|dml|cpu' without VitisAI or DirectML", _provider,
             "VitisAI"),
    Scenario("AacoBaselineWarning", "a truncated baseline file, then --aaco-save-baseline", _baseline, "moved aside"),
    Scenario("AacoClockWarning", "CPU governor 'powersave' (patched: read_clock_state)", _clock, "governor",
             bundle=True),
    Scenario("AacoReferenceWarning", "the reference's InferenceSession refused (patched: its build_session)",
             _reference, "reference workload"),
    Scenario("AacoLockWarning", "the device lock folder under a plain file", _lock, "device lock"),
    Scenario("AacoReportWarning", "--aaco-session-dir and --aaco-junit under a plain file", _report, "session bundle",
             bundle=True),
    Scenario("AacoCacheWarning", "AACO_CACHE_DIR under a plain file", _cache, "model cache"),
    Scenario("AacoDeviceTimeWarning", "a test calls wall_time_only (AMD side-by-side only)", _device_time,
             "device time"),
    Scenario("AacoFlavorWarning", "onnxruntime and onnxruntime-gpu over each other", _flavor, "ONNX Runtime builds"),
]


def make_project(root: Path, model: Path) -> Path:
    """*root*/project with the tiny model, the registry, the tests and the ini."""
    project = root / "project"
    project.mkdir(parents=True)
    shutil.copy(model, project / "tiny.onnx")
    (project / "models.yaml").write_text(REGISTRY)
    (project / "test_perf.py").write_text(TESTS)
    (project / "pytest.ini").write_text(INI)
    return project


def run(project: Path, python: str, args: list[str], env: dict[str, str], bundle: bool = False,
        timeout: float = 300) -> Outcome:
    """pytest in a fresh *python* in *project*: the fast arguments, *args*, *env* over this process's
    environment (no PYTEST_* or PYTHONPATH of the calling suite)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTEST_", "PYTHONPATH", "GITHUB_", "AACO_CACHE_DIR"))}
    base.setdefault("AACO_CACHE_DIR", str(project.parent / "cache"))
    base["COLUMNS"] = "200"
    base.update(env)
    fast = [*FAST_ARGS, *(() if bundle else ("--aaco-no-bundle",))]
    done = subprocess.run([python, "-m", "pytest", *fast, *args], cwd=project, env=base,
                          capture_output=True, text=True, timeout=timeout)
    return Outcome(done.returncode, done.stdout + done.stderr)


def run_scenario(scenario: Scenario, root: Path, model: Path, python: str = sys.executable) -> Outcome:
    """Make the project under *root*, prepare *scenario* and run it under ``filterwarnings = error``."""
    project = make_project(root, model)
    args, env = scenario.prepare(project, python)
    return run(project, python, args, env, scenario.bundle)


def table(pythons: list[str]) -> str:
    """The markdown table: per warning class and interpreter, exit code, INTERNALERROR, results table, what
    the user sees."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from conftest import make_tiny_model

    rows = ["| warning | cause | python | exit | INTERNALERROR | traceback | results table | pytest summary |"
            " first line naming the class |", "|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(Path(tmp) / "tiny.onnx")
        for scenario in SCENARIOS:
            for n, python in enumerate(pythons):
                out = run_scenario(scenario, Path(tmp) / f"{scenario.warning}-{n}", model, python)
                yes = {True: "yes", False: "no"}
                rows.append(f"| {scenario.warning} | {scenario.cause} | {python} | {out.ret}"
                            f" | {yes[out.internal_error]} | {yes[out.traceback]} | {yes[out.results_table]}"
                            f" | {out.summary}"
                            f" | `{out.first_line(scenario.seen, scenario.warning)}` |")
    return "\n".join(rows)


def history_runs(folder: Path) -> list[int]:
    """The number of runs in each baseline history file under *folder* (read as JSON: any version's layout)."""
    import json

    counts = []
    for path in sorted(folder.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("history"), list):
            counts.append(len(data["history"]))
    return counts


def setups_table(pythons: list[str]) -> str:
    """Issue 39 item 4's set-ups (tests/test_setups.py ``SETUPS``), each with ``--aaco-save-baseline`` over the
    tiny project without an ini: exit code, INTERNALERROR, results table, pytest's counts and the runs each
    baseline history holds after it (one run each is right). The third-party plugins come from
    ``$AACO_SETUPS_PLUGINS`` or ``.setups-plugins`` as tests/test_setups.py finds them."""
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from conftest import make_tiny_model
    from test_setups import SETUPS

    plugins = os.environ.get("AACO_SETUPS_PLUGINS") or str(here.parent / ".setups-plugins")
    rows = ["| set-up | python | exit | INTERNALERROR | results table | pytest summary | runs per baseline"
            " | plugin in pytest's header |", "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(Path(tmp) / "tiny.onnx")
        for n, (name, (args, module)) in enumerate(SETUPS.items()):
            for m, python in enumerate(pythons):
                project = make_project(Path(tmp) / f"{n}-{m}", model)
                (project / "pytest.ini").unlink()
                extra = [*args, *(["-p", "no:randomly"] if module != "pytest_randomly" else [])]
                out = run(project, python, [*extra, "--aaco-save-baseline", "--aaco-baseline-dir=bl"],
                          {"PYTHONPATH": plugins})
                yes = {True: "yes", False: "no"}
                plugin = None if module is None else {"xdist": "xdist"}.get(module, module.removeprefix("pytest_"))
                loaded = "-" if plugin is None else yes[f" {plugin}-" in out.text.split("collect", 1)[0]]
                rows.append(f"| {name} | {python} | {out.ret} | {yes[out.internal_error]} | {yes[out.results_table]}"
                            f" | {out.summary} | {history_runs(project / 'bl')} | {loaded} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--setups"]:
        print(setups_table(sys.argv[2:] or [sys.executable]))
    else:
        print(table(sys.argv[1:] or [sys.executable]))
