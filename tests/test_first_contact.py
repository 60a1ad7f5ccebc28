"""A newcomer's first ten minutes (issue 21): the README's "In your own project" section, run as written.

From an empty folder: install pytest-aaco from this checkout into a fresh virtualenv, write the
README's ``pyproject.toml``, registry and test (read from the README's ``<!-- first-contact: NAME -->``
blocks), run its commands in order (measure, save a baseline, gate, ``aaco baseline show`` from a
subfolder, ``aaco report``), check git ignores ``.aaco/``, then make a pull request that slows the
model down in a temporary git repository and run the README's ``--aaco-compare=origin/main``.

Offline and fast: the virtualenv has no pip of its own and sees this interpreter's packages through a
``.pth`` file; pytest-aaco goes in with ``pip install --no-deps --no-build-isolation -e``. The runs
use the README's quick-check options (``PYTEST_ADDOPTS``). It prints its time; the target is 3
minutes on 2 cores.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent
#: the README's quick local check ("What an item costs, and how to lower it")
QUICK = "--aaco-rounds=3 --aaco-iterations=5 --aaco-warmup=2 --aaco-reference=none --aaco-cold-start=0"
#: the pull request of the last step: a calibrated extra load on the model (the registry's extra_work)
SLOWER = "    extra_work: {matmuls: 20, size: 256}\n"


def readme_blocks() -> dict[str, str]:
    """The README's code blocks marked ``<!-- first-contact: NAME -->``, by NAME."""
    text = (CHECKOUT / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- first-contact: (\S+) -->\n```\w*\n(.*?)```", text, flags=re.S))


def readme_commands(block: str) -> list[list[str]]:
    """The ``$ command  # comment`` lines of a console block, split as a shell would."""
    return [shlex.split(line[2:], comments=True) for line in block.splitlines() if line.startswith("$ ")]


def test_the_readme_blocks_are_there():
    blocks = readme_blocks()
    assert set(blocks) == {"pyproject.toml", "perf/models.yaml", "perf/test_perf.py", "commands"}
    assert [c[:2] for c in readme_commands(blocks["commands"])] == [
        ["pytest", "perf"], ["pytest", "perf"], ["pytest", "perf"], ["aaco", "baseline"], ["aaco", "report"],
        ["pytest", "perf"]]


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh virtualenv with pytest-aaco installed from this checkout (editable, no download)."""
    started = time.perf_counter()
    # --no-build-isolation builds with this environment's setuptools: as new as the build needs
    floor = re.search(r'requires = \["setuptools>=(\d+)', (CHECKOUT / "pyproject.toml").read_text()).group(1)
    have = importlib.metadata.version("setuptools")
    if int(have.split(".")[0]) < int(floor):
        pytest.fail(f"setuptools {have} here, the build needs setuptools>={floor}: pip install -e '.[test]'"
                    " (the test extra brings it)", pytrace=False)
    folder = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "outer-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-e", str(CHECKOUT)], check=True, env=_env(tmp_path))
    print(f"virtualenv and install from the checkout: {time.perf_counter() - started:.0f} s")
    return folder


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYTEST_", "VIRTUAL_ENV"))}
    # hypothesis (the test extra's, which a newcomer's install lacks) is seen through the .pth: leave its plugin out
    env.update(PYTEST_ADDOPTS=f"{QUICK} -p no:cacheprovider -p no:hypothesispytest",
               AACO_CACHE_DIR=str(tmp_path / "cache"), GIT_AUTHOR_NAME="n", GIT_AUTHOR_EMAIL="n@example.com",
               GIT_COMMITTER_NAME="n", GIT_COMMITTER_EMAIL="n@example.com")
    return env


@pytest.mark.slow
def test_a_newcomer_gets_from_an_empty_folder_to_a_pull_request_gate(tmp_path, venv):
    started = time.perf_counter()
    blocks = readme_blocks()
    project = tmp_path / "project"
    for name in ("pyproject.toml", "perf/models.yaml", "perf/test_perf.py"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(blocks[name])
    env = _env(tmp_path)

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=project, check=True, capture_output=True, text=True,
                              env=env).stdout

    def run(argv: list[str], cwd: Path = project) -> tuple[int, str]:
        exe = [str(venv / "bin" / "python"), "-m", "pytest"] if argv[0] == "pytest" else [str(venv / "bin" / "aaco")]
        done = subprocess.run(exe + argv[1:], cwd=cwd, env=env, capture_output=True, text=True, timeout=170)
        print(f"$ {shlex.join(argv)}  -> rc {done.returncode}\n{done.stdout[-1500:]}{done.stderr[-800:]}")
        return done.returncode, done.stdout + done.stderr

    git("init", "-q")
    first, save, gate, show, report, compare = readme_commands(blocks["commands"])
    code, out = run(first)
    assert code == 0 and re.search(r"squeezenet\s+cpu\s.*no-baseline", out)
    code, out = run(save)
    assert code == 0 and re.search(r"squeezenet\s+cpu\s.*saved", out)
    assert len(list((project / "baselines").rglob("*.json"))) == 1
    code, out = run(gate)
    verdict = re.search(r"squeezenet\s+cpu\s.*\s(no-regression|inconclusive|regression|improvement)\b", out)
    assert verdict is not None, out
    # a false alarm on one baseline run is possible, but then it says so, as the gate must
    assert code == 0 or "REGRESSION squeezenet[cpu]" in out
    code, out = run(show, cwd=project / "perf")  # from a subfolder
    assert code == 0 and "perf/test_perf.py::test_latency[squeezenet-cpu]" in out
    code, out = run(report, cwd=project / "perf")
    assert code in (0, 1) and out.startswith(f"latest session bundle: {project / '.aaco' / 'sessions'}")
    status = git("status", "--porcelain", "--untracked-files=all")
    assert ".aaco" not in status and "baselines/" in status
    # the base branch, then a pull request that makes the model slower
    git("add", "-A")
    git("commit", "-qm", "perf test and baseline")
    git("update-ref", "refs/remotes/origin/main", "HEAD")
    with (project / "perf" / "models.yaml").open("a") as registry:
        registry.write(SLOWER)
    code, out = run(compare)
    assert code == 1 and "REGRESSION squeezenet[cpu]" in out and "vs origin/main" in out
    assert "measured side by side" in out
    print(f"first contact: {time.perf_counter() - started:.0f} s for the README's steps, after the install")
