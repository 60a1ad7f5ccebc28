"""``aaco trends [--baseline-dir DIR ...] [--session-dir DIR ...] [--out DIR]``: the history page.

:mod:`pytest_aaco.reports.trends` builds it; this module finds the folders (the project's baseline and
session folders, as the plugin does, when none is named), writes ``index.html`` and prints one line per
change point. Exit status 0, also with no history (the page says so); 2 for a folder that cannot be read
or a page that cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_aaco.cli.common import OK, CliError, _folder, _out, _where
from pytest_aaco.jsonio import atomic_write_text
from pytest_aaco.reports import trends


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
    series, problems = trends.build(baseline_dirs, session_dirs, args.threshold)
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
