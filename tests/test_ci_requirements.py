"""``.ci/requirements.py``: the floors job's pins and the set-ups' plugins, read from pyproject.toml."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "requirements.py"


def _module():
    spec = importlib.util.spec_from_file_location("ci_requirements", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_the_floors_of_this_project_pin_each_declared_lowest_version():
    """What the floors job installs: every dependency and the cpu and plots extras', at their floors."""
    ci = _module()
    pins = dict(line.split("==") for line in ci.floors(ci.project(), ["cpu", "plots"]))
    declared = ci.project()
    for text in [*declared["dependencies"], *declared["optional-dependencies"]["cpu"],
                 *declared["optional-dependencies"]["plots"]]:
        name, _, rest = text.partition(">=")
        if "python_version < '3.11'" in rest and sys.version_info >= (3, 11):
            assert name.strip() not in pins  # a marker that does not hold here: not installed here
            continue
        assert pins[name.strip()] == rest.split(";")[0].strip(), (text, pins)
    for name in ("pytest", "numpy", "scipy", "onnx", "onnxruntime", "matplotlib"):
        assert name in pins, pins  # the list: each one pinned


def test_a_marker_a_duplicate_and_a_missing_floor(tmp_path):
    ci = _module()
    table = ci.project(_pyproject(tmp_path, """
        [project]
        dependencies = ["a>=1.2", "b~=2.0", "c>=3; python_version < '3'", "d==4.1"]
        [project.optional-dependencies]
        x = ["A>=1.2", "e>=5,<6"]
        y = ["f"]
    """))
    assert ci.floors(table, ["x"]) == ["a==1.2", "b==2.0", "d==4.1", "e==5"]
    with pytest.raises(ci.NoFloor, match="'f' declares no lowest version"):
        ci.floors(table, ["y"])
    with pytest.raises(KeyError, match="no extra 'z' in pyproject.toml \\(there are: x, y\\)"):
        ci.extra(table, "z")


def test_the_command_line_prints_one_requirement_a_line_and_fails_naming_what_is_wrong():
    run = [sys.executable, str(SCRIPT)]
    setups = subprocess.run([*run, "extra", "setups"], capture_output=True, text=True, check=False)
    assert setups.returncode == 0, setups.stderr
    assert [line.split(">=")[0] for line in setups.stdout.split()] == [
        "pytest-randomly", "pytest-timeout", "pytest-rerunfailures", "pytest-cov", "coverage"]
    no_floor = subprocess.run([*run, "floors", "test"], capture_output=True, text=True, check=False)
    assert no_floor.returncode == 2 and "'wheel' declares no lowest version" in no_floor.stderr
    usage = subprocess.run(run, capture_output=True, text=True, check=False)
    assert usage.returncode == 2 and "floors [EXTRA ...]" in usage.stderr


def test_the_setups_plugins_stay_out_of_the_test_extra_and_the_floors_job_uses_the_script():
    """pytest-randomly in the suite's own environment reorders every pytester run (commit 54aabc8)."""
    ci = _module()
    test_extra = " ".join(ci.extra(ci.project(), "test"))
    for plugin in ci.extra(ci.project(), "setups"):
        assert plugin.split(">=")[0] not in test_extra
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    floors_job = workflow[workflow.index("\n  floors:"):workflow.index("\n  windows:")]
    assert "python .ci/requirements.py floors cpu plots" in floors_job
    assert '-c floors.txt -e ".[cpu,plots,test]"' in floors_job
    assert "--target .setups-plugins" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
