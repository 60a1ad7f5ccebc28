"""Every ``pytest_aaco.…`` name that the package's docstrings and the docs cite exists: a reader sent to
a function, class, field or module finds it (moved code left references to names that had gone)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "pytest_aaco").rglob("*.py")) + sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
NAME = re.compile(r"pytest_aaco(?:\.[A-Za-z_]\w*)+")


def _exists(dotted: str) -> bool:
    """Whether *dotted* names a module, or an attribute (a dataclass field counts) reached from one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if hasattr(obj, part):
                obj = getattr(obj, part)
            elif dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
                return part == parts[-1]  # a field without a default: nothing is reached from it
            else:
                return False
        return True
    return False


def test_every_cited_name_exists():
    missing = sorted({(path.relative_to(ROOT).as_posix(), found.group(0).rstrip("."))
                      for path in SOURCES for found in NAME.finditer(path.read_text(encoding="utf-8"))
                      if not _exists(found.group(0).rstrip("."))})
    assert not missing, "\n".join(f"{path}: {name}" for path, name in missing)


def test_the_check_sees_a_name_that_is_gone():
    assert _exists("pytest_aaco.records.verdict.Verdict.judgements")
    assert _exists("pytest_aaco.eps.CompileCache.user_keys")  # a dataclass field
    assert not _exists("pytest_aaco.runner.SessionError")
    assert not _exists("pytest_aaco.records.verdict.Verdict.no_such_thing")
