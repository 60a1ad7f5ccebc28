"""``--aaco-junit PATH``: a JUnit XML file with one testcase per benchmark item and its figures.

Built with the standard library's ``xml.etree``; the file has one ``<testsuite name="pytest-aaco">``. Each
``<testcase>`` is named as pytest's own ``--junitxml`` names it, so CI dashboards match the two
files: ``classname`` = the module path (``tests.perf.test_models``, plus the class), ``name`` =
the test with its parameters (``test_latency[resnet50-cpu]``); its ``time`` is the item's
duration as pytest measured it (setup, call and teardown, s), the label is the property
``aaco_label``. Its ``<properties>`` carry the same ``aaco_*``
figures that pytest's own ``--junitxml`` gets through ``record_property``
(:func:`properties`, added by the session object): model, provider, mean / p50 / p99 ms, throughput
(samples/s), the tested change vs baseline (%, ``aaco_change_pct``: of the series ``aaco_series``
says, not of the mean), the one-sided bounds the outcome rule compared (``aaco_lower_bound``,
``aaco_upper_bound``: ratios current/baseline; ``aaco_bound_compared``: the text the terminal, the
HTML and the job summary print; a record written before bounds were stored: its 95% CI,
``aaco_ci_low`` and ``aaco_ci_high``), the one-sided p-value, the
verdict and the fingerprint id; ``aaco_raw_change_pct`` with the geometric means it is the ratio of
(``aaco_current_geomean_ms``, ``aaco_baseline_geomean_ms``), over the share of each run's rounds
``aaco_rounds_kept`` (its fastest quarter, 0.25, where the stored test is between runs; absent: all rounds).

Failed items (regressions, memory or p99 regressions, strict inconclusive, provider errors)
are ``<failure>`` elements carrying the verdict message; a baseline file that cannot be read
is an ``<error>``; skipped items are ``<skipped>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from pytest_aaco.jsonio import atomic_write_text
from pytest_aaco.records.base import DEVICE_TIME, Outcome
from pytest_aaco.records.device import ResultRecord
from pytest_aaco.records.item import ItemRecord, SessionSummary
from pytest_aaco.reports import ReportContext
from pytest_aaco.reports.markup import xml_text
from pytest_aaco.reports.wording import headline, junit_names
from pytest_aaco.verdict.percent import bound_text

SUITE_NAME = "pytest-aaco"
#: result summary figures exported as ``aaco_<key>`` (ms and samples/s)
SUMMARY_KEYS = ("mean_ms", "p50_ms", "p99_ms", "throughput")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def properties(record: ItemRecord) -> list[tuple[str, str]]:
    """The ``aaco_*`` properties of one item, for both JUnit files (``--aaco-junit`` and pytest's
    own ``--junitxml`` through ``user_properties``): summary values with 4 decimals, the change
    (%), the one-sided bounds compared (ratios, and as text; an older record: its 95% CI) and one-sided
    p with 6 significant digits, the verdict, the
    fingerprint id, the label, the threshold (fraction) and the baseline runs; with a cold start,
    its verdict, its method (``history`` or ``side-by-side``) and this run's fastest session creation
    and first run (ms); with an operator
    profile compared to the baseline's, the one-line comparison; with a reference workload, the
    series tested (``adjusted``, ``normalized`` or ``raw``) and the machine's drift (fraction); on a
    GPU, the physical GPU's UUID or PCI bus id (``aaco_gpu``) and name (``aaco_gpu_name``); with
    device time compared, ``aaco_device_time_*`` (outcome, change %, bounds compared as ratios and text, p, MDE as a
    fraction, kernel time per run in ms) and ``aaco_kernels_per_run``."""
    props = [("aaco_model", record.model), ("aaco_provider", record.provider)]
    result = record.result_record or ResultRecord()
    props += [(f"aaco_{k}", f"{value:.4f}") for k in SUMMARY_KEYS if (value := result.summary.of(k)) is not None]
    props.append(("aaco_verdict", str(record.effective_outcome)))
    v = record.verdict
    if v is not None:
        raw_pct = None if v.raw_ratio is None else (v.raw_ratio - 1) * 100
        bound = bound_text(v.ratio, v.lower_bound, v.upper_bound, v.threshold) if v.ratio is not None else ""
        # the one-sided bounds the outcome rule compared, as every other report prints them; the 95%
        # CI only for a record written before bounds were stored (one interval per item, issue 43)
        interval = ((("lower_bound", v.lower_bound), ("upper_bound", v.upper_bound)) if bound
                    else (("ci_low", v.ci_low), ("ci_high", v.ci_high)))
        for key, value in (("change_pct", v.change_pct), *interval,
                           ("p_value", v.p_value), ("raw_change_pct", raw_pct),
                           ("current_geomean_ms", v.current_geomean_ms),
                           ("baseline_geomean_ms", v.baseline_geomean_ms), ("rounds_kept", v.rounds_kept)):
            if _number(value):
                props.append((f"aaco_{key}", f"{value:.6g}"))
        if bound:
            props.append(("aaco_bound_compared", bound))
        if v.fingerprint_id:
            props.append(("aaco_fingerprint", v.fingerprint_id))
    props.append(("aaco_label", record.label))
    if v is not None:
        props.append(("aaco_threshold", f"{v.threshold:.6g}"))
        if v.baseline_runs:
            props.append(("aaco_baseline_runs", str(v.baseline_runs)))
        if v.series:
            props.append(("aaco_series", v.series))
        if _number(v.reference_drift):
            props.append(("aaco_reference_drift", f"{v.reference_drift:.6g}"))
        dev, facts = v.judgements.get(DEVICE_TIME), record.device_record
        if dev is not None and facts is not None:  # device time beside wall time: change (%), CI, p, MDE, kernels
            props.append(("aaco_device_time_outcome", str(dev.outcome)))
            props.append(("aaco_device_time_change_pct", f"{(dev.ratio - 1) * 100:.6g}"))
            dev_bound = bound_text(dev.ratio, dev.lower_bound, dev.upper_bound, dev.threshold)
            dev_interval = ((("lower_bound", dev.lower_bound), ("upper_bound", dev.upper_bound)) if dev_bound
                            else (("ci_low", dev.ci_low), ("ci_high", dev.ci_high)))
            for key, value in (*dev_interval, ("p_slower", dev.p_slower), ("mde", dev.mde)):
                if value is not None:
                    props.append((f"aaco_device_time_{key}", f"{value:.6g}"))
            if dev_bound:
                props.append(("aaco_device_time_bound_compared", dev_bound))
            if facts.kernel_ms is not None and facts.kernel_ms.candidate is not None:
                props.append(("aaco_device_time_kernel_ms", f"{facts.kernel_ms.candidate:.6g}"))
            if facts.kernels is not None and facts.kernels.candidate is not None:
                props.append(("aaco_kernels_per_run", f"{facts.kernels.candidate:.6g}"))
    cold = record.cold_start_record
    if cold is not None and cold.verdict is not None:
        props.append(("aaco_cold_start_verdict", str(cold.verdict.outcome)))
        props.append(("aaco_cold_start_method", cold.verdict.method or "history"))
    for key in ("session_create_ms", "first_run_ms"):
        if cold is not None and (fastest := cold.minimum(key)) is not None:
            props.append((f"aaco_cold_start_{key}", f"{fastest:.4f}"))
    profile = record.profile_record
    if profile is not None and profile.comparison_message:
        props.append(("aaco_operators", profile.comparison_message))
    gpu = record.gpu_record
    if gpu is not None and gpu.key is not None:  # the physical GPU the item ran on (UUID or PCI bus id) and its name
        props += [("aaco_gpu", gpu.key), ("aaco_gpu_name", gpu.name or "-")]
    return props


def _elapsed_s(record: ItemRecord) -> float | None:
    """The item's duration (s) as pytest measured it (setup, call and teardown: ``duration_s``,
    kept by the session); for a record without it (an older bundle), the time spent running the
    model (warmup + measured iterations); None without either."""
    duration = record.extra.get("duration_s")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        return round(float(duration), 6)
    result = record.result_record
    if result is None or not result.rounds:
        return None
    measured = sum((r.n or 0) * (r.mean_ms or 0.0) for r in result.rounds)
    warmup = sum(result.warmup_latencies_ms)
    return round((measured + warmup) / 1000.0, 6)


def _details(record: ItemRecord) -> str:
    """Text for ``<system-out>`` and failure bodies: the verdict message, notes and the diagnosis."""
    lines = [record.verdict.message if record.verdict is not None and record.verdict.message else record.error or ""]
    lines += [f"note: {n}" for n in (record.verdict.notes if record.verdict is not None else [])]
    diagnosis = record.diagnosis_record
    if diagnosis is not None:
        lines.append(f"likely cause: {diagnosis.category} (score {diagnosis.score})")
        lines += [f"  evidence: {e}" for e in diagnosis.evidence]
        if diagnosis.recommendation:
            lines.append(f"  try: {diagnosis.recommendation}")
    return "\n".join(line for line in lines if line)


def testcase(record: ItemRecord) -> ET.Element:
    """One ``<testcase>`` (name, classname, time in s, file) with its ``<properties>``, then a
    ``<failure>``, ``<error>`` or ``<skipped>`` as the item ended, then ``<system-out>`` with the
    details; every text from a user file has the characters XML forbids escaped."""
    nodeid = xml_text(record.nodeid)
    classname, name = junit_names(nodeid)
    attrs = {"name": name, "classname": classname}
    elapsed = _elapsed_s(record)
    if elapsed is not None:
        attrs["time"] = f"{elapsed:g}"
    if file := nodeid.split("::", 1)[0]:
        attrs["file"] = file
    case = ET.Element("testcase", attrs)
    props = ET.SubElement(case, "properties")
    for key, value in properties(record):
        ET.SubElement(props, "property", {"name": xml_text(key), "value": xml_text(value)})
    details = xml_text(_details(record))
    message = xml_text(headline(record) if record.fails else (record.error or "failed").splitlines()[0])
    if record.effective_outcome == Outcome.ERROR:
        ET.SubElement(case, "error", {"type": "aaco-error", "message": message}).text = details or None
    elif record.outcome == Outcome.FAILED:
        kind = record.effective_outcome if record.verdict is not None else "failure"
        ET.SubElement(case, "failure", {"type": f"aaco-{kind}", "message": message}).text = details or None
    elif record.outcome == Outcome.SKIPPED:
        ET.SubElement(case, "skipped", {"type": "skipped", "message": xml_text(record.error or "skipped")})
    if details:
        ET.SubElement(case, "system-out").text = details
    return case


def render_junit(records: Sequence[ItemRecord], summary: SessionSummary, timestamp: str | None = None) -> str:
    """The JUnit XML document (UTF-8 text) for *records*: ``<testsuites>`` holding one
    ``<testsuite name="pytest-aaco">`` with the counts (tests, failures, errors, skipped) and the
    total time (s) that GitHub's test reporters read, its properties, then one ``<testcase>`` per
    record in run order.

    *summary* becomes suite-level properties ``aaco_verdicts_<outcome>`` (counts) and
    ``aaco_fdr`` when LOND was used.
    """
    cases = [testcase(record) for record in records]
    counts = {kind: sum(case.find(kind) is not None for case in cases) for kind in ("failure", "error", "skipped")}
    total = sum(float(case.get("time", "0")) for case in cases)
    root = ET.Element("testsuites", {"disabled": "0", "errors": str(counts["error"]),
                                     "failures": str(counts["failure"]), "tests": str(len(cases)),
                                     "time": f"{total:g}"})
    attrs = {"name": SUITE_NAME, "disabled": "0", "errors": str(counts["error"]), "failures": str(counts["failure"]),
             "skipped": str(counts["skipped"]), "tests": str(len(cases)), "time": f"{total:g}"}
    if timestamp:
        attrs["timestamp"] = timestamp
    suite = ET.SubElement(root, "testsuite", attrs)
    suite_props: dict[str, str] = {f"aaco_verdicts_{k}": str(v) for k, v in sorted(summary.verdicts.items())}
    fdr = summary.fdr
    if fdr is not None and fdr.alpha is not None:
        suite_props["aaco_fdr"] = str(fdr.alpha)
    if suite_props:
        props = ET.SubElement(suite, "properties")
        for key, value in suite_props.items():
            ET.SubElement(props, "property", {"name": key, "value": value})
    suite.extend(cases)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(records: Sequence[ItemRecord], context: ReportContext) -> None:
    """Session-end writer: ``--aaco-junit PATH`` (nothing when the option is not given).

    An unwritable path is reported on the terminal, never raised: a report must not turn a
    finished session into an internal error.
    """
    path = context.junit_path
    if path is None:
        return
    text = render_junit(records, context.summary, context.started_at)
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        context.say(f"pytest-aaco: --aaco-junit: cannot write {path}: {exc.strerror or exc}", yellow=True)
