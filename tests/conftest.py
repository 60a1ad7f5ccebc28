"""Shared fixtures of pytest-aaco's own tests.

* ``conv_models``: Conv -> MatMul models, 3x3 and 9x9, where only the Conv gets heavier.
* ``tiny_model_path``: a deterministic ONNX MatMul/Relu chain (input ``x`` float32 ``[1, 64]``,
  three 64x64 layers), written once per session; one run takes a few microseconds.
* ``aaco_project``: a pytester project with that model, a registry YAML pointing at it with
  ``path:`` and helpers to write tests and run pytest with fast options (:data:`FAST_ARGS`).
* ``write_registry``: a registry YAML next to a copy of the tiny model, for registry unit tests.
* ``result_factory``: BenchmarkResults built from numbers (no ONNX Runtime), for baseline and
  verdict tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx  # noqa: F401 - see below
import onnxruntime  # noqa: F401 - see below
import pytest
import scipy.stats  # noqa: F401 - see below

# pytester's in-process runs (``runpytest``) drop every module first imported during the run, and
# C extensions (onnx, onnxruntime, numpy.fft under scipy, matplotlib) cannot be loaded twice in one
# process. The plugin imports them only when a benchmark needs them, so the test process imports
# them once here, up front; likewise the plugin's own modules past its entry point, which it loads
# only when a run uses it (so each in-process run does not import them afresh).
with contextlib.suppress(ImportError), warnings.catch_warnings():  # the plots extra is optional
    # matplotlib 3.7.0 (the plots extra's floor, the CI floors job) with a current pyparsing warns a
    # DeprecationWarning while importing; the plugin's writers ignore it the same way (session.py)
    warnings.simplefilter("ignore", DeprecationWarning)
    import matplotlib.figure  # noqa: F401

import pytest_aaco.cli  # noqa: E402,F401 - see above
import pytest_aaco.session  # noqa: E402,F401 - see above

#: warmup 2, 3 rounds of 5 iterations, no session bundle: fast enough for unit tests; a regression is
#: never withheld for CPU contention (the test machine is busy by design; that rule has unit tests)
FAST_ARGS = ("--aaco-warmup=2", "--aaco-rounds=3", "--aaco-iterations=5", "--aaco-no-bundle",
             "--aaco-max-contention=off")


def save_test_model(graph, path: Path) -> Path:
    """Wrap *graph* in an opset-17 model (IR 8), check it and write it to *path*."""
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="aaco-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return path


def make_tiny_model(path: Path, layers: int = 3, width: int = 64, seed: int = 0,
                    batch: int | str = 1, dtype: str = "float") -> Path:
    """Write ``x -> (MatMul W_i -> Relu) * layers -> y`` to *path*; deterministic for a given *seed*."""
    from onnx import TensorProto, helper, numpy_helper

    elem = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE}[dtype]
    np_dtype = {"float": np.float32, "double": np.float64}[dtype]
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    current = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np_dtype)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"mm{i}"], name=f"mm{i}"))
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("Relu", [f"mm{i}"], [out], name=f"relu{i}"))
        current = out
    graph = helper.make_graph(
        nodes, "tiny_chain",
        [helper.make_tensor_value_info("x", elem, [batch, width])],
        [helper.make_tensor_value_info("y", elem, [batch, width])],
        initializer=inits,
    )
    return save_test_model(graph, path)


#: what each test's child pytest processes (pytester's subprocess runs, ``python -m pytest``) add to their
#: ``PYTEST_ADDOPTS``: hypothesis's pytest plugin imports all of hypothesis at every session's end (its
#: terminal summary; 0.6 s of a 0.9 s session on the 2-core VM, hypothesis 6.170), and no child uses it
CHILD_ADDOPTS = "-p no:hypothesispytest"


def _add_child_addopts() -> str | None:
    """Add :data:`CHILD_ADDOPTS` to ``PYTEST_ADDOPTS``; returns the value before (None: unset)."""
    before = os.environ.get("PYTEST_ADDOPTS")
    if CHILD_ADDOPTS not in (before or ""):
        os.environ["PYTEST_ADDOPTS"] = f"{before} {CHILD_ADDOPTS}" if before else CHILD_ADDOPTS
    return before


def pytest_configure(config: pytest.Config) -> None:
    """:data:`CHILD_ADDOPTS` for every child of this process (this process parsed its own options
    already; pytest-xdist's workers take theirs from the controller, not from ``PYTEST_ADDOPTS``)."""
    _add_child_addopts()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):  # type: ignore[no-untyped-def]
    """The same while a test body runs (pytester removes ``PYTEST_ADDOPTS`` when it sets up), the value
    before it back afterwards."""
    before = _add_child_addopts()
    try:
        return (yield)
    finally:
        if before is None:
            os.environ.pop("PYTEST_ADDOPTS", None)
        else:
            os.environ["PYTEST_ADDOPTS"] = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist the tests marked ``slow`` go first (a stable sort, the order otherwise kept), so
    the long end-to-end tests start early and the short ones fill the end of the run on every worker
    instead of one worker finishing a long test alone. A run without workers keeps the file order."""
    if hasattr(config, "workerinput") or config.getoption("numprocesses", None):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def make_model():
    """:func:`make_tiny_model`, for tests that need a variant (symbolic batch, float64, more layers)."""
    return make_tiny_model


@pytest.fixture(scope="session")
def conv_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two :func:`make_conv_model` files: a 3x3 Conv and a 9x9 one (9x the Conv FLOPs, all else equal)."""
    folder = tmp_path_factory.mktemp("conv")
    return make_conv_model(folder / "conv3.onnx", kernel=3), make_conv_model(folder / "conv9.onnx", kernel=9)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny MatMul/Relu chain, written once per test session (read-only for tests)."""
    return make_tiny_model(tmp_path_factory.mktemp("models") / "tiny.onnx")


@pytest.fixture(scope="session")
def aaco_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of generated / transformed models for the whole test session."""
    return tmp_path_factory.mktemp("aaco-cache")


@pytest.fixture
def isolated_cache(monkeypatch: pytest.MonkeyPatch, aaco_cache_dir: Path) -> Path:
    """Generated models go to a per-session temporary cache, not the user's ~/.cache (not autouse:
    ``tests/perf`` shares this conftest and must keep the real cache)."""
    monkeypatch.setenv("AACO_CACHE_DIR", str(aaco_cache_dir))
    return aaco_cache_dir


@pytest.fixture(scope="session", autouse=True)
def _device_locks_of_this_worker(tmp_path_factory: pytest.TempPathFactory):
    """Each test process (each pytest-xdist worker) and the pytest runs it starts take the device lock
    in a folder of their own (``AACO_LOCK_DIR``), not the host's ``/tmp/pytest-aaco-locks``: the other
    worker's and other suites' benchmarks would make an item wait, print a wait line and time out. The
    lock's own tests set ``devicelock.LOCK_ROOT`` or the variable themselves."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AACO_LOCK_DIR", str(tmp_path_factory.mktemp("device-locks")))
        yield


@pytest.fixture(autouse=True)
def _outside_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs must not append to a real job summary when the suite itself runs in CI."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _amdsmi_import_tried_afresh() -> None:
    """A failed ``import amdsmi`` is cached per process; tests put stand-in packages in ``sys.modules``."""
    from pytest_aaco.samplers.amd import reset_amdsmi_import

    reset_amdsmi_import()


@pytest.fixture
def fast_args() -> list[str]:
    return list(FAST_ARGS)


@pytest.fixture
def write_registry(tmp_path: Path, tiny_model_path: Path, isolated_cache: Path):
    """``write_registry(text) -> Path``: a registry YAML in *tmp_path*, next to a copy of the tiny model
    (``tiny.onnx``), so ``path: tiny.onnx`` works."""
    shutil.copy(tiny_model_path, tmp_path / "tiny.onnx")

    def write(text: str, name: str = "models.yaml") -> Path:
        target = tmp_path / name
        target.write_text(textwrap.dedent(text), encoding="utf-8")
        return target

    return write


def make_result(round_means_ms, iterations: int = 20, noise: float = 0.01, seed: int = 0,
                telemetry: dict | None = None, model: str = "m", provider: str = "cpu", batch: int = 1):
    """A BenchmarkResult without ONNX Runtime: one round per entry of *round_means_ms*, each of
    *iterations* latencies ``mean * exp(noise * N(0, 1))`` (seeded)."""
    from pytest_aaco.measure.results import BenchmarkResult, RoundResult

    rng = np.random.default_rng(seed)
    rounds, clock = [], 1_000_000
    for index, mean in enumerate(round_means_ms):
        lat = float(mean) * np.exp(noise * rng.standard_normal(iterations))
        end = clock + int(lat.sum() * 1e6)
        rounds.append(RoundResult(index, lat, clock, end))
        clock = end + 1000
    return BenchmarkResult(model=model, provider=provider, rounds=rounds, warmup_iterations=3,
                           warmup_latencies_ms=np.full(3, float(round_means_ms[0])), session_create_ms=5.0,
                           first_run_ms=2.0 * float(round_means_ms[0]), providers_used=["CPUExecutionProvider"],
                           batch_size=batch, telemetry=telemetry or {})


@pytest.fixture(scope="session")
def result_factory():
    """:func:`make_result`: BenchmarkResults from numbers, for baseline and verdict tests."""
    return make_result


LATENCY_TEST = """
def test_latency(benchmark_model):
    result = benchmark_model()
    assert result.measure_iterations > 0
"""

TINY_REGISTRY = """
models:
  tiny:
    path: tiny.onnx
"""


@dataclass
class AacoProject:
    """A pytester project using the tiny model; ``run()`` adds :data:`FAST_ARGS` and the registry."""

    pytester: pytest.Pytester
    model: Path

    def registry(self, text: str = TINY_REGISTRY) -> Path:
        return self.pytester.makefile(".yaml", models=textwrap.dedent(text))

    def tests(self, source: str = LATENCY_TEST, name: str = "test_perf") -> Path:
        return self.pytester.makepyfile(**{name: textwrap.dedent(source)})

    def args(self, *extra: str) -> list[str]:
        return ["--aaco-models=models.yaml", *FAST_ARGS, "-p", "no:cacheprovider", *extra]

    def run(self, *extra: str) -> pytest.RunResult:
        return self.pytester.runpytest(*self.args(*extra))

    def run_subprocess(self, *extra: str, timeout: float = 120) -> pytest.RunResult:
        return self.pytester.runpytest_subprocess(*self.args(*extra), timeout=timeout)


@pytest.fixture
def aaco_project(pytester: pytest.Pytester, tiny_model_path: Path, isolated_cache: Path) -> AacoProject:
    """A pytester project with ``tiny.onnx``, ``models.yaml`` (model ``tiny``) and ``test_perf.py``."""
    shutil.copy(tiny_model_path, pytester.path / "tiny.onnx")
    project = AacoProject(pytester, pytester.path / "tiny.onnx")
    project.registry()
    project.tests()
    return project


def make_conv_model(path: Path, kernel: int = 3, channels: int = 32, size: int = 32, seed: int = 0) -> Path:
    """Write ``x[1,C,S,S] -> Conv(k x k, C->C) -> Abs -> Flatten -> MatMul [C*S*S, 64] -> Tanh -> y[1,64]``.

    Only the Conv depends on *kernel* (its FLOPs grow with ``kernel²``), so two kernels give one
    operator type made much heavier and everything else the same. Deterministic for a *seed*.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((channels, channels, kernel, kernel)) / (channels * kernel)).astype(np.float32)
    m = (rng.standard_normal((channels * size * size, 64)) / np.sqrt(channels * size * size)).astype(np.float32)
    pad = kernel // 2
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[pad] * 4),
        helper.make_node("Abs", ["c"], ["a"], name="abs"),
        helper.make_node("Flatten", ["a"], ["f"], name="flatten", axis=1),
        helper.make_node("MatMul", ["f", "M"], ["mm"], name="matmul"),
        helper.make_node("Tanh", ["mm"], ["y"], name="tanh"),
    ]
    graph = helper.make_graph(
        nodes, "conv_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(m, "M")],
    )
    return save_test_model(graph, path)


_SQUEEZENET: list[Path] = []


def squeezenet_file() -> Path:
    """A small real CNN file for tests that copy a model around: onnx's ``light_squeezenet.onnx``
    (15 kB) while the installed onnx ships it, else SqueezeNet generated by
    :func:`pytest_aaco.measure.zoogen.squeezenet` once per test session (onnx is trimming its test data)."""
    from pytest_aaco.measure.registry import zoo_dir

    light = zoo_dir() / "light_squeezenet.onnx"
    if light.is_file():
        return light
    if not _SQUEEZENET:
        import atexit
        import tempfile

        from pytest_aaco.measure.zoogen import squeezenet

        folder = tempfile.mkdtemp(prefix="aaco-squeezenet-")
        atexit.register(shutil.rmtree, folder, True)
        target = Path(folder) / "squeezenet.onnx"
        onnx.save(squeezenet(seed=0), str(target))
        _SQUEEZENET.append(target)
    return _SQUEEZENET[0]


def _git(repo: Path, *args: str) -> str:
    """Run git in *repo*; its stdout, stripped. Raises CalledProcessError on failure."""
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


#: the registry of :func:`model_repo`: a model file tracked in the repository, and a zoo model
REPO_REGISTRY = """models:
  net:
    path: models/net.onnx
    dims: {batch: 1}
  zoo:
    zoo: squeezenet
"""


@pytest.fixture
def git() -> Any:
    """``git(repo, *args) -> stdout``: run git in a test repository (CalledProcessError on failure)."""
    return _git


@pytest.fixture
def repo_registry() -> str:
    """The text of :func:`model_repo`'s ``models.yaml``."""
    return REPO_REGISTRY


@pytest.fixture
def model_repo(tmp_path: Path) -> Path:
    """A git repository with one commit: ``models.yaml`` (:data:`REPO_REGISTRY`) and
    ``models/net.onnx`` (the zoo's squeezenet), for the side-by-side tests."""
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    shutil.copy(squeezenet_file(), root / "models" / "net.onnx")
    (root / "models.yaml").write_text(REPO_REGISTRY)
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "base")
    return root
