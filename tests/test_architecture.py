"""The package's import graph: dependencies point one way and the lazy imports are the documented ones.

Built with :mod:`ast` from the source, so it sees imports inside functions too (a cycle through
a deferred import is still a cycle). ``if TYPE_CHECKING:`` imports are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pytest_aaco

PACKAGE = Path(pytest_aaco.__file__).parent
#: package modules others may import inside a function: none (heavy third-party libraries are
#: imported inside the functions that use them, so every module of the package is cheap to import)
DEFERRED_ALLOWED: frozenset[str] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = current.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    if not base.startswith("pytest_aaco"):
        return []
    if node.module is None:  # from . import stats
        return [f"{base}.{alias.name}" for alias in node.names]
    return [base]


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def import_graph() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """``(graph, deferred)``: edges module -> imported package modules (all that run), and the
    imports made inside functions as ``(module, target, line)``."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    deferred = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(name, path.name == "__init__.py", node)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("pytest_aaco")]
            targets = [t if t in modules else t.rsplit(".", 1)[0] for t in targets]
            for target in targets:
                if target in modules and target != name and target != "pytest_aaco":
                    graph[name].add(target)
                    if id(node) not in top:
                        deferred.append((name, target, node.lineno))
    return graph, deferred


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of *graph* as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_cycle():
    graph, _ = import_graph()
    assert find_cycle(graph) is None


def test_no_intra_package_import_inside_a_function():
    _, deferred = import_graph()
    wrong = [f"{m}:{line} imports {t}" for m, t, line in deferred if t not in DEFERRED_ALLOWED]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("low", "high"), [
    ("pytest_aaco.records", "pytest_aaco.session"),
    ("pytest_aaco.gate", "pytest_aaco.session"),
    ("pytest_aaco.reports.terminal", "pytest_aaco.session"),
    ("pytest_aaco.reports.html", "pytest_aaco.session"),
    ("pytest_aaco.history.judge", "pytest_aaco.gate"),
    ("pytest_aaco.session", "pytest_aaco.plugin"),
])
def test_dependencies_point_down(low, high):
    """*low* never reaches *high*, directly or through other modules."""
    graph, _ = import_graph()
    seen, todo = set(), [low]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(graph[node])
    assert high not in seen
