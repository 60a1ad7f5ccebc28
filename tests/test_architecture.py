"""The package's import graph: dependencies point one way and the lazy imports are the documented ones.

Built with :mod:`ast` from the source, so it sees imports inside functions too (a cycle through
a deferred import is still a cycle), and ``if TYPE_CHECKING:`` imports too: a circle that only mypy
walks is still a circle in the design.

The layout's rules, bottom to top (a layer imports only its own layer and the ones below it):

0. root foundation: ``options``, ``warnings``, ``jsonio``, ``redact``, ``records``, ``hookspecs``, ``eps``
1. ``samplers/``
2. ``tracers/`` (kernel tracers: CUPTI in process, rocprofv3 around a child that ``measure/`` runs)
3. ``verdict/`` (pure statistics: neither ``measure/`` nor onnxruntime nor pytest)
4. ``measure/``
5. ``history/`` (stored baselines: read and written only by the root face; see :data:`NO_HISTORY`)
6. ``passes/``
7. ``sidebyside/`` (its worker, ``sidebyside/worker.py``, imports nothing of the package)
8. ``reports/``
9. root face: ``config``, ``benchmark``, ``extra_passes``, ``gate``, ``session``, ``plugin``, ``cli``

Besides the layers: the side-by-side gate, the report writers and the extra passes never import
``history/`` (:data:`NO_HISTORY`): the side-by-side gate is the stored gate's peer, not its client;
writers read records, not baseline files (the HTML gets them through its report context).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_aaco

PACKAGE = Path(pytest_aaco.__file__).parent
#: the one module that may import package modules inside a function (or under TYPE_CHECKING): the
#: pytest entry point, the lazy boundary. It registers options, hooks and fixtures, and imports the
#: session object (and with it the rest of the package) only when a run uses the plugin, so a suite
#: that never does pays for the option table alone. Everywhere else, imports of the package sit at the
#: top of the module (heavy third-party libraries are imported inside the functions that use them).
LAZY_BOUNDARY = "pytest_aaco.plugin"
#: all that loading the entry point imports of the package
PLUGIN_LOAD_TIME = frozenset({"pytest_aaco.plugin", "pytest_aaco.options", "pytest_aaco.hookspecs",
                              "pytest_aaco.jsonio", "pytest_aaco.eps"})


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
    # from pytest_aaco import hookspecs: a module of the package, or a name in the package's module
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


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
        skip: set[int] = set()  # TYPE_CHECKING imports count (see the module docstring)
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


FOUNDATION = {"options", "warnings", "jsonio", "redact", "records", "hookspecs", "eps", ""}
LAYERS = ["samplers", "tracers", "verdict", "measure", "history", "passes", "sidebyside", "reports"]
#: 16 before ``eps.py`` (the one table of execution-provider facts, DESIGN.md's root module) came; 18 with
#: ``api.py``, the public API for scripts (docs/api.md)
MAX_ROOT_MODULES = 18
#: 11 once ``from pytest_aaco import eps`` edges were seen; 9 since the device series sits with the tracers'
#: blocks (tracers.base), the fingerprint's rules in history.comparable, and the placement check in extra_passes
MAX_FLOORS = 9


def layer(module: str) -> int:
    """The layer of a package module (see the module docstring): 0 foundation ... 9 root face."""
    rest = module.removeprefix("pytest_aaco").lstrip(".")
    head = rest.split(".")[0]
    if head in FOUNDATION:
        return 0
    if head in LAYERS:
        return 1 + LAYERS.index(head)
    return len(LAYERS) + 1


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor: its longest import chain down to a module that imports nothing of the
    package (such a module is floor 1). Needs an acyclic graph."""
    memo: dict[str, int] = {}

    def floor(node: str) -> int:
        if node not in memo:
            memo[node] = 1 + max((floor(n) for n in graph[node]), default=0)
        return memo[node]

    return {node: floor(node) for node in graph}


def test_nothing_imports_upward():
    graph, _ = import_graph()
    wrong = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
             for m, targets in graph.items() for t in targets if layer(t) > layer(m)]
    assert not wrong, "\n".join(sorted(wrong))


#: packages that never import ``history/``, not even inside a function or under TYPE_CHECKING
NO_HISTORY = ("sidebyside", "reports", "passes")


def history_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module imports target`` for every import of ``pytest_aaco.history`` by a module of :data:`NO_HISTORY`."""
    return sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                  if m.split(".")[1:2] and m.split(".")[1] in NO_HISTORY
                  and (t == "pytest_aaco.history" or t.startswith("pytest_aaco.history.")))


def test_side_by_side_writers_and_passes_never_import_the_stored_baselines():
    graph, _ = import_graph()
    wrong = history_imports(graph)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("source", [
    "from pytest_aaco.history.store import load_baseline\n",
    "def f():\n    from pytest_aaco.history import judge\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_aaco.history.judge import StoredGate\n",
    "import pytest_aaco.history.store\n",
])
def test_the_history_boundary_check_sees_every_kind_of_import(tmp_path, source):
    """A direct, a lazy (inside a function), a TYPE_CHECKING and a plain ``import`` are each seen."""
    global PACKAGE
    package = tmp_path / "pytest_aaco"
    for path, text in (("__init__.py", ""), ("history/__init__.py", ""), ("history/store.py", ""),
                       ("history/judge.py", ""), ("reports/__init__.py", ""), ("reports/writer.py", source)):
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(text)
    saved, PACKAGE = PACKAGE, package
    try:
        graph, _ = import_graph()
    finally:
        PACKAGE = saved
    assert history_imports(graph) and history_imports(graph)[0].startswith("pytest_aaco.reports.writer imports")


def test_import_floors_and_root_modules_stay_few():
    graph, _ = import_graph()
    assert find_cycle(graph) is None
    # ``python -m pytest_aaco`` is a two-line shim over the aaco command (cli.main): the command is the top floor
    deepest = max(v for k, v in floors(graph).items() if k != "pytest_aaco.__main__")
    assert deepest <= MAX_FLOORS, f"{deepest} import floors"
    root = [p for p in PACKAGE.glob("*.py")]
    assert len(root) <= MAX_ROOT_MODULES, sorted(p.name for p in root)


def _third_party_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_verdict_engine_needs_neither_onnxruntime_nor_pytest_nor_measuring():
    graph, _ = import_graph()
    for path in (PACKAGE / "verdict").glob("*.py"):
        name = _module_name(path)
        assert not _third_party_imports(path) & {"onnxruntime", "pytest", "_pytest"}, name
        assert not [t for t in graph[name] if t.startswith("pytest_aaco.measure")], name


def test_the_side_worker_imports_nothing_of_the_package():
    graph, _ = import_graph()
    assert graph["pytest_aaco.sidebyside.worker"] == set()
    assert "pytest_aaco" not in _third_party_imports(PACKAGE / "sidebyside" / "worker.py")


def test_an_import_circle_through_type_checking_is_seen(tmp_path):
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_aaco.session import X\n")
    assert _type_checking_lines(tree)  # the helper still finds them; import_graph no longer skips them
    graph, _ = import_graph()
    assert "pytest_aaco.benchmark" not in graph["pytest_aaco.records.item"]


CITED_FILE = re.compile(r"(?<![\w/.])((?:docs|studies|tests|pytest_aaco|baselines|\.github)/[\w./-]+"
                        r"\.(?:md|py|yml|yaml|sh))|\b(DESIGN\.md)")


def test_no_docstring_or_comment_cites_a_file_that_is_not_in_the_repository():
    repo = PACKAGE.parent
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in CITED_FILE.finditer(line):
                cited = match.group(1) or match.group(2)
                if match.group(2) or not (repo / cited).exists():
                    missing.append(f"{path.relative_to(repo)}:{lineno} cites {cited}")
    assert not missing, "\n".join(missing)


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_cycle():
    graph, _ = import_graph()
    assert find_cycle(graph) is None


def test_no_intra_package_import_inside_a_function():
    """Only the lazy boundary (:data:`LAZY_BOUNDARY`) imports package modules inside functions."""
    _, deferred = import_graph()
    wrong = [f"{m}:{line} imports {t}" for m, t, line in deferred if m != LAZY_BOUNDARY]
    assert not wrong, "\n".join(wrong)
    assert any(m == LAZY_BOUNDARY and t == "pytest_aaco.session" for m, t, _ in deferred)  # the rule still bites


def test_loading_the_plugin_imports_only_the_option_table_and_the_hook_specifications():
    graph, deferred = import_graph()
    lazy = {(m, t) for m, t, _ in deferred}
    seen, todo = set(), [LAZY_BOUNDARY]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(t for t in graph[node] if (node, t) not in lazy)
    assert seen == PLUGIN_LOAD_TIME


@pytest.mark.parametrize(("low", "high"), [
    ("pytest_aaco.records.item", "pytest_aaco.session"),
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


#: literals that name ROCm and MIGraphX as software (the library versions of the environment record), not as EPs
NOT_EP_FACTS = ("rocm_version(",)


def _ep_names_in(node: ast.expr, names: frozenset[str]) -> int:
    """1 when *node* (a dict key or an element) is an EP name, or a tuple holding one; else 0."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        return int(text in names or bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*ExecutionProvider", text)))
    if isinstance(node, ast.Tuple):
        return int(any(_ep_names_in(e, names) for e in node.elts))
    return 0


def ep_tables(path: Path) -> list[str]:
    """The dict, set, list and tuple literals of *path* keyed by (or holding) two or more execution providers:
    short names and aliases of :data:`pytest_aaco.eps.ALL`, or ORT EP names (``CUDAExecutionProvider``)."""
    from pytest_aaco import eps

    names = frozenset(n for ep in eps.ALL for n in (ep.short, *ep.aliases))
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            entries: list[ast.expr] = [k for k in node.keys if k is not None]
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            entries = list(node.elts)
        else:
            continue
        text = ast.get_source_segment(source, node) or ""
        if sum(_ep_names_in(e, names) for e in entries) >= 2 and not any(n in text for n in NOT_EP_FACTS):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {' '.join(text.split())[:80]}")
    return found


def test_the_execution_provider_facts_live_in_one_table():
    """Only ``eps.py`` lists execution providers: everything else asks their ``Ep`` record."""
    wrong = [t for path in sorted(PACKAGE.rglob("*.py")) if path.name != "eps.py" or path.parent != PACKAGE
             for t in ep_tables(path)]
    assert not wrong, "\n".join(wrong)


def test_the_ep_table_check_sees_a_table(tmp_path):
    module = tmp_path / "pytest_aaco" / "x.py"
    module.parent.mkdir()
    module.write_text('A = {"cuda": 1, "tensorrt": 2}\nB = ("CUDAExecutionProvider", "TensorrtExecutionProvider")\n'
                      'C = {("launch_bound", "cuda"): "x", ("launch_bound", "rocm"): "y"}\nD = {"cuda"}\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "pytest_aaco"
    try:
        assert [line.split(":")[1] for line in ep_tables(module)] == ["1", "2", "3"]
    finally:
        PACKAGE = saved


#: the scripts behind the docs' figures (studies/README.md)
STUDIES = Path(__file__).resolve().parents[1] / "studies"
#: studies/ scripts that still import the package below its public API, and why; the list only shrinks
#: (a script that no longer needs its entry fails :func:`test_studies_use_only_the_public_api`)
STUDIES_BELOW_THE_API = {
    "sbs_overhead.py": "compares the side-by-side gate's own layouts (its side factories, pytest_aaco.sidebyside);"
                       " its A/A is a pytest run with --aaco-compare-python, and should become one",
}
_FROM_IMPORT = re.compile(r"\bfrom\s+(pytest_aaco[\w.]*)\s+import\s+\(?\s*(\w+)")
_PLAIN_IMPORT = re.compile(r"\bimport\s+(pytest_aaco[\w.]*)")


def imports_below_the_api(text: str) -> list[str]:
    """Each ``from pytest_aaco.X import`` / ``import pytest_aaco.X`` in *text* (code, a ``python -c`` string or a
    shell script's heredoc) other than of :mod:`pytest_aaco.api`."""
    found = [m[0] for m in _FROM_IMPORT.finditer(text)
             if m[1] != "pytest_aaco.api" and not (m[1] == "pytest_aaco" and m[2] == "api")]
    return found + [m[0] for m in _PLAIN_IMPORT.finditer(text) if m[1] != "pytest_aaco.api"]


def test_studies_use_only_the_public_api():
    """A study reaches the package through ``pytest_aaco.api``, a pytest run or the ``aaco`` command
    (``python -m pytest_aaco``), never through its modules (issue 41)."""
    scripts = sorted(p for p in STUDIES.iterdir() if p.suffix in (".py", ".sh"))
    assert scripts
    found = {p.name: imports_below_the_api(p.read_text(encoding="utf-8")) for p in scripts}
    wrong = [f"studies/{name}: {', '.join(hits)}" for name, hits in found.items()
             if hits and name not in STUDIES_BELOW_THE_API]
    assert not wrong, "import these from pytest_aaco.api (docs/api.md), or go through pytest:\n" + "\n".join(wrong)
    stale = [name for name in STUDIES_BELOW_THE_API if not found.get(name)]
    assert not stale, f"no longer below the API (or gone): remove from STUDIES_BELOW_THE_API: {stale}"


@pytest.mark.parametrize(("source", "hits"), [
    ("from pytest_aaco.api import paired_t\n", 0),
    ("from pytest_aaco.api import (\n    paired_t,\n)\n", 0),
    ("from pytest_aaco import api\nimport pytest_aaco.api\n", 0),
    ("args = ['-p', 'pytest_aaco.plugin']\nrun([sys.executable, '-m', 'pytest_aaco', 'diff'])\n", 0),
    ("from pytest_aaco.verdict.paired import paired_t\n", 1),
    ("def f():\n    from pytest_aaco.measure import zoogen\n", 1),
    ("from pytest_aaco import options\n", 1),
    ("import pytest_aaco\nimport pytest_aaco.gate\n", 2),
    ('run([sys.executable, "-c", "import sys; from pytest_aaco.cli import main; main()"])\n', 1),
    ("python3 - <<'PY'\nfrom pytest_aaco.history import store\nPY\n", 1),
])
def test_the_studies_import_check_sees_each_kind_of_import(source, hits):
    assert len(imports_below_the_api(source)) == hits
