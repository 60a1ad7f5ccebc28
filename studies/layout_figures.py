"""The layout figures of issue 41 for one tree of the package:

* **import floors**: the longest import chain from any module down to one that imports nothing of the
  package (floor 1), as ``tests/test_architecture.py`` counts them (``__main__`` left out), and the
  modules at the package root;
* **modules over 700 lines** and **classes over 250 lines** (a class from its ``class`` line to its
  last line, decorators left out), the limits of issue 41;
* **the judgement walk**: the modules of the package entered while one stored-gate item is judged,
  traced (:func:`sys.setprofile`) from the call of ``pytest_aaco.gate.judge`` to its return in a real
  pytest run (in a child process: the tiny model of ``tests/conftest.py``, two runs saved with
  ``--aaco-save-baseline``, then one gated run whose first item is traced; ``--aaco-confirm=off``, so
  the walk does not depend on whether a confirmation look was taken). A *room* is a module entered
  (counted once, ``gate`` included); a *climb* is a call from a module into one it was called from
  (one below it on the call stack, the callers of ``gate.judge`` included, or one that called it
  earlier in the walk), counted once per (from, to) pair. The walk is drawn as a tree: one line per
  new module path (the call stack with consecutive frames of one module merged), in the order first
  entered; ``^`` marks a climb.

Usage (from the repository root)::

    python studies/layout_figures.py                 # the working tree
    python studies/layout_figures.py --rev 9c3e89e   # a commit (git archive into a temporary folder)
    python studies/layout_figures.py --tree DIR      # DIR/pytest_aaco
    python studies/layout_figures.py --no-walk       # without the traced judgement (no pytest run)

Prints one line per figure, the long modules and classes, and the walk drawn.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the package and its architecture test, from this checkout

import test_architecture as arch  # noqa: E402 - after the path is set

MODULE_LIMIT = 700  #: lines (issue 41)
CLASS_LIMIT = 250  #: lines (issue 41)


def long_modules(package: Path) -> list[tuple[str, int]]:
    """``(module path, lines)`` of the modules over :data:`MODULE_LIMIT` lines, longest first."""
    found = []
    for path in package.rglob("*.py"):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MODULE_LIMIT:
            found.append((str(path.relative_to(package.parent)), lines))
    return sorted(found, key=lambda f: (-f[1], f[0]))


def long_classes(package: Path) -> list[tuple[str, int]]:
    """``(module:Class, lines)`` of the classes over :data:`CLASS_LIMIT` lines, longest first."""
    found = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > CLASS_LIMIT:
                    found.append((f"{path.relative_to(package.parent)}:{node.name}", lines))
    return sorted(found, key=lambda f: (-f[1], f[0]))


WALK_REGISTRY = "models:\n  tiny:\n    path: tiny.onnx\n"
WALK_TEST = "def test_latency(benchmark_model):\n    benchmark_model()\n"
WALK_ARGS = ("--aaco-models=models.yaml", "--aaco-warmup=2", "--aaco-rounds=3", "--aaco-iterations=20",
             "--aaco-no-bundle", "--aaco-max-contention=off", "--aaco-confirm=off", "-p", "no:cacheprovider",
             "-q", "-p", "no:randomly")


def trace_walk(tree: Path) -> list[tuple[str, ...]]:
    """The module paths (call stacks, one module's consecutive frames merged) of every call inside the first
    ``gate.judge`` of a gated run of the tiny model; *tree* holds the ``pytest_aaco`` traced."""
    sys.path.insert(0, str(tree))
    for name in [m for m in sys.modules if m == "pytest_aaco" or m.startswith("pytest_aaco.")]:
        del sys.modules[name]  # the architecture test imported this checkout's package
    import importlib.util

    import pytest

    traced = (importlib.util.find_spec("pytest_aaco") or SystemExit("no pytest_aaco to trace")).origin or ""
    if not Path(traced).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the traced package is {traced}, not the one in {tree}")
    from conftest import make_tiny_model  # tests/conftest.py of this checkout

    paths: list[tuple[str, ...]] = []
    stack: list[str] = []  # the module of every frame since gate.judge was called, its callers' first
    state = {"base": 0, "done": False}

    def short(name: str) -> str:
        return name.removeprefix("pytest_aaco.") if name.startswith("pytest_aaco.") else ""

    def merged(frames: list[str]) -> tuple[str, ...]:
        out: list[str] = []
        for m in frames:
            if m and (not out or out[-1] != m):
                out.append(m)
        return tuple(out)

    def profile(frame, event, _arg):  # noqa: ANN001, ANN202 - the sys.setprofile signature
        if state["done"] or event not in ("call", "return"):
            return
        if event == "call":
            if not stack:
                if frame.f_globals.get("__name__") == "pytest_aaco.gate" and frame.f_code.co_name == "judge":
                    callers, up = [], frame.f_back
                    while up is not None:
                        callers.append(short(up.f_globals.get("__name__", "")))
                        up = up.f_back
                    stack.extend(merged(callers[::-1]))
                    state["base"] = len(stack)
                    stack.append("gate")
                    paths.append(merged(stack))
                return
            module = short(frame.f_globals.get("__name__", ""))
            caller = next((m for m in reversed(stack) if m), "")
            stack.append(module)
            if module and module != caller:  # a call that enters a module
                paths.append(merged(stack))
        elif stack:
            stack.pop()
            if len(stack) == state["base"]:
                state["done"] = True

    with tempfile.TemporaryDirectory(prefix="aaco-walk-") as tmp:
        project = Path(tmp)
        make_tiny_model(project / "tiny.onnx")
        (project / "models.yaml").write_text(WALK_REGISTRY, encoding="utf-8")
        (project / "test_perf.py").write_text(WALK_TEST, encoding="utf-8")
        os.chdir(project)
        for _ in range(2):
            if pytest.main([*WALK_ARGS, "--aaco-save-baseline"]) != 0:
                raise SystemExit("the walk's baseline run failed")
        sys.setprofile(profile)
        try:
            pytest.main(list(WALK_ARGS))
        finally:
            sys.setprofile(None)
    if not paths:
        raise SystemExit("gate.judge was not called")
    return paths


@dataclass(frozen=True)
class Walk:
    """The module paths in the order entered (:func:`trace_walk`); the first is the stack down to ``gate``."""

    paths: list[tuple[str, ...]]

    @property
    def base(self) -> int:
        """The modules below ``gate`` on the call stack."""
        return len(self.paths[0]) - 1

    @property
    def rooms(self) -> list[str]:
        """The modules entered, ``gate`` first, each once."""
        return list(dict.fromkeys(m for p in self.paths for m in p[self.base:]))

    @property
    def climbs(self) -> list[tuple[str, str]]:
        """``(from, to)`` of the calls into a module *from* was called from (see the module docstring)."""
        called: set[tuple[str, str]] = set(zip(self.paths[0], self.paths[0][1:], strict=False))
        found: list[tuple[str, str]] = []
        for path in self.paths[1:]:
            if len(path) < 2:
                continue
            edge = (path[-2], path[-1])
            if (path[-1] in path[:-1] or edge[::-1] in called) and edge not in found:
                found.append(edge)
            called.add(edge)
        return found

    def drawn(self) -> list[str]:
        """The walk as an indented tree, each module path once, ``^`` marking a climb."""
        lines, seen, shown = [], set(), self.paths[0][:self.base]
        climbs = set(self.climbs)
        for path in self.paths:
            if path in seen:
                continue
            seen.add(path)
            pairs = enumerate(zip(path, shown, strict=False))
            common = next((i for i, (a, b) in pairs if a != b), min(len(path), len(shown)))
            for depth in range(max(common, self.base), len(path)):
                edge = path[depth - 1:depth + 1]
                mark = "^ " if depth > self.base and edge in climbs else ""
                lines.append("  " + "|  " * (depth - self.base) + mark + path[depth])
            shown = path
        return lines


def walk_of(tree: Path) -> Walk:
    """:func:`trace_walk` of *tree* in a child process (a fresh interpreter: the tree's modules only)."""
    found = subprocess.run([sys.executable, __file__, "--walk-child", str(tree)], capture_output=True, text=True,
                           check=False)
    if found.returncode != 0:
        raise SystemExit(f"the traced judgement failed:\n{found.stdout[-3000:]}{found.stderr[-3000:]}")
    marker = found.stdout.rindex("WALK ")
    return Walk([tuple(line.split()) for line in found.stdout[marker + 5:].strip().split("\n") if line])


def floors_of(package: Path) -> tuple[int, list[str], int]:
    """The import floors of *package*, the deepest chain (module names) and the modules at its root."""
    arch.PACKAGE = package  # import_graph and _module_name read it when called
    graph, _ = arch.import_graph()
    graph.pop("pytest_aaco.__main__", None)
    floor = arch.floors(graph)
    node = max(sorted(floor), key=floor.__getitem__)
    chain = [node]
    while graph[node]:
        node = max(sorted(graph[node]), key=floor.__getitem__)
        chain.append(node)
    return floor[chain[0]], chain, len(list(package.glob("*.py")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--rev", help="a git revision of this repository")
    where.add_argument("--tree", type=Path, help="a folder that holds pytest_aaco/")
    parser.add_argument("--no-walk", action="store_true", help="leave the traced judgement out")
    parser.add_argument("--walk-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.walk_child:
        paths = trace_walk(args.walk_child)
        print("WALK " + "\n".join(" ".join(p) for p in paths))
        return 0
    with tempfile.TemporaryDirectory(prefix="aaco-layout-") as tmp:
        if args.rev:
            data = subprocess.run(["git", "-C", str(ROOT), "archive", args.rev, "pytest_aaco"], check=True,
                                  capture_output=True).stdout
            with tarfile.open(fileobj=BytesIO(data)) as tar:
                tar.extractall(tmp, filter="data")
            package = Path(tmp) / "pytest_aaco"
        else:
            package = (args.tree or ROOT) / "pytest_aaco"
        floors, chain, root = floors_of(package)
        modules, classes = long_modules(package), long_classes(package)
        walk = None if args.no_walk else walk_of(package.parent)
    label = args.rev or str(args.tree or "working tree")
    print(f"tree: {label}")
    print(f"import floors: {floors}; deepest chain: " + " -> ".join(m.removeprefix("pytest_aaco.") for m in chain))
    print(f"modules at the package root (*.py, __init__.py included): {root}")
    print(f"modules over {MODULE_LIMIT} lines: {len(modules)}")
    for name, lines in modules:
        print(f"  {lines:5d}  {name}")
    print(f"classes over {CLASS_LIMIT} lines: {len(classes)}")
    for name, lines in classes:
        print(f"  {lines:5d}  {name}")
    if walk is not None:
        print(f"judgement walk (gate.judge of one stored-gate item, traced): {len(walk.rooms)} rooms, "
              f"{len(walk.climbs)} climbs back")
        print("\n".join(walk.drawn()))
        print("  climbs: " + ", ".join(f"{a} -> {b}" for a, b in walk.climbs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
