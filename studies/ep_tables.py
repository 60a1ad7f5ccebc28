"""Count the tables of execution-provider facts in pytest_aaco, and the modules a change touched.

A table is a dict, set, list or tuple literal (``frozenset({...})`` included) whose keys (for a dict)
or elements name two or more execution providers: EP short names (``cuda``, ``migraphx`` ...) or
their aliases, ONNX Runtime EP names (``CUDAExecutionProvider``), or tuples holding one
(``("launch_bound", "cuda")``). A table with one EP key (``{"cuda": ("enable_cuda_graph", "1")}``)
assigned at module level counts too, in the second figure.

Usage::

    python studies/ep_tables.py                 # tables per module, now
    python studies/ep_tables.py --touched REV   # also: the package modules changed since git REV
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_aaco"
#: the EP short names and aliases pytest-aaco has known (a fixed list, so the count does not depend
#: on the table it counts)
EP_WORDS = frozenset({"cpu", "cuda", "tensorrt", "trt", "migraphx", "rocm", "openvino", "ov", "dml", "directml",
                      "vitisai", "coreml", "qnn"})
ORT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*ExecutionProvider$")
#: literals that name ROCm and MIGraphX as software (library versions), not as EPs
NOT_EP_TABLES = {("pytest_aaco/measure/environment.py", "rocm_version()"),
                 ("pytest_aaco/samplers/rocm_install.py", "gfx")}


def _names(node: ast.expr) -> int:
    """How many EP names *node* (a key or an element) holds: 1 for an EP string or a tuple holding one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return int(node.value in EP_WORDS or bool(ORT_NAME.match(node.value)))
    if isinstance(node, ast.Tuple):
        return int(any(_names(e) for e in node.elts))
    return 0


def _entries(node: ast.AST) -> list[ast.expr] | None:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None]
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return list(node.elts)
    return None


def tables(path: Path) -> list[tuple[int, int, str]]:
    """``(line, EP names, source head)`` of each EP table literal in *path* (nested literals: the outer one)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    rel = str(path.relative_to(ROOT))
    found: list[tuple[int, int, str]] = []
    module_level = set()
    for top in tree.body:
        value = top.value if isinstance(top, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and value.args:  # frozenset({...})
            value = value.args[0]
        if value is not None:
            module_level.add(id(value))
    for node in ast.walk(tree):
        entries = _entries(node)
        if entries is None:
            continue
        count = sum(_names(e) for e in entries)
        text = ast.get_source_segment(source, node) or ""
        if any(rel == f and word in text for f, word in NOT_EP_TABLES):
            continue
        if count >= 2 or (count == 1 and id(node) in module_level and isinstance(node, (ast.Dict, ast.Set))):
            found.append((getattr(node, "lineno", 0), count, " ".join(text.split())[:70]))
    return found


def touched(rev: str) -> list[str]:
    """Package modules (not tests, docs or studies) changed between git *rev* and the work tree."""
    out = subprocess.run(["git", "diff", "--name-only", rev, "--", "pytest_aaco"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return sorted(line for line in out.splitlines() if line.endswith(".py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--touched", metavar="REV", help="also list the package modules changed since REV")
    parser.add_argument("--exclude", action="append", default=[], help="a module to leave out (eps.py: the table)")
    args = parser.parse_args(argv)
    total, strict, modules = 0, 0, set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in args.exclude:
            continue
        for line, count, head in tables(path):
            total += 1
            strict += count >= 2
            modules.add(rel)
            print(f"{rel}:{line}: {count} EP name(s): {head}")
    print(f"EP tables: {total} in {len(modules)} modules ({strict} with two or more EP names)")
    if args.touched:
        changed = touched(args.touched)
        print(f"package modules changed since {args.touched}: {len(changed)}: {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
