"""``--aaco-junit PATH``: a JUnit XML file with one testcase per benchmark item and its figures.

Built with the ``junit-xml`` package; the file has one ``<testsuite name="pytest-aaco">``. Each
``<testcase>`` has ``classname`` = the provider short name (``cpu``, ``migraphx``; the test
module when there is none) and ``name`` = the item label (``resnet50[cpu]``; the test function
is appended when two items share a label). Its ``<properties>`` carry the same ``aaco_*``
figures that pytest's own ``--junitxml`` gets through ``record_property``
(:func:`pytest_aaco.judge.record_properties`): model, provider, mean / p50 / p99 ms, throughput
(samples/s), change vs baseline (%), the 95% CI bounds (ratios current/baseline), the
one-sided p-value, the verdict and the fingerprint id.

Failed items (regressions, memory or p99 regressions, strict inconclusive, provider errors)
are ``<failure>`` elements carrying the verdict message; a baseline file that cannot be read
is an ``<error>``; skipped items are ``<skipped>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..jsonio import atomic_write_text

if TYPE_CHECKING:
    from ..gate import AacoPlugin

SUITE_NAME = "pytest-aaco"
#: result summary figures exported as ``aaco_<key>`` (ms and samples/s), as in judge.record_properties
SUMMARY_KEYS = ("mean_ms", "p50_ms", "p99_ms", "throughput")
#: verdict figures exported as ``aaco_<key>``: change in %, CI bounds as ratios, one-sided p
VERDICT_KEYS = ("change_pct", "ci_low", "ci_high", "p_value")


def properties(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``aaco_*`` properties of one item (``record`` is ``ItemRecord.to_dict()``).

    Names and formats match :func:`pytest_aaco.judge.record_properties`, so both JUnit files
    carry the same figures: summary values with 4 decimals, verdict figures with 6 significant
    digits; plus ``aaco_label``, ``aaco_threshold`` (fraction) and ``aaco_baseline_runs`` here.
    """
    props = [("aaco_model", str(record.get("model", ""))), ("aaco_provider", str(record.get("provider", "")))]
    summary = (record.get("result") or {}).get("summary") or {}
    props += [(f"aaco_{k}", f"{summary[k]:.4f}") for k in SUMMARY_KEYS if isinstance(summary.get(k), (int, float))]
    verdict = record.get("verdict") or {}
    props.append(("aaco_verdict", str(verdict.get("outcome") or record.get("outcome", ""))))
    for key in VERDICT_KEYS:
        if isinstance(verdict.get(key), (int, float)):
            props.append((f"aaco_{key}", f"{verdict[key]:.6g}"))
    if verdict.get("fingerprint_id"):
        props.append(("aaco_fingerprint", str(verdict["fingerprint_id"])))
    props.append(("aaco_label", str(record.get("label", ""))))
    if isinstance(verdict.get("threshold"), (int, float)):
        props.append(("aaco_threshold", f"{verdict['threshold']:.6g}"))
    if verdict.get("baseline_runs"):
        props.append(("aaco_baseline_runs", str(verdict["baseline_runs"])))
    return props


def _module(nodeid: str) -> str:
    """``tests/perf/test_models.py::test_x[a]`` -> ``tests.perf.test_models``."""
    path = nodeid.split("::", 1)[0]
    return path.removesuffix(".py").replace("/", ".").replace("\\", ".") or "aaco"


def _function(nodeid: str) -> str:
    return nodeid.split("::")[-1].split("[", 1)[0]


def _elapsed_s(record: dict[str, Any]) -> float | None:
    """Time spent running the model (warmup + measured iterations), in seconds; None without a result."""
    result = record.get("result") or {}
    rounds = result.get("rounds") or []
    if not rounds:
        return None
    measured = sum(float(r.get("n", 0)) * float(r.get("mean_ms", 0.0)) for r in rounds)
    warmup = sum(float(x) for x in result.get("warmup_latencies_ms") or [])
    return round((measured + warmup) / 1000.0, 6)


def _details(record: dict[str, Any]) -> str:
    """Text for ``<system-out>`` and failure bodies: the verdict message, notes and the diagnosis."""
    verdict = record.get("verdict") or {}
    lines = [str(verdict.get("message") or record.get("error") or "")]
    lines += [f"note: {n}" for n in verdict.get("notes") or []]
    diagnosis = record.get("diagnosis")
    if diagnosis:
        lines.append(f"likely cause: {diagnosis.get('category')} (score {diagnosis.get('score')})")
        lines += [f"  evidence: {e}" for e in diagnosis.get("evidence") or []]
        if diagnosis.get("recommendation"):
            lines.append(f"  try: {diagnosis['recommendation']}")
    return "\n".join(line for line in lines if line)


def build_cases(records: list[dict[str, Any]]) -> list[Any]:
    """One ``junit_xml.TestCase`` per record, in run order."""
    from junit_xml import TestCase

    labels = Counter(str(r.get("label", "")) for r in records)
    cases = []
    for record in records:
        nodeid = str(record.get("nodeid", ""))
        label = str(record.get("label") or nodeid)
        name = label if labels[label] == 1 else f"{label} {_function(nodeid)}"
        verdict = record.get("verdict") or {}
        details = _details(record)
        case = TestCase(name, classname=str(record.get("provider") or _module(nodeid)), elapsed_sec=_elapsed_s(record),
                        stdout=details or None, file=nodeid.split("::", 1)[0] or None)
        message = str(verdict.get("message") or record.get("error") or "failed").splitlines()[0]
        if verdict.get("outcome") == "error":
            case.add_error_info(message=message, output=details, error_type="aaco-error")
        elif record.get("outcome") == "failed":
            case.add_failure_info(message=message, output=details,
                                  failure_type=f"aaco-{verdict.get('outcome') or 'failure'}")
        elif record.get("outcome") == "skipped":
            case.add_skipped_info(message=str(record.get("error") or "skipped"))
        cases.append(case)
    return cases


def render_junit(records: list[dict[str, Any]], summary: dict[str, Any], timestamp: str | None = None) -> str:
    """The JUnit XML document (UTF-8 text) for *records* (``ItemRecord.to_dict()`` each).

    *summary* (``{"items", "verdicts", "fdr_control"}``) becomes suite-level properties
    ``aaco_verdicts_<outcome>`` (counts) and ``aaco_fdr`` when LOND was used.
    """
    from junit_xml import TestSuite, to_xml_report_string

    verdicts = summary.get("verdicts") or {}
    suite_props: dict[str, str] = {f"aaco_verdicts_{k}": str(v) for k, v in sorted(verdicts.items())}
    fdr = summary.get("fdr_control") or {}
    if isinstance(fdr, dict) and fdr.get("alpha") is not None:
        suite_props["aaco_fdr"] = str(fdr["alpha"])
    suite = TestSuite(SUITE_NAME, build_cases(records), timestamp=timestamp, properties=suite_props or None)
    root = ET.fromstring(to_xml_report_string([suite], prettyprint=False, encoding="utf-8"))
    for element, record in zip(root.iter("testcase"), records, strict=True):
        props = ET.Element("properties")
        for name, value in properties(record):
            ET.SubElement(props, "property", {"name": name, "value": value})
        element.insert(0, props)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(plugin: AacoPlugin, summary: dict[str, Any]) -> None:
    """Session-end writer: ``--aaco-junit PATH`` (nothing when the option is not given).

    An unwritable path is reported on the terminal, never raised: a report must not turn a
    finished session into an internal error.
    """
    path = plugin.config.junit_path
    if path is None:
        return
    text = render_junit([r.to_dict() for r in plugin.records], summary, plugin.started_at)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        from .progress import write_line

        write_line(plugin, f"pytest-aaco: --aaco-junit: cannot write {path}: {exc.strerror or exc}", yellow=True)
