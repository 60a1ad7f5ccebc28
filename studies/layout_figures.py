"""The layout figures of issue 18 for one tree of the package: import circles, import floors,
modules at the package root, and ``Any`` tokens.

* **import circles**: strongly connected components of more than one module in the import graph
  of ``tests/test_architecture.py`` (:func:`import_graph`: every import the source makes, inside
  functions and under ``if TYPE_CHECKING:`` too), found with Tarjan's algorithm (Tarjan, SIAM J.
  Comput. 1972);
* **import floors**: the longest import chain from any module down to one that imports nothing
  of the package (such a module is floor 1), as ``tests/test_architecture.py`` counts them; a
  circle counts as one module (the graph of its components);
* **root modules**: ``*.py`` files directly in ``pytest_aaco/``, ``__init__.py`` included (as the
  architecture test counts them);
* **Any tokens**: the word ``Any`` in the package's ``*.py`` files, as
  ``grep -ow Any -r pytest_aaco --include=*.py | wc -l`` counts it;
* **.get( calls**: the text ``.get(`` in ``pytest_aaco/reports/`` and the ``aaco`` command
  (``pytest_aaco/cli.py`` or the ``pytest_aaco/cli/`` package), and in the whole package: dict
  look-ups where a typed record would say what a field is.
* **verdict finishing call sites**: the calls (read with :mod:`ast`) that finish a verdict, i.e. set
  whether it fails and render its message: calls of a function named ``finish`` or ``settle`` (the
  pipeline that ends in ``finish``), except the one call of ``finish`` inside ``settle`` itself (its
  implementation); methods such as ``bundle.finish(...)`` are not counted.

Usage (from the repository root)::

    python studies/layout_figures.py                 # the working tree
    python studies/layout_figures.py --rev 9c3e89e   # a commit (git archive into a temporary folder)
    python studies/layout_figures.py --tree DIR      # DIR/pytest_aaco

Prints one line per figure, and the circles and the deepest chain.
"""

from __future__ import annotations

import argparse
import ast
import re
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


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of *graph* with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for start in sorted(graph):
        if start not in index:
            visit(start)
    return found


def condensed(graph: dict[str, set[str]], found: list[list[str]]) -> dict[str, set[str]]:
    """*graph* with each circle merged into one node (named by its first module), so it is acyclic."""
    rep = {m: members[0] for members in found for m in members}
    out: dict[str, set[str]] = {}
    for node, targets in graph.items():
        here = rep.get(node, node)
        out.setdefault(here, set()).update(rep.get(t, t) for t in targets if rep.get(t, t) != here)
    return out


def deepest_chain(graph: dict[str, set[str]], floor: dict[str, int]) -> list[str]:
    node = max(sorted(floor), key=floor.__getitem__)
    chain = [node]
    while graph[node]:
        node = max(sorted(graph[node]), key=floor.__getitem__)
        chain.append(node)
    return chain


def finishing_sites(package: Path) -> list[str]:
    """``module:line in function`` of every call that finishes a verdict (see the module docstring)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(func):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("finish", "settle")):
                    continue
                if func.name == "settle" and node.func.id == "finish":
                    continue  # settle's own last step
                inner = [f for f in ast.walk(func) if f is not func
                         and isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in ast.walk(f)]
                if inner:
                    continue  # counted with the innermost function
                where = path.relative_to(package.parent).with_suffix("")
                found.append(f"{'.'.join(where.parts)}:{node.lineno} in {func.name}")
    return sorted(set(found))


@dataclass(frozen=True)
class Figures:
    """The figures of one tree (see the module docstring)."""

    modules: int
    circles: list[list[str]]
    floors: int
    chain: list[str]
    root_modules: int
    any_tokens: int
    gets_at_edge: int
    gets: int
    finishing: list[str]


def figures(package: Path) -> Figures:
    """The figures of the package folder *package* (a ``pytest_aaco`` folder)."""
    arch.PACKAGE = package  # import_graph and _module_name read it when called
    graph, _ = arch.import_graph()
    found = circles(graph)
    dag = condensed(graph, found)
    floor = arch.floors(dag)
    texts = {p: p.read_text(encoding="utf-8") for p in package.rglob("*.py")}
    any_tokens = sum(len(re.findall(r"\bAny\b", text)) for text in texts.values())
    edge = [package / "reports", package / "cli"]
    gets = {p: text.count(".get(") for p, text in texts.items()}
    at_edge = sum(n for p, n in gets.items() if p == package / "cli.py" or any(d in p.parents for d in edge))
    return Figures(len(graph), found, max(floor.values()), deepest_chain(dag, floor),
                   len(list(package.glob("*.py"))), any_tokens, at_edge, sum(gets.values()),
                   finishing_sites(package))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--rev", help="a git revision of this repository")
    where.add_argument("--tree", type=Path, help="a folder that holds pytest_aaco/")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aaco-layout-") as tmp:
        if args.rev:
            data = subprocess.run(["git", "-C", str(ROOT), "archive", args.rev, "pytest_aaco"], check=True,
                                  capture_output=True).stdout
            with tarfile.open(fileobj=BytesIO(data)) as tar:
                tar.extractall(tmp, filter="data")
            package = Path(tmp) / "pytest_aaco"
        else:
            package = (args.tree or ROOT) / "pytest_aaco"
        found = figures(package)
    label = args.rev or str(args.tree or "working tree")
    print(f"tree: {label} ({found.modules} modules)")
    print(f"import circles (TYPE_CHECKING imports counted): {len(found.circles)}")
    for members in found.circles:
        print(f"  circle of {len(members)}: {', '.join(m.removeprefix('pytest_aaco.') for m in members)}")
    print(f"import floors: {found.floors}")
    print("  deepest chain: " + " -> ".join(m.removeprefix("pytest_aaco.") for m in found.chain))
    print(f"modules at the package root (*.py, __init__.py included): {found.root_modules}")
    print(f"Any tokens in pytest_aaco: {found.any_tokens}")
    print(f".get( calls in reports/ and the aaco command: {found.gets_at_edge}; in pytest_aaco: {found.gets}")
    print(f"verdict finishing call sites: {len(found.finishing)}")
    for site in found.finishing:
        print(f"  {site.removeprefix('pytest_aaco.')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
