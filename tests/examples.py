"""The console output quoted in the README and docs/, built through the plugin's own code.

Each block in a Markdown page marked ``<!-- output: NAME -->`` (then a fenced block) must equal
``EXAMPLES[NAME]()``: the verdict comes from the real gate (:func:`pytest_aaco.sidebyside.cycles.compare_sides`
on scripted, seeded sides; the message finished by :func:`pytest_aaco.verdict.finish.settle`) and the
table from :func:`pytest_aaco.reports.terminal.format_table`, so a changed message format fails
tests/test_examples.py until the page shows what the plugin prints (``python -m tests.examples`` prints
every block).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

# the tests import their helpers as top-level modules (pytest puts tests/ on sys.path); so does
# ``python -m tests.examples``
sys.path.insert(0, str(Path(__file__).resolve().parent))

from finished import to_verdict  # noqa: E402

from pytest_aaco.history.fingerprint import build_fingerprint  # noqa: E402
from pytest_aaco.history.judge import judge_history  # noqa: E402
from pytest_aaco.history.store import Baseline, run_record  # noqa: E402
from pytest_aaco.options import GateSettings  # noqa: E402
from pytest_aaco.records.base import Outcome
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.records.verdict import Verdict  # noqa: E402
from pytest_aaco.reports import terminal  # noqa: E402
from pytest_aaco.sidebyside.cycles import compare_sides  # noqa: E402
from pytest_aaco.verdict.finish import confirm, settle  # noqa: E402
from tests.conftest import make_result  # noqa: E402
from tests.test_sidebyside import FAST, ScriptedFactory  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: ``<!-- output: NAME -->``, then a fenced block: its text
MARKED = re.compile(r"<!-- output: (\S+) -->\n```\w*\n(.*?)```", flags=re.S)
NODEID = "perf/test_perf.py::test_latency[resnet50-cpu]"


def _side_by_side(factor: float, label: str = "resnet50[cpu]") -> Verdict:
    """A side-by-side verdict of a 40 ms model whose candidate side is *factor* times slower."""
    base = ScriptedFactory(40.0)
    candidate = ScriptedFactory(40.0, factors=[factor], seed=100)
    return to_verdict(compare_sides(base, candidate, FAST, alpha=0.041, baseline_label="origin/main"), label)


def _record(verdict: Verdict, factor: float) -> ItemRecord:
    result = make_result([40.0 * factor] * 10, seed=1, model="resnet50")
    return ItemRecord(NODEID, "resnet50", "cpu", "resnet50[cpu]", result=result.to_dict(raw=False), verdict=verdict,
                      outcome=Outcome.FAILED if verdict.fails else Outcome.PASSED)


def side_by_side_regression() -> str:
    """The failure message of a +9.4% slower model, gated side by side against origin/main."""
    return _side_by_side(1.094).message + "\n"


def side_by_side_table() -> str:
    """The results table of that run and of an unchanged model beside it."""
    slow = _record(_side_by_side(1.094), 1.094)
    same = _side_by_side(1.0, "squeezenet[cpu]")
    result = make_result([4.0] * 10, seed=2, model="squeezenet")
    unchanged = ItemRecord(NODEID.replace("resnet50", "squeezenet"), "squeezenet", "cpu", "squeezenet[cpu]",
                           result=result.to_dict(raw=False), verdict=same, outcome=Outcome.PASSED)
    return "\n".join(terminal.format_table([slow, unchanged])) + "\n"


def stored_regression() -> str:
    """The failure message of a CPU item 8.5% slower than a history of 8 saved runs, confirmed by a
    second measurement (:func:`pytest_aaco.history.judge.judge_history`, then the confirmation rule)."""
    fingerprint = build_fingerprint(model_sha256="a", input_shapes={}, input_dtypes={}, provider="cpu",
                                    ep_name="CPUExecutionProvider", provider_options={}, iobinding="none",
                                    intra_op_threads=0)
    levels = [38.0, 38.4, 37.8, 38.2, 37.9, 38.1, 38.3, 37.7]
    history = [run_record(make_result([level] * 10, seed=i)) for i, level in enumerate(levels)]
    baseline = Baseline(Path("baselines/b.json"), NODEID, fingerprint.fields, fingerprint.id, history)
    settings = GateSettings()
    first, second = (judge_history(make_result([ms] * 10, seed=seed), baseline, fingerprint, settings, 0.005,
                                   "resnet50[cpu]") for ms, seed in ((41.2, 20), (41.3, 21)))
    return settle(confirm(first, second, settings), settings).message + "\n"


def stored_device_time_regression() -> str:
    """The failure message of a GPU item whose device time grew 6.5% (8 kernels added) while its wall
    time stayed inside its spread, against 5 stored runs with device time traced (the figures of
    tests/test_consistency.py)."""
    from tests.test_consistency import _stored

    return _stored(Path("baselines"), make_result, 0.871, extra=8).message + "\n"


def stored_contention_regression() -> str:
    """The failure message of a CPU item (one intra-op thread) whose work grew 48% while a busy machine made a
    third of its iterations wait for a CPU and its reference workload 3.5 times slower: the regression stands
    on the run's fastest iteration (:func:`pytest_aaco.history.judge.fastest_iteration`)."""
    from tests.test_fastest_iteration import FP, _baseline, _busy

    settings = GateSettings()
    return settle(judge_history(_busy(0.240), _baseline(), FP, settings, 0.05, "mlp[cpu]"), settings).message + "\n"


EXAMPLES: dict[str, Callable[[], str]] = {
    "stored-contention-regression": stored_contention_regression,
    "stored-device-time-regression": stored_device_time_regression,
    "stored-regression": stored_regression,
    "side-by-side-regression": side_by_side_regression,
    "side-by-side-table": side_by_side_table,
}


def marked_blocks(paths: list[Path] | None = None) -> list[tuple[Path, str, str]]:
    """Every ``(page, NAME, text)`` of the output blocks of the README and docs/*.md."""
    pages = paths if paths is not None else [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(page, m.group(1), m.group(2)) for page in pages
            for m in MARKED.finditer(page.read_text(encoding="utf-8"))]


def stale(paths: list[Path] | None = None) -> list[str]:
    """One line per marked block that is not what the plugin prints (or names no example)."""
    found = []
    for page, name, text in marked_blocks(paths):
        if name not in EXAMPLES:
            found.append(f"{page.name}: <!-- output: {name} --> names no example in tests/examples.py")
        elif text != EXAMPLES[name]():
            found.append(f"{page.name}: <!-- output: {name} --> differs from what the plugin prints:\n"
                         f"{EXAMPLES[name]()}")
    return found


if __name__ == "__main__":
    for example_name, build in EXAMPLES.items():
        print(f"<!-- output: {example_name} -->\n```text\n{build()}```\n")
