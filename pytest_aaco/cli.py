"""The ``aaco`` command: look at this machine, session bundles and baselines without running pytest.

    aaco info                                   ORT version and EPs, GPUs, clocks, the machine fingerprint
    aaco diff A B                               compare two session bundles or two baseline files
    aaco report BUNDLE [--html OUT]             the results table of a bundle; optional HTML report
    aaco ls [--session-dir DIR]                 recent session bundles, newest first
    aaco baseline show [--baseline-dir DIR] [PATTERN]
                                                baselines, with the history when one file matches
    aaco baseline prune --keep N [--dry-run] [--baseline-dir DIR] [PATTERN]
                                                keep only the last N runs of each history
    aaco baseline archived [--baseline-dir DIR] [PATTERN]
                                                list archived histories and unreadable files moved aside
    aaco baseline restore PATTERN N | NAME.corrupt-TIME.json [--baseline-dir DIR]
                                                bring back an archived history or a repaired moved-aside file

Exit status: 0 ok, 1 a regression was found (``diff``, ``report``), 2 usage or input error
(the message names the file). Errors are one line on stderr, never a traceback (set
``AACO_DEBUG=1`` to see one).

``aaco diff`` compares with the gate's statistics; :mod:`pytest_aaco.reports.diff` is its engine and
says how.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import iniconfig

from pytest_aaco import __version__, eps, flavors
from pytest_aaco.history.commit import commit_text, describe_commit
from pytest_aaco.history.environment import collect_environment
from pytest_aaco.history.fingerprint import Fingerprint, machine_fields
from pytest_aaco.history.store import Baseline, corrupt_target, load_baseline, locked, restore
from pytest_aaco.jsonio import AacoFileError, atomic_write_json, atomic_write_text, dumps, read_json
from pytest_aaco.measure.providers import ProviderError, parse_provider_list
from pytest_aaco.options import cores, default, fraction_below, fraction_or_zero, int_at_least, option, path_text
from pytest_aaco.records import ItemRecord, SessionSummary
from pytest_aaco.reports.bundle import (
    META_FILE,
    is_bundle,
    is_future_dated,
    latest_session,
    list_sessions,
    load_session,
)
from pytest_aaco.reports.diff import DiffInputError, DiffRefused, baseline_files, diff_items, load_sides
from pytest_aaco.reports.html import PROGRESS_ITEMS as HTML_PROGRESS_ITEMS
from pytest_aaco.reports.html import render_html
from pytest_aaco.reports.markup import terminal_line
from pytest_aaco.reports.terminal import detail_lines, format_rows, format_table, num
from pytest_aaco.samplers.clocks import clock_warnings
from pytest_aaco.samplers.gpus import physical_gpu, vendor_of, visible_gpus
from pytest_aaco.verdict.percent import bound_text, pct

_T = TypeVar("_T")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest depends on tomli below Python 3.11
    import tomli as tomllib

OK, REGRESSION_FOUND, USAGE_ERROR = 0, 1, 2
DEFAULT_SESSION_DIR = Path(default("session-dir"))
DEFAULT_BASELINE_DIR = Path(default("baseline-dir"))
#: pytest's configuration files, in the order pytest looks for them in each folder
#: (``_pytest/config/findpaths.py``, pytest 8 and 9)
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


class CliError(Exception):
    """A usage or input problem: printed as ``aaco: error: <message>``, exit status 2."""


# ---------------------------------------------------------------- small helpers


def _out(line: str = "") -> None:
    print(terminal_line(line), flush=False)  # a bundle's or registry's text may hold control characters


def _err(line: str) -> None:
    print(terminal_line(line), file=sys.stderr)


def _argument(parse: Callable[..., _T], *args: object) -> Callable[[str], _T]:
    """An argparse ``type=`` from a value parser of :mod:`pytest_aaco.options` (ValueError -> usage error)."""
    def convert(text: str) -> _T:
        try:
            return parse(text, *args)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_positive_int = _argument(int_at_least, 1)
_fraction = _argument(fraction_below)
_fraction_or_zero = _argument(fraction_or_zero)
#: path arguments: an empty or blank value (an unset CI variable) is a usage error naming the
#: argument, never the current folder
_folder_arg = _argument(path_text, "a folder")
_bundle = _argument(path_text, "a session bundle folder (aaco ls lists them)")
_side = _argument(path_text, "a bundle folder, a baseline file or a folder of baseline files")
_out_file = _argument(path_text, "a file such as perf.html")


def _where(path: Path) -> str:
    """*path* as given, and for a relative one what it was resolved against (the current folder)."""
    return str(path) if path.is_absolute() else f"{path} (relative to the current folder {Path.cwd()})"


def check_folder(path: Path, option: str) -> Path:
    """*path* when it is a folder this user can list; else :class:`CliError` naming *option*, the
    path (and the folder a relative one was resolved against) and what it is instead."""
    if not path.exists():
        broken = " (a broken symlink)" if path.is_symlink() else ""
        raise CliError(f"{option}: {_where(path)}: no such folder{broken}")
    if not path.is_dir():
        raise CliError(f"{option}: {_where(path)}: not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CliError(f"{option}: {_where(path)}: cannot be read (permission denied)")
    return path


_cores = _argument(cores)


# ---------------------------------------------------------------- the project root, as pytest finds it


@dataclass(frozen=True)
class Project:
    """Where pytest would put the rootdir when run from here, and its ini settings: *rootdir* (a
    folder), *inifile* (None when there is none) and *ini* (the pytest section: name -> value)."""

    rootdir: Path
    inifile: Path | None
    ini: dict[str, Any]

    def folder(self, name: str) -> Path:
        """The folder of option *name* (``baseline-dir``, ``session-dir``) as the plugin resolves it
        run from the rootdir: its ini twin (``aaco_baseline_dir``) else the default, relative to the rootdir."""
        value = self.ini.get(option(name).dest)
        text = str(value).strip() if isinstance(value, str) and value.strip() else default(name)
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.rootdir / path

    def where(self) -> str:
        return f"project root {self.rootdir}" + (f", from {self.inifile.name}" if self.inifile else "")


def _pytest_section(path: Path) -> dict[str, Any] | None:
    """The pytest settings in configuration file *path*, None when it holds none (a ``pyproject.toml``
    without ``[tool.pytest]``, a ``tox.ini`` without ``[pytest]``, a ``setup.cfg`` without
    ``[tool:pytest]``); ``pytest.ini`` and ``pytest.toml`` always count. Raises CliError naming the
    file when it cannot be parsed."""
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            if path.name != "pyproject.toml":
                return dict(data.get("pytest") or {})
            tool = (data.get("tool") or {}).get("pytest")
            if not isinstance(tool, dict):
                return None
            native = {k: v for k, v in tool.items() if k != "ini_options"}
            return native or dict(tool.get("ini_options") or {})
        config = iniconfig.IniConfig(str(path))
    except (OSError, UnicodeDecodeError, ValueError, iniconfig.ParseError) as exc:
        raise CliError(f"{path}: cannot read it as pytest does ({exc}); fix the file or run aaco elsewhere") from None
    section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    if section in config:
        return dict(config[section].items())
    return {} if path.name in ("pytest.ini", ".pytest.ini") else None


def find_project(start: Path) -> Project:
    """The rootdir and ini file pytest would find when run from *start* with no arguments.

    Mirrors pytest's rootdir discovery (https://docs.pytest.org/en/stable/reference/customize.html,
    ``_pytest/config/findpaths.py``; not imported, it is private and its signature changed in
    pytest 9): from *start* up, the first folder with a configuration file of :data:`CONFIG_FILES`
    that holds pytest settings; else the first ``pyproject.toml`` seen; else the first folder with a
    ``setup.py``; else *start*. Raises CliError for a configuration file that cannot be parsed.
    """
    start = start.resolve()
    first_pyproject: Path | None = None
    for base in (start, *start.parents):
        for name in CONFIG_FILES:
            path = base / name
            if not path.is_file():
                continue
            if name == "pyproject.toml" and first_pyproject is None:
                first_pyproject = path
            section = _pytest_section(path)
            if section is not None:
                return Project(base, path, section)
    if first_pyproject is not None:
        return Project(first_pyproject.parent, first_pyproject, {})
    for base in (start, *start.parents):
        if (base / "setup.py").is_file():
            return Project(base, None, {})
    return Project(start, None, {})


def _folder(given: str | None, name: str, flag: str) -> tuple[Path, str]:
    """The folder of option *name*: *given* on the command line (relative to the current folder),
    else the project's (:meth:`Project.folder`); with a note for messages (``(--baseline-dir)``)."""
    if given:
        return Path(given), f"({flag})"
    project = find_project(Path.cwd())
    return project.folder(name), f"({flag}; {project.where()})"


# ---------------------------------------------------------------- aaco info


def machine_info(providers: list[str] | None = None) -> dict[str, Any]:
    """What ``aaco info`` shows, as a JSON-ready dict: package, Python, ORT, CPU, clocks, GPU (from
    :func:`pytest_aaco.history.environment.collect_environment`), the clock warnings, and the machine
    fingerprint fields (with the baseline folder name) per provider short name."""
    env = collect_environment()
    errors: dict[str, str] = dict(env.get("errors") or {})
    clocks = env.get("clocks") or {}
    info: dict[str, Any] = {
        "pytest_aaco": __version__, "python": f"{platform.python_version()} ({sys.executable})",
        "onnxruntime": env.get("onnxruntime"), "cpu": env.get("cpu"), "clocks": clocks,
        "clock_warnings": clock_warnings(clocks) if clocks else [], "gpu": env.get("gpu"),
    }
    # the distributions that install the onnxruntime package, and what is wrong with them (pytest_aaco.flavors)
    builds = flavors.ort_distributions()
    info["onnxruntime_distributions"] = [d.pinned for d in builds]
    info["onnxruntime_problem"] = flavors.missing_problem() or flavors.overlap_problem(builds)
    if providers is None:
        available = (info["onnxruntime"] or {}).get("available_providers") or []
        known = [found.short for found in (eps.lookup(name) for name in available) if found is not None]
        providers = ["cpu"] + [short for short in known if short != "cpu"]
    fingerprints = {}
    for short in providers:
        try:
            fields = machine_fields(short)
        except Exception as exc:  # noqa: BLE001 - report what can be read
            errors[f"fingerprint[{short}]"] = f"{type(exc).__name__}: {exc}"
            continue
        fingerprints[short] = {"fields": fields, "machine_key": Fingerprint(fields).machine_key}
    info["fingerprint"] = fingerprints
    info["devices"] = {short: device_map(short) for short in providers if vendor_of(short) is not None}
    info["errors"] = errors
    return info


def device_map(short: str) -> list[dict[str, Any]]:
    """EP *short*'s device ids and the physical GPU each maps to (``PhysicalGpu.to_dict()``), as
    ``--aaco-device-id all`` would use them (:func:`pytest_aaco.samplers.gpus.visible_gpus`); [] when
    no GPU can be counted."""
    found = []
    for device in range(visible_gpus(short) or 0):
        gpu = physical_gpu(short, device)
        found.append(gpu.to_dict() if gpu is not None else {"logical_id": device, "uuid": None})
    return found


def cmd_info(args: argparse.Namespace) -> int:
    providers = None
    if args.provider:
        try:
            providers = [p.short for p in parse_provider_list(args.provider)]
        except ProviderError as exc:
            raise CliError(f"--provider: {exc}") from None
    info = machine_info(providers)
    if args.json:
        sys.stdout.write(dumps(info))
        return OK
    ort = info["onnxruntime"] or {}
    cpu = info["cpu"] or {}
    clocks = info["clocks"] or {}
    gpu = info["gpu"] or {}
    _out(f"pytest-aaco {info['pytest_aaco']}, Python {info['python']}")
    _out(f"ONNX Runtime {ort.get('version', 'not importable')} (device {ort.get('device', '-')})")
    _out(f"  execution providers: {', '.join(ort.get('available_providers') or []) or '-'}")
    _out(f"  installed as: {', '.join(info['onnxruntime_distributions']) or 'no ONNX Runtime distribution'}")
    if info["onnxruntime_problem"]:
        _out(f"warning: {info['onnxruntime_problem']}")
    _out(f"CPU: {cpu.get('model', '-')}, {cpu.get('logical_cores', '-')} logical / {cpu.get('physical_cores', '-')}"
         f" physical cores, {num(cpu.get('memory_total_mb'), '.0f')} MB memory")
    governor = clocks.get("cpu_governor") or "unknown (no cpufreq in sysfs: container or VM?)"
    boost = "-" if clocks.get("cpu_boost") is None else ("on" if clocks["cpu_boost"] else "off")
    _out(f"  governor: {governor}, driver: {clocks.get('cpu_driver') or '-'}, boost: {boost}")
    if gpu.get("name"):
        _out(f"GPU: {gpu.get('name')} ({gpu.get('vendor')}), driver {gpu.get('driver') or '-'},"
             f" runtime {gpu.get('runtime') or '-'}, perf level {clocks.get('gpu_perf_level') or '-'}")
    else:
        _out("GPU: none found (NVML and amdsmi/rocm-smi did not report a device)")
    for short, devices in (info.get("devices") or {}).items():
        for gpu_info in devices:
            key = gpu_info.get("uuid") or gpu_info.get("pci_bus_id") or "unknown"
            _out(f"  --aaco-provider={short} device {gpu_info.get('logical_id')}: {key} {gpu_info.get('name') or ''}"
                 f" (PCI {gpu_info.get('pci_bus_id') or '-'}, mapped by {gpu_info.get('mapped_by') or '-'})"
                 + (f"; ambiguous: {gpu_info['ambiguous']}" if gpu_info.get("ambiguous") else ""))
    for warning in info["clock_warnings"]:
        _out(f"warning: {warning}")
    for short, data in info["fingerprint"].items():
        _out(f"machine fingerprint for --aaco-provider={short} (baseline folder {data['machine_key']}):")
        for key, value in data["fields"].items():
            _out(f"  {key}: {value}")
    for name, error in info["errors"].items():
        _out(f"note: {name} could not be read: {error}")
    return OK


# ---------------------------------------------------------------- aaco diff


def load_bundle(path: Path) -> dict[str, Any]:
    """:func:`pytest_aaco.reports.bundle.load_session`, with a missing or wrong folder as :class:`CliError`."""
    if not path.exists():
        raise CliError(f"{_where(path)}: no such file or folder")
    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
        raise CliError(f"{_where(path)}: cannot be read (permission denied)")
    if not is_bundle(path):
        raise CliError(f"{path}: not a session bundle (no session_meta.json); list bundles with `aaco ls`")
    return load_session(path)


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        side_a, side_b = load_sides(Path(args.a)), load_sides(Path(args.b))
    except DiffInputError as exc:
        raise CliError(str(exc)) from None
    for problem in side_a.problems + side_b.problems:
        _err(f"aaco: warning: {problem}")
    kind_a, a, kind_b, b = side_a.kind, side_a.items, side_b.kind, side_b.items
    if kind_a == kind_b == "baseline" and set(a) != set(b):
        # two single files: compare them even when their node ids differ (a renamed test); the
        # fingerprints still have to say they measure the same model, inputs and provider
        (single,) = b.values()
        b = {next(iter(a)): single}
    try:
        rows, level = diff_items(a, b, args.threshold, args.fdr, args.min_history, args.run_noise,
                                 args.max_contention, args.model_changed)
    except DiffRefused as exc:
        raise CliError(str(exc)) from None
    if not rows:
        raise CliError(f"no item is in both {args.a} and {args.b}; items are matched by node id")
    table = []
    for row in rows:
        v = row.verdict
        bound = "-"
        if v is not None and v.ratio is not None:
            bound = (bound_text(v.ratio, v.lower_bound, v.upper_bound, v.threshold)
                     or (f"95% CI {pct(v.ci_low)} .. {pct(v.ci_high)}" if v.ci_low is not None else "-"))
        method = "-" if v is None or v.method is None else v.method
        series = "-" if v is None or v.method is None else v.series or "raw"
        a_geo = v.baseline_geomean_ms if v is not None else None
        b_geo = v.current_geomean_ms if v is not None else None
        # every per cent is the ratio of the two means printed beside it
        table.append((row.label, num(row.a_mean_ms, ".3f"), num(row.b_mean_ms, ".3f"),
                      pct(row.b_mean_ms / row.a_mean_ms) if row.a_mean_ms and row.b_mean_ms is not None else "-",
                      num(a_geo, ".3f"), num(b_geo, ".3f"), pct(b_geo / a_geo) if a_geo and b_geo else "-",
                      f"{pct(v.ratio)} {series}" if v is not None and v.ratio is not None else "-", bound,
                      num(v.p_value, ".2g") if v is not None else "-", method, str(row.outcome)))
    _out(f"A (reference): {args.a} [{kind_a}]")
    _out(f"B (candidate): {args.b} [{kind_b}]")
    header = ("item", "A mean ms", "B mean ms", "change (means)", "A geometric mean ms", "B geometric mean ms",
              "change (raw)", "change (tested)", "bound compared", "p (slower)", "method", "verdict")
    for line in format_rows(header, table, numeric=frozenset({1, 2, 3, 4, 5, 6, 9})):
        _out(line)
    judged = sum(r.verdict is not None and r.verdict.p_value is not None for r in rows)
    _out(f"level {level:.3g}: Benjamini-Hochberg at FDR {args.fdr:g} over {judged} compared item(s); threshold"
         f" {'per item' if args.threshold is None else f'{args.threshold:.0%}'}; the gate's statistics: run-to-run"
         f" term {args.run_noise:.0%} until A has {args.min_history} runs, reference workload, contention")
    for row in rows:
        if row.note:
            _out(f"  {row.label}: {row.note}")
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    if only_a:
        _out(f"only in A ({len(only_a)}): " + ", ".join(only_a))
    if only_b:
        _out(f"only in B ({len(only_b)}): " + ", ".join(only_b))
    return REGRESSION_FOUND if any(r.fails for r in rows) else OK


# ---------------------------------------------------------------- aaco report / ls


def cmd_report(args: argparse.Namespace) -> int:
    if args.bundle:
        path = Path(args.bundle)
    else:
        root, where = _folder(args.session_dir, "session-dir", "--session-dir")
        latest, notes = latest_session(root) if root.is_dir() else (None, [])
        for note in notes:  # incomplete bundles (a full disk) and future-dated ones are passed over, named
            _err(f"aaco: warning: {note}")
        if latest is None:
            raise CliError(f"no {'complete ' if notes else ''}session bundles under {root} {where}; run pytest first,"
                           " or name a bundle (`aaco ls` lists them)")
        path = latest
        _out(f"latest session bundle: {path}")
    session = load_bundle(path)
    for name, problem in (session.get("errors") or {}).items():
        _err(f"aaco: warning: {name} skipped: {problem}")
    records = [ItemRecord.from_dict({**(data if isinstance(data, dict) else {}), "nodeid": nodeid})
               for nodeid, data in session["items"].items()]
    meta = session.get("meta") or {}
    _out(f"session {path} started {meta.get('started_at') or meta.get('bundle_started_at') or '-'},"
         f" providers {', '.join(meta.get('providers') or []) or '-'}, {len(records)} item(s)"
         + (f", project commit {commit_text(meta['commit_info'])}" if "commit_info" in meta else ""))
    if records:
        for line in format_table(records) + detail_lines(records):
            _out(line)
    else:
        _out("no items in this bundle")
    if args.html:
        summary = SessionSummary.from_dict(meta.get("summary")) if meta.get("summary") else SessionSummary.of(records)
        commit = (session.get("meta") or {}).get("commit_info")
        if len(records) >= HTML_PROGRESS_ITEMS:  # about 0.4 s of CPU per item: say what the wait is for
            _err(f"aaco: drawing the HTML report of {len(records)} items ...")
        text = render_html(records, summary, session.get("environment"), title=f"pytest-aaco report: {path.name}",
                           commit=commit if isinstance(commit, dict) else None)
        try:
            atomic_write_text(Path(args.html), text)
        except OSError as exc:
            raise CliError(f"--html: {_where(Path(args.html))}: cannot write the HTML report"
                           f" ({exc.strerror or exc})") from None
        _out(f"HTML report: {args.html}")
    return REGRESSION_FOUND if any(r.is_regression for r in records) else OK


def cmd_ls(args: argparse.Namespace) -> int:
    root, where = _folder(args.session_dir, "session-dir", "--session-dir")
    if args.session_dir:
        check_folder(root, "--session-dir")
    sessions = list_sessions(root)[: args.limit]
    if not sessions:
        _out(f"no session bundles under {root} (pytest with pytest-aaco writes one per session)")
        return OK
    rows = []
    for folder in sessions:
        try:
            meta = read_json(folder / META_FILE)
        except AacoFileError as exc:
            rows.append((str(folder), "-", "-", "-", "-", f"unreadable: {exc}"))
            continue
        if not isinstance(meta, dict):
            rows.append((str(folder), "-", "-", "-", "-", f"unreadable: {META_FILE} is not a JSON object"))
            continue
        summary = meta.get("summary") or {}
        verdicts = ", ".join(f"{n} {k}" for k, n in sorted((summary.get("verdicts") or {}).items()))
        finished = "" if meta.get("bundle_finished_at") else " (unfinished)"
        finished += " (dated ahead of this clock)" if is_future_dated(folder) else ""
        rows.append((str(folder), str(meta.get("started_at") or meta.get("bundle_started_at") or "-"),
                     describe_commit(meta.get("commit_info")), ",".join(meta.get("providers") or []) or "-",
                     str(summary.get("items", meta.get("items_written", "-"))), (verdicts or "-") + finished))
    for line in format_rows(("session", "started (UTC)", "commit", "providers", "items", "verdicts"), rows,
                            numeric=frozenset({4})):
        _out(line)
    return OK


# ---------------------------------------------------------------- aaco baseline show / prune


def _matches(pattern: str | None, nodeid: str, rel: str) -> bool:
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(nodeid, pattern) or fnmatch.fnmatchcase(rel, pattern)
    return pattern in nodeid or pattern in rel


def _baseline_root(args: argparse.Namespace) -> Path:
    """``--baseline-dir``, else the project's baseline folder (:func:`find_project`); CliError when it
    is not a folder, naming it and where it came from."""
    root, where = _folder(args.baseline_dir, "baseline-dir", "--baseline-dir")
    if args.baseline_dir:
        return check_folder(root, "--baseline-dir")
    if not root.is_dir():
        raise CliError(f"{root}: no such folder {where}; record baselines with pytest --aaco-save-baseline,"
                       " or pass --baseline-dir")
    return root


def _baselines(root: Path, pattern: str | None) -> tuple[list[Baseline], list[str]]:
    """Loaded baselines under *root* matching *pattern* (a glob, or a substring of the node id
    or relative path), and one problem line per unreadable file."""
    check_folder(root, "--baseline-dir")
    found: list[Baseline] = []
    problems: list[str] = []
    for path in baseline_files(root):
        try:
            baseline = load_baseline(path)
        except AacoFileError as exc:
            problems.append(str(exc))
            continue
        if baseline is not None and _matches(pattern, baseline.item, str(path.relative_to(root))):
            found.append(baseline)
    return found, problems


def cmd_baseline_show(args: argparse.Namespace) -> int:
    root = _baseline_root(args)
    found, problems = _baselines(root, args.pattern)
    for problem in problems:
        _err(f"aaco: error: {problem}")
    if not found:
        _out(f"no baselines under {root}" + (f" match {args.pattern!r}" if args.pattern else ""))
        return USAGE_ERROR if problems else OK
    rows = []
    for b in found:
        latest = b.history[-1] if b.history else {}
        rows.append((b.path.parent.name, b.item, str(b.runs), num((latest.get("summary") or {}).get("mean_ms"), ".3f"),
                     str(latest.get("timestamp", "-")), describe_commit(latest.get("commit_info")), b.fingerprint_id))
    for line in format_rows(("runner", "item", "runs", "latest mean ms", "latest run", "commit", "fingerprint"), rows,
                            numeric=frozenset({2, 3})):
        _out(line)
    if len(found) == 1:
        (b,) = found
        _out(f"history of {b.path}:")
        hist = []
        traced = any(isinstance(run.get("device_time"), dict) for run in b.history)
        for i, run in enumerate(b.history):
            figures = run.get("summary") or {}
            cells = (str(i + 1), str(run.get("timestamp", "-")), describe_commit(run.get("commit_info")),
                     str(len(run.get("rounds") or [])),
                     *(num(figures.get(k), ".3f") for k in ("mean_ms", "p50_ms", "p99_ms")))
            if traced:  # device time per run: kernel-time sum, busy time (union), kernels
                dev = run.get("device_time") or {}
                cells += tuple(num(dev.get(k), f) for k, f in (("kernel_ms", ".4f"), ("busy_ms", ".4f"),
                                                               ("kernels", ".1f")))
            hist.append(cells)
        header: tuple[str, ...] = ("#", "timestamp", "commit", "rounds", "mean ms", "p50 ms", "p99 ms")
        numeric = {0, 3, 4, 5, 6}
        if traced:
            header += ("device ms", "busy ms", "kernels")
            numeric |= {7, 8, 9}
        for line in format_rows(header, hist, numeric=frozenset(numeric)):
            _out(line)
    return USAGE_ERROR if problems else OK


def cmd_baseline_prune(args: argparse.Namespace) -> int:
    root = _baseline_root(args)
    found, problems = _baselines(root, args.pattern)
    for problem in problems:
        _err(f"aaco: error: {problem} (left as it is)")
    trimmed = 0
    for b in found:
        if b.runs <= args.keep:
            continue
        dropped = b.runs - args.keep
        b.history = b.history[-args.keep:]
        if not args.dry_run:
            try:
                with locked(b.path):
                    atomic_write_json(b.path, b.to_dict(), strict=True)
            except OSError as exc:
                raise CliError(f"{b.path}: cannot write ({exc.strerror or exc})") from None
        trimmed += 1
        verb = "would trim" if args.dry_run else "trimmed"
        _out(f"{verb} {b.path}: {dropped} oldest run(s) dropped, {args.keep} kept")
    _out(f"{trimmed} of {len(found)} baseline file(s) {'would be ' if args.dry_run else ''}trimmed to {args.keep}"
         " run(s)")
    return USAGE_ERROR if problems else OK


def cmd_baseline_archived(args: argparse.Namespace) -> int:
    """List the histories that restarts archived, and the unreadable files moved aside."""
    root = _baseline_root(args)
    found, problems = _baselines(root, args.pattern)
    for problem in problems:
        _err(f"aaco: error: {problem}")
    rows = [(b.path.parent.name, b.item, f"#{i + 1}", str(entry.get("archived_at", "-")),
             str(len(entry.get("history") or [])), str(entry.get("reason", "-")))
            for b in found for i, entry in enumerate(b.archive)]
    copies = sorted(p for p in root.rglob("*.corrupt-*.json") if _matches(args.pattern, p.name, str(p)))
    if not rows and not copies:
        _out(f"nothing archived under {root}")
    for line in format_rows(("runner", "item", "#", "archived at", "runs", "reason"), rows, numeric=frozenset({4})):
        _out(line)
    for copy in copies:
        _out(f"moved aside (unreadable): {copy} ({copy.stat().st_size} bytes); repair it, then"
             f" aaco baseline restore {copy}")
    return USAGE_ERROR if problems else OK


def cmd_baseline_restore(args: argparse.Namespace) -> int:
    """Bring back archived history N of the one matching file, or a repaired moved-aside copy."""
    target = Path(args.target)
    try:
        if target.is_file() and ".corrupt-" in target.name:
            _out(restore(corrupt_target(target), copy=target))
            return OK
        if args.number is None:
            raise CliError("give the archived history's number (aaco baseline archived lists them)")
        found, problems = _baselines(_baseline_root(args), args.target)
        if len(found) != 1:
            names = ", ".join(str(b.path) for b in found) or "none"
            raise CliError(f"{args.target!r} must match exactly one baseline file; it matches {names}")
        _out(restore(found[0].path, index=args.number - 1))
    except AacoFileError as exc:
        raise CliError(str(exc)) from None
    return OK


# ---------------------------------------------------------------- parser and entry point


def build_parser() -> argparse.ArgumentParser:
    """The ``aaco`` argument parser with its subcommands."""
    parser = argparse.ArgumentParser(
        prog="aaco", description="pytest-aaco: inspect this machine, session bundles and baselines.",
        epilog="exit status: 0 ok, 1 regression found (diff, report), 2 usage or input error",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("info", help="ONNX Runtime, EPs, GPUs, CPU governor and this machine's fingerprint",
                       description="Show the ONNX Runtime version and execution providers, the GPUs (NVML/amdsmi,"
                                   " best effort), the CPU clock settings and the machine fingerprint fields that"
                                   " pick the baseline folder.")
    p.add_argument("--provider", action="append", metavar="EP",
                   help="fingerprint for these providers (repeatable; default: cpu and every available GPU EP)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("diff", help="compare two session bundles or two baseline files (exit 1 on a regression)",
                       description="Compare B (candidate) with A (reference), item by item (matched by node id),"
                                   " with the gate's statistics on round log-means. Each of A and B is a session"
                                   " bundle folder, a baseline file, or a folder of one runner's baseline files.")
    p.add_argument("a", metavar="A", type=_side, help="reference: bundle folder, baseline file or baseline folder")
    p.add_argument("b", metavar="B", type=_side, help="candidate: bundle folder, baseline file or baseline folder")
    p.add_argument("--threshold", type=_fraction, default=None, metavar="FRACTION",
                   help="practical threshold, e.g. 0.05 or 5%% (default: the item's own from B's bundle, else"
                        f" {default('threshold') * 100:g}%%)")
    p.add_argument("--fdr", type=_fraction, default=default("fdr"), metavar="Q",
                   help="false discovery rate over the compared items, Benjamini-Hochberg (default: %(default)g)")
    p.add_argument("--min-history", type=_positive_int, default=default("min-history"), metavar="N",
                   help="reference runs needed for the prediction-interval test (default: %(default)s)")
    p.add_argument("--run-noise", type=_fraction_or_zero, default=default("run-noise"), metavar="FRACTION",
                   help="assumed run-to-run sd while the reference has fewer runs than --min-history,"
                        " as in the gate; 0 for the plain Welch test on rounds (default: %(default)g)")
    p.add_argument("--max-contention", type=_cores, default=default("max-contention"), metavar="CORES",
                   help="a regression measured in B while other processes kept more cores busy is withheld as"
                        " inconclusive, as in the gate; off: never (default: %(default)s)")
    p.add_argument("--model-changed", action="store_true",
                   help="B's model file is a new version of A's (the same item): compare across the model hash"
                        " (without it, a different model file is refused, exit 2)")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("report", help="print a session bundle's results; optionally write HTML",
                       description="Print the results table of a session bundle (exit 1 when it holds a"
                                   " regression) and optionally write the HTML report.")
    p.add_argument("bundle", metavar="BUNDLE", nargs="?", type=_bundle,
                   help="session bundle folder (see `aaco ls`; default: the latest under the project's session folder)")
    p.add_argument("--session-dir", metavar="DIR", type=_folder_arg,
                   help="where to look for the latest bundle (default: the project's, as pytest finds the project)")
    p.add_argument("--html", metavar="OUT", type=_out_file, help="write a self-contained HTML report to OUT")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("ls", help="list recent session bundles, newest first",
                       description="List session bundles, newest first.")
    p.add_argument("--session-dir", metavar="DIR", type=_folder_arg,
                   help=f"where bundles are (default: {DEFAULT_SESSION_DIR} under the project root, found as pytest"
                        " finds its rootdir, or the aaco_session_dir ini setting)")
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="show at most N (default: 20)")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("baseline", help="show, prune, list archived or restore baseline histories",
                       description="Inspect or trim the baseline store.")
    bsub = p.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    show = bsub.add_parser("show", help="list baselines (the history too when one file matches)",
                           description="List baseline files: runner folder, item, runs, latest mean. PATTERN is a"
                                       " glob or a substring of the node id or the path.")
    prune = bsub.add_parser("prune", help="keep only the last N runs of each history (atomic writes)",
                            description="Trim each matching baseline history to its last N runs; files are"
                                        " rewritten atomically.")
    archived = bsub.add_parser("archived", help="list archived histories and unreadable files moved aside",
                               description="List the histories that a fingerprint change, a model change or"
                                           " --aaco-baseline-reset archived, numbered per file, and the"
                                           " unreadable files moved aside as NAME.corrupt-TIME.json.")
    restore = bsub.add_parser("restore", help="bring back an archived history or a repaired moved-aside file",
                              description="aaco baseline restore PATTERN N: archived history N of the one file"
                                          " PATTERN matches becomes the live one (the live one is archived)."
                                          " aaco baseline restore NAME.corrupt-TIME.json: the repaired copy"
                                          " replaces NAME.json (whose history is archived in it).")
    for q in (show, prune, archived, restore):
        q.add_argument("--baseline-dir", default=None, metavar="DIR", type=_folder_arg,
                       help=f"baseline folder (default: {DEFAULT_BASELINE_DIR} under the project root, found as pytest"
                            " finds its rootdir, or the aaco_baseline_dir ini setting)")
    for q in (show, prune, archived):
        q.add_argument("pattern", nargs="?", metavar="PATTERN", help="only items whose node id or path match")
    restore.add_argument("target", metavar="PATTERN|COPY", help="one baseline file's pattern, or a .corrupt- copy")
    restore.add_argument("number", nargs="?", type=_positive_int, metavar="N", help="archived history number")
    archived.set_defaults(func=cmd_baseline_archived)
    restore.set_defaults(func=cmd_baseline_restore)
    prune.add_argument("--keep", type=_positive_int, required=True, metavar="N", help="runs to keep per item")
    prune.add_argument("--dry-run", action="store_true", help="say what would be trimmed, write nothing")
    show.set_defaults(func=cmd_baseline_show)
    prune.set_defaults(func=cmd_baseline_prune)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``aaco`` command; returns the exit status (0 ok, 1 regression found, 2 usage or
    input error). Never raises: errors are printed as one line on stderr."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    try:
        return int(args.func(args))
    except (CliError, AacoFileError) as exc:
        _err(f"aaco: error: {exc}")
        return USAGE_ERROR
    except KeyboardInterrupt:
        _err("aaco: interrupted")
        return USAGE_ERROR
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("AACO_DEBUG"):
            raise
        _err(f"aaco: error: {type(exc).__name__}: {exc} (set AACO_DEBUG=1 to see the traceback)")
        return USAGE_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
