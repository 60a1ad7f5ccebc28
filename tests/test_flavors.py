"""Which ONNX Runtime build is installed (:mod:`pytest_aaco.flavors`) and what the plugin says about it.

* Two builds installed over each other: a fake ``onnxruntime_gpu-*.dist-info`` folder (metadata files
  as the real wheels carry them: ``top_level.txt``, ``RECORD``) on ``sys.path`` beside this
  environment's real ``onnxruntime``; the run gets the warning naming the one to uninstall.
* No ONNX Runtime: a fresh interpreter whose ``sys.path`` holds this environment's packages minus
  ``onnxruntime`` (a folder of links, ``python -S``), running pytest on a project; a run with a
  pytest-aaco item or an ``--aaco-*`` option gets the one-line usage error, a run without them passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from pytest_aaco import flavors

ROOT = Path(__file__).resolve().parents[1]

AACO_TEST = """
def test_latency(benchmark_model):
    benchmark_model()
"""
PLAIN_TEST = """
def test_plain():
    assert 1 + 1 == 2
"""


def fake_dist(site: Path, name: str, version: str, top_level: str | None = "onnxruntime\n",
              record: str = "") -> Path:
    """A ``<name>-<version>.dist-info`` folder in *site* with the files pip's metadata readers use."""
    folder = site / f"{name}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    if top_level is not None:
        (folder / "top_level.txt").write_text(top_level)
    (folder / "RECORD").write_text(record)
    return folder


# ------------------------------------------------------------------ reading the metadata


def test_finds_the_distributions_that_ship_the_package(tmp_path: Path) -> None:
    fake_dist(tmp_path, "onnxruntime_gpu", "1.31.1")
    fake_dist(tmp_path, "onnxruntime_migraphx", "1.27.1", top_level=None,  # no top_level.txt: RECORD decides
              record="onnxruntime/__init__.py,sha256=x,1\nonnxruntime_migraphx-1.27.1.dist-info/RECORD,,\n")
    fake_dist(tmp_path, "onnxruntime_extensions", "0.15.2", top_level="onnxruntime_extensions\n")
    fake_dist(tmp_path, "onnxruntime_genai", "0.18.0", top_level=None, record="onnxruntime_genai/__init__.py,,\n")
    (tmp_path / "onnx-1.17.0.dist-info").mkdir()
    found = flavors.ort_distributions([str(tmp_path)])
    assert sorted(d.name for d in found) == ["onnxruntime-gpu", "onnxruntime-migraphx"]
    assert {d.pinned for d in found} == {"onnxruntime-gpu==1.31.1", "onnxruntime-migraphx==1.27.1"}


def test_finds_this_environments_real_onnxruntime() -> None:
    """The real wheel's metadata (this environment installs the CPU build for the tests)."""
    import onnxruntime

    names = {d.name: d.version for d in flavors.ort_distributions()}
    assert names.get("onnxruntime") == onnxruntime.__version__.split("+")[0]


def test_a_distribution_on_two_path_entries_counts_once(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    fake_dist(first, "onnxruntime_gpu", "1.31.1")
    fake_dist(second, "onnxruntime_gpu", "1.20.0")
    found = flavors.ort_distributions([str(first), str(second), str(tmp_path / "missing")])
    assert [d.pinned for d in found] == ["onnxruntime-gpu==1.31.1"]


def test_one_build_gives_no_warning(tmp_path: Path) -> None:
    fake_dist(tmp_path, "onnxruntime_gpu", "1.31.1")
    assert flavors.overlap_problem(flavors.ort_distributions([str(tmp_path)])) is None
    assert flavors.overlap_problem([]) is None


def test_cpu_over_gpu_names_the_cpu_build_to_uninstall(tmp_path: Path) -> None:
    gpu = fake_dist(tmp_path, "onnxruntime_gpu", "1.31.1")
    cpu = fake_dist(tmp_path, "onnxruntime", "1.32.0")
    os.utime(gpu, (1_000, 1_000))
    os.utime(cpu, (2_000, 2_000))  # installed last: its files are the ones in place
    text = flavors.overlap_problem(flavors.ort_distributions([str(tmp_path)]))
    assert text is not None
    assert "(onnxruntime-gpu 1.31.1, onnxruntime 1.32.0)" in text
    assert "the one installed last (onnxruntime) runs" in text
    assert ("pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps onnxruntime-gpu==1.31.1"
            in text)
    assert "install pytest-aaco with its [cuda] extra" in text


def test_two_accelerator_builds_keep_the_last_installed(tmp_path: Path) -> None:
    migraphx = fake_dist(tmp_path, "onnxruntime_migraphx", "1.27.1")
    gpu = fake_dist(tmp_path, "onnxruntime_gpu", "1.31.1")
    os.utime(gpu, (1_000, 1_000))
    os.utime(migraphx, (2_000, 2_000))
    text = flavors.overlap_problem(flavors.ort_distributions([str(tmp_path)]))
    assert text is not None
    assert "pip uninstall -y onnxruntime-gpu && pip install --force-reinstall --no-deps onnxruntime-migraphx==1.27.1" \
        in text and "its [migraphx] extra" in text


# ------------------------------------------------------------------ through pytest: two builds


def site_with_real_ort(site: Path, *flavors_over: str) -> Path:
    """*site* as ``pip install --target`` leaves it: this environment's real ``onnxruntime`` package (a
    link) with a copy of its real ``*.dist-info`` (real RECORD), and, for each of *flavors_over*, a
    minimal second flavor whose RECORD owns the same ``onnxruntime/__init__.py`` (a real flavor wheel
    is hundreds of MB: studies/flavor_layouts.py installs them)."""
    import shutil

    import onnxruntime

    real_pkg = Path(onnxruntime.__file__).parent
    site.mkdir(parents=True, exist_ok=True)
    (site / "onnxruntime").symlink_to(real_pkg, target_is_directory=True)
    [real_meta] = [d for d in real_pkg.parent.glob("onnxruntime-*.dist-info")]
    shutil.copytree(real_meta, site / real_meta.name)
    for name in flavors_over:
        fake_dist(site, name, "1.31.1", record="onnxruntime/__init__.py,sha256=x,1\n")
    return site


def run_with_path(project: Path, path: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh interpreter of this environment with *path* first on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), str(ROOT)])
    env["COLUMNS"] = "400"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=180)


def test_two_builds_over_each_other_warn_in_a_run_with_aaco_items(tmp_path: Path) -> None:
    site = site_with_real_ort(tmp_path / "site", "onnxruntime_gpu")
    os.utime(site / "onnxruntime_gpu-1.31.1.dist-info", (1_000, 1_000))  # the CPU build installed last
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    result = run_with_path(project, [site], "-W", "default::pytest_aaco.warnings.AacoFlavorWarning", "--collect-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "AacoFlavorWarning: 2 ONNX Runtime builds are installed over each other" in result.stdout
    assert ("pip uninstall -y onnxruntime && pip install --force-reinstall --no-deps onnxruntime-gpu==1.31.1"
            in result.stdout)


def test_two_builds_over_each_other_under_w_error_are_a_one_line_usage_error(tmp_path: Path) -> None:
    site = site_with_real_ort(tmp_path / "site", "onnxruntime_gpu")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    result = run_with_path(project, [site], "-W", "error")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: pytest-aaco: 2 ONNX Runtime builds are installed")
    assert "INTERNALERROR" not in result.stdout + result.stderr


@pytest.mark.parametrize("layout", ["target-folder", "system-site-packages"])
def test_a_build_shadowed_in_another_folder_gives_no_warning(tmp_path: Path, layout: str) -> None:
    """``pip install --target T onnxruntime-gpu`` with T on PYTHONPATH over this environment's CPU build,
    and a ``--system-site-packages`` venv with its own pinned wheel over the system's (here: the system's
    folder holds a second flavor after this environment's): one build per folder, Python imports the first."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    if layout == "target-folder":  # the flavor in the target folder, the CPU build in site-packages
        target = tmp_path / "target"
        target.mkdir()
        (target / "onnxruntime").symlink_to(Path(flavors.imported_root() or ".", "onnxruntime"),
                                            target_is_directory=True)
        fake_dist(target, "onnxruntime_gpu", "1.31.1", record="onnxruntime/__init__.py,sha256=x,1\n")
        path = [target]
    else:  # the venv's pinned CPU wheel first, a system folder with another flavor after it
        venv_site = site_with_real_ort(tmp_path / "venv-site")
        system = tmp_path / "system-site"
        system.mkdir()
        fake_dist(system, "onnxruntime_migraphx", "1.27.1", record="onnxruntime/__init__.py,sha256=x,1\n")
        path = [venv_site, system]
    result = run_with_path(project, path, "-W", "error", "--collect-only", "-q")  # the check runs at collection
    assert result.returncode == 0, result.stdout + result.stderr
    assert "AacoFlavorWarning" not in result.stdout + result.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), str(ROOT)])
    info = subprocess.run([sys.executable, "-c", "from pytest_aaco.cli import main; main(['info'])"],
                          env=env, capture_output=True, text=True, timeout=120)
    installed = [line for line in info.stdout.splitlines() if "installed as:" in line]
    assert installed and "(shadowed, not imported: " in installed[0], info.stdout + info.stderr
    assert "warning: " not in "".join(line for line in info.stdout.splitlines() if "ONNX Runtime builds" in line)


def test_two_builds_stay_quiet_in_a_run_without_the_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    site = tmp_path / "site"
    fake_dist(site, "onnxruntime_gpu", "1.31.1")
    monkeypatch.syspath_prepend(str(site))
    pytester.makepyfile(test_plain=PLAIN_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "error::pytest_aaco.warnings.AacoFlavorWarning")
    result.assert_outcomes(passed=1)
    assert "ONNX Runtime" not in result.stdout.str()


# ------------------------------------------------------------------ through pytest: no ONNX Runtime


@pytest.fixture(scope="module")
def site_without_ort(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of links to this environment's packages, ``onnxruntime`` and its metadata left out."""
    real = Path(sysconfig.get_paths()["purelib"])
    folder = tmp_path_factory.mktemp("site-without-ort")
    for entry in real.iterdir():
        if entry.name.lower().startswith("onnxruntime") or entry.suffix == ".pth":
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def run_without_ort(project: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a fresh interpreter that sees *site* (and this checkout), not site-packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site)])
    env["COLUMNS"] = "400"  # whole lines in the short test summary
    return subprocess.run([sys.executable, "-S", "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_hidden_environment_has_no_onnxruntime(tmp_path: Path, site_without_ort: Path) -> None:
    """The premise of the tests below: onnxruntime cannot be imported there, pytest and the plugin can."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site_without_ort)])
    probe = subprocess.run([sys.executable, "-S", "-c", "import pytest, pytest_aaco.plugin; import onnxruntime"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert "No module named 'onnxruntime'" in probe.stderr


def test_no_onnxruntime_is_a_one_line_error_for_an_aaco_item(tmp_path: Path, site_without_ort: Path) -> None:
    (tmp_path / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    result = run_without_ort(tmp_path, site_without_ort)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert errors == [f"ERROR: pytest-aaco: no ONNX Runtime in the Python at {sys.executable} (no module named"
                      f" 'onnxruntime'): {flavors.INSTALL_HINT}"]
    assert "Traceback" not in result.stdout + result.stderr
    assert "pip install 'pytest-aaco[cpu]'" in errors[0] and "'pytest-aaco[cuda]'" in errors[0] \
        and "'pytest-aaco[migraphx]'" in errors[0]


def test_no_onnxruntime_is_a_one_line_error_for_an_aaco_option(tmp_path: Path, site_without_ort: Path) -> None:
    (tmp_path / "test_plain.py").write_text(textwrap.dedent(PLAIN_TEST))
    result = run_without_ort(tmp_path, site_without_ort, "--aaco-provider=cpu")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert result.stderr.strip().startswith("ERROR: pytest-aaco: no ONNX Runtime")
    assert "Traceback" not in result.stdout + result.stderr


def test_no_onnxruntime_leaves_a_suite_without_the_plugin_alone(tmp_path: Path, site_without_ort: Path) -> None:
    (tmp_path / "test_plain.py").write_text(textwrap.dedent(PLAIN_TEST))
    result = run_without_ort(tmp_path, site_without_ort)
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "ONNX Runtime" not in result.stdout + result.stderr


def test_a_package_left_without_its_files_is_named(tmp_path: Path, site_without_ort: Path) -> None:
    """What ``pip uninstall onnxruntime`` leaves when onnxruntime-gpu was installed over it: a folder
    without ``__init__.py`` (here: with one leftover provider library), and the other build's metadata."""
    site = tmp_path / "site"
    (site / "onnxruntime" / "capi").mkdir(parents=True)
    (site / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so").write_bytes(b"")
    fake_dist(site, "onnxruntime_gpu", "1.31.1")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    env_site = f"{site}{os.pathsep}{site_without_ort}"
    result = run_without_ort(project, Path(env_site))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    line = result.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"ERROR: pytest-aaco: the ONNX Runtime package in {site / 'onnxruntime'} is incomplete")
    assert line.endswith("pip install --force-reinstall --no-deps onnxruntime-gpu==1.31.1")


def test_no_onnxruntime_under_xdist_fails_each_item_with_the_line(tmp_path: Path, site_without_ort: Path) -> None:
    """A pytest-xdist worker cannot stop the run with a usage error (its controller reports a crash):
    each pytest-aaco item fails with the same one line instead, and the run ends normally."""
    pytest.importorskip("xdist")
    (tmp_path / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    result = run_without_ort(tmp_path, site_without_ort, "-n", "1", "-rE")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert "ERROR test_perf.py::test_latency[squeezenet-cpu] - Failed: pytest-aaco: no ONNX Runtime" in output


def test_aaco_info_names_the_builds_and_the_shadowed_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_aaco.cli import main

    gpu = fake_dist(tmp_path, "onnxruntime_gpu", "1.31.1")
    os.utime(gpu, (1_000, 1_000))  # installed before this environment's CPU build
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["info", "--provider", "cpu"]) == 0
    out = capsys.readouterr().out
    # a build in another folder than the one Python imports onnxruntime from is shadowed: a line, no warning
    assert f"  installed as: onnxruntime-gpu==1.31.1 (shadowed, not imported: {tmp_path}), onnxruntime==" in out
    assert "ONNX Runtime builds are installed over each other" not in out


def test_a_build_that_cannot_be_imported_fails_the_item_in_one_line(tmp_path: Path, site_without_ort: Path) -> None:
    """onnxruntime 1.18.0 under numpy 2 raises ``ImportError('')`` (with numpy's message printed before;
    checked with the real wheels, .ci/ort_floors.sh): a package that does the same, with that
    release's metadata, stands in for it here. The item fails with one line naming the fix."""
    site = tmp_path / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("raise ImportError('')\n")
    fake_dist(site, "onnxruntime", "1.18.0")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_perf.py").write_text(textwrap.dedent(AACO_TEST))
    result = run_without_ort(project, Path(f"{site}{os.pathsep}{site_without_ort}"), "-k", "squeezenet")
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "Traceback" not in output
    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        fix = (f"onnxruntime 1.18.0 was built for numpy 1.x and numpy {numpy.__version__} is installed:"
               " pip install -U 'onnxruntime>=1.19'")
    else:  # the floors CI job runs numpy 1.x
        fix = "reinstall it: pip install --force-reinstall --no-deps onnxruntime==1.18.0"
    assert ("ERROR test_perf.py::test_latency[squeezenet-cpu] - Failed: pytest-aaco: ONNX Runtime cannot be"
            f" imported (onnxruntime 1.18.0; ImportError with no message): {fix}") in output


@pytest.mark.parametrize("release", ["1.24.4", "1.25.0"])
def test_a_wheel_needing_a_newer_glibc_is_told_apart_from_a_broken_install(
        release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40 finding 4: onnxruntime-migraphx 1.24.4 and 1.25.0 are tagged manylinux_2_34 but need glibc 2.38; on
    Ubuntu 22.04 (glibc 2.35) the import fails with the loader's words below, and reinstalling cannot help."""
    dist = flavors.OrtDistribution("onnxruntime-migraphx", release, tmp_path, 0.0)
    monkeypatch.setattr(flavors, "ort_distributions", lambda: [dist])
    monkeypatch.setattr(flavors, "glibc_version", lambda: "2.35")
    loader = ("/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /venv/lib/python3.10/"
              "site-packages/onnxruntime/capi/onnxruntime_pybind11_state.cpython-310-x86_64-linux-gnu.so)")
    line = flavors.import_problem(ImportError(loader))
    assert "reinstall it" not in line
    assert (f"onnxruntime-migraphx {release} needs glibc 2.38 and this system has glibc 2.35, so reinstalling cannot"
            " help: install a release that imports on glibc 2.36") in line
    assert "'onnxruntime-migraphx==1.27.1'" in line and "glibc 2.38 or newer" in line
    assert "\n" not in line


def test_glibc_version_is_this_processes() -> None:
    import platform

    name, version = platform.libc_ver()
    assert flavors.glibc_version() == (version if name == "glibc" and version else "unknown")
