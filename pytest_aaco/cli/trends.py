"""``aaco trends [--baseline-dir DIR ...] [--session-dir DIR ...] [--out DIR]``: the history page.

:mod:`pytest_aaco.reports.trends` builds it; this module finds the folders (the project's baseline and
session folders, as the plugin does, when none is named), writes ``index.html`` and prints one line per
change point. Exit status 0, also with no history (the page says so); 2 for a folder that cannot be read
or a page that cannot be written.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_aaco.cli.common import OK, CliError, _folder, _out, _where
from pytest_aaco.history.store import load_baseline
from pytest_aaco.jsonio import AacoFileError, atomic_write_text
from pytest_aaco.reports import trends
from pytest_aaco.reports.bundle import is_bundle, list_sessions, load_session
from pytest_aaco.reports.trends import provider_name, run_point
from pytest_aaco.verdict.comparable import Fingerprint


def from_baselines(folder: Path, problems: list[str]) -> list[trends.Series]:
    """The series of every baseline file in *folder* (``<runner key>/<item>.json``), archived histories
    first; a file that cannot be read is named in *problems* and skipped."""
    found = []
    for path in sorted(folder.glob("*/*.json")):
        if ".corrupt-" in path.name or path.name.startswith("."):
            continue
        try:
            baseline = load_baseline(path)
        except AacoFileError as exc:
            problems.append(f"{path}: {exc}")
            continue
        if baseline is None:
            continue
        series = trends.Series(baseline.item, path.parent.name, provider_name(baseline.fingerprint))
        runs = [run for entry in baseline.archive for run in entry.get("history", [])] + baseline.history
        for run in runs:
            if isinstance(run, dict):
                point = run_point(run.get("rounds"), run.get("timestamp"), run.get("commit_info"),
                               run.get("device_time"), str(path))
                if point is not None:
                    series.points.append(point)
        found.append(series)
    return found


def from_bundles(folders: Iterable[Path], skip_saved: bool, problems: list[str]) -> list[trends.Series]:
    """One series per item and runner over the bundles in *folders* (bundle folders, or folders of them);
    items whose run was saved as a baseline are left out when *skip_saved*."""
    by_key: dict[tuple[str, str, str], trends.Series] = {}
    for folder in folders:
        for bundle in [folder] if is_bundle(folder) else list_sessions(folder):
            try:
                session = load_session(bundle)
            except AacoFileError as exc:
                problems.append(f"{bundle}: {exc}")
                continue
            problems.extend(f"{bundle}/{name}: {why}" for name, why in session["errors"].items())
            meta = session["meta"]
            for nodeid, data in session["items"].items():
                if not isinstance(data, dict) or not isinstance(data.get("result"), dict):
                    continue
                verdict = data["verdict"] if isinstance(data.get("verdict"), dict) else {}
                if skip_saved and verdict.get("outcome") == "saved":
                    continue
                fingerprint = data.get("fingerprint") if isinstance(data.get("fingerprint"), dict) else {}
                runner = Fingerprint(fingerprint).machine_key if fingerprint else "?"
                result = data["result"]
                point = run_point(result.get("rounds"), meta.get("started_at"), meta.get("commit_info"),
                               result.get("device_time"), str(bundle))
                if point is None:
                    continue
                key = (nodeid, runner, provider_name(fingerprint))
                by_key.setdefault(key, trends.Series(*key)).points.append(point)
    return list(by_key.values())


def build(baseline_dirs: Sequence[Path], bundle_dirs: Sequence[Path], threshold: float) -> tuple[list[trends.Series],
                                                                                                list[str]]:
    """Every series of the sources, with their change points, and the problems met (files skipped)."""
    problems: list[str] = []
    series: list[trends.Series] = []
    for folder in baseline_dirs:
        series += from_baselines(folder, problems)
    series += from_bundles(bundle_dirs, skip_saved=bool(baseline_dirs), problems=problems)
    merged = [s for s in trends.merge(series) if s.points]
    for s in merged:
        s.changes = trends.change_points([math.log(p.mean_ms) for p in s.points], threshold)
    return merged, problems




def cmd_trends(args: argparse.Namespace) -> int:
    """Build the trends page (module docstring); returns the exit status."""
    baseline_dirs = [Path(p) for p in args.baseline_dir or []]
    session_dirs = [Path(p) for p in args.session_dir or []]
    if not baseline_dirs and not session_dirs:
        baseline_dirs = [_folder(None, "baseline-dir", "--baseline-dir")[0]]
        session_dirs = [_folder(None, "session-dir", "--session-dir")[0]]
    for folder in [*(args.baseline_dir or []), *(args.session_dir or [])]:
        if not Path(folder).is_dir():
            raise CliError(f"{_where(Path(folder))}: no such folder")
    baseline_dirs = [p for p in baseline_dirs if p.is_dir()]
    session_dirs = [p for p in session_dirs if p.is_dir()]
    series, problems = build(baseline_dirs, session_dirs, args.threshold)
    sources = [*baseline_dirs, *session_dirs] or [Path(p) for p in (args.baseline_dir or [])]
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "index.html", trends.render(series, sources, problems, args.threshold))
    except OSError as exc:
        raise CliError(f"--out: {_where(out)}: cannot write the page ({exc.strerror or exc})") from None
    for problem in problems:
        _out(f"skipped: {problem}")
    if not series:
        _out("no history: no saved run or session bundle in " + (", ".join(map(str, sources)) or "the project's"
                                                                   " folders") + "; save runs with"
             " pytest --aaco-save-baseline")
    else:
        changes = trends.summary_lines(series)
        _out(f"{len(series)} series, {len(changes)} change point(s)")
        for line in changes:
            _out(f"  {line}")
    _out(f"trends page: {out / 'index.html'}")
    return OK
