"""``aaco report`` and ``aaco ls``: the results of one session bundle, and the recent bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_aaco.cli.common import (
    OK,
    REGRESSION_FOUND,
    CliError,
    _err,
    _folder,
    _out,
    _where,
    check_folder,
    load_bundle,
)
from pytest_aaco.history.store import report_baselines
from pytest_aaco.jsonio import AacoFileError, append_text, atomic_write_text, read_json
from pytest_aaco.measure.commit import commit_text, describe_commit
from pytest_aaco.records import SessionMeta, SessionSummary
from pytest_aaco.reports import merge
from pytest_aaco.reports.bundle import META_FILE, is_future_dated, latest_session, list_sessions, records_of
from pytest_aaco.reports.cost import ledger_lines
from pytest_aaco.reports.html import PROGRESS_ITEMS as HTML_PROGRESS_ITEMS
from pytest_aaco.reports.html import render_html
from pytest_aaco.reports.terminal import detail_lines, format_rows, format_table


def cmd_report_merged(args: argparse.Namespace) -> int:
    """``aaco report`` of several bundles, or with ``--github-summary``: :mod:`pytest_aaco.reports.merge`."""
    bundles = [merge.load_bundle(Path(p), load_bundle(Path(p))) for p in args.bundle]
    for problem in (p for b in bundles for p in b.problems):
        _err(f"aaco: warning: {problem}")
    rows = merge.merge(bundles)
    for line in merge.text_lines(bundles, rows):
        _out(line)
    try:
        if args.html:
            page = merge.html_page(bundles, rows, f"pytest-aaco report: {len(bundles)} jobs")
            atomic_write_text(Path(args.html), page)
            _out(f"HTML report: {args.html}")
    except OSError as exc:
        raise CliError(f"--html: {_where(Path(args.html))}: cannot write it ({exc.strerror or exc})") from None
    try:
        if args.github_summary:  # appended, as GitHub Actions expects of $GITHUB_STEP_SUMMARY
            append_text(args.github_summary, merge.job_summary_text(bundles, rows))
            _out(f"job summary: {args.github_summary}")
    except OSError as exc:
        raise CliError(f"--github-summary: {_where(Path(args.github_summary))}: cannot write it"
                       f" ({exc.strerror or exc})") from None
    return REGRESSION_FOUND if merge.exit_status(rows) else OK


def cmd_report(args: argparse.Namespace) -> int:
    if len(args.bundle) > 1 or args.github_summary:
        return cmd_report_merged(args)
    if args.bundle:
        path = Path(args.bundle[0])
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
    for name, problem in session["errors"].items():
        _err(f"aaco: warning: {name} skipped: {problem}")
    records = records_of(session)
    meta = SessionMeta.from_dict(session["meta"])
    _out(f"session {path} started {meta.started_at or '-'}, providers {', '.join(meta.providers) or '-'},"
         f" {len(records)} item(s)" + (f", project commit {commit_text(meta.commit_info)}" if meta.has_commit else ""))
    if records:
        for line in format_table(records) + detail_lines(records):
            _out(line)
    else:
        _out("no items in this bundle")
    raw_meta = session["meta"]
    for line in ledger_lines(raw_meta.get("cost")):
        _out(line)
    if args.html:
        if len(records) >= HTML_PROGRESS_ITEMS:  # about 0.4 s of CPU per item: say what the wait is for
            _err(f"aaco: drawing the HTML report of {len(records)} items ...")
        environment = session["environment"]
        text = render_html(records, meta.summary or SessionSummary.of(records),
                           environment if isinstance(environment, dict) else None,
                           baselines=report_baselines(records), title=f"pytest-aaco report: {path.name}",
                           commit=meta.commit_info)
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
        found = SessionMeta.from_dict(meta)
        summary = found.summary
        verdicts = ", ".join(f"{n} {k}" for k, n in sorted(summary.verdicts.items())) if summary is not None else ""
        items = summary.items if summary is not None else found.items_written
        rows.append((str(folder), found.started_at or "-", describe_commit(found.commit_info),
                     ",".join(found.providers) or "-", "-" if items is None else str(int(items)),
                     (verdicts or "-") + ("" if found.finished else " (unfinished)")
                     + (" (dated ahead of this clock)" if is_future_dated(folder) else "")))
    for line in format_rows(("session", "started (UTC)", "commit", "providers", "items", "verdicts"), rows,
                            numeric=frozenset({4})):
        _out(line)
    return OK


