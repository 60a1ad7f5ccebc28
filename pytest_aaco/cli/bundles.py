"""``aaco report`` and ``aaco ls``: the results of one session bundle, and the recent bundles."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_aaco.cli.common import (
    INCOMPLETE_BUNDLE,
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
from pytest_aaco.records.item import SessionMeta, SessionSummary
from pytest_aaco.reports import merge
from pytest_aaco.reports.bundle import (
    META_FILE,
    is_future_dated,
    latest_session,
    list_sessions,
    missing_data,
    records_of,
)
from pytest_aaco.reports.cost import ledger_lines
from pytest_aaco.reports.html import PROGRESS_ITEMS as HTML_PROGRESS_ITEMS
from pytest_aaco.reports.html import render_html
from pytest_aaco.reports.terminal import detail_lines, format_rows, format_table


def _latest(args: argparse.Namespace) -> Path:
    """The newest complete bundle under ``--session-dir`` (else the project's session folder), named on
    stdout; the incomplete or future-dated ones passed over are named on stderr. :class:`CliError`
    when there is none."""
    root, where = _folder(args.session_dir, "session-dir", "--session-dir")
    latest, notes = latest_session(root) if root.is_dir() else (None, [])
    for note in notes:  # incomplete bundles (a full disk) and future-dated ones are passed over, named
        _err(f"aaco: warning: {note}")
    if latest is None:
        raise CliError(f"no {'complete ' if notes else ''}session bundles under {root} {where}; run pytest first,"
                       " or name a bundle (`aaco ls` lists them)")
    _out(f"latest session bundle: {latest}")
    return latest


def _missing(missing: list[str], status: int) -> int:
    """*status*, or :data:`INCOMPLETE_BUNDLE` after naming each problem on stderr when a bundle lacks
    data: a report of what is left could hide a regression, so it never passes."""
    for problem in missing:
        _err(f"aaco: error: incomplete bundle: {problem}")
    if missing:
        _err("aaco: error: this report is incomplete; fix or re-download the bundle (exit status"
             f" {INCOMPLETE_BUNDLE})")
        return INCOMPLETE_BUNDLE
    return status


def cmd_report_merged(args: argparse.Namespace) -> int:
    """``aaco report`` of several bundles, or with ``--github-summary``: :mod:`pytest_aaco.reports.merge`
    (without a bundle named, of the latest one, as ``aaco report`` reads it)."""
    paths = [Path(p) for p in args.bundle] or [_latest(args)]
    bundles = [merge.load_bundle(p, load_bundle(p)) for p in paths]
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
    status = REGRESSION_FOUND if merge.exit_status(rows) else OK
    return _missing([m for b in bundles for m in b.missing], status)


def cmd_report(args: argparse.Namespace) -> int:
    """``aaco report [BUNDLE ...]``: exit status 0, 1 (a regression) or 2 (a usage error, or a bundle
    that lacks data: :func:`pytest_aaco.reports.bundle.missing_data`); docs/exit-codes.md."""
    if len(args.bundle) > 1 or args.github_summary:
        return cmd_report_merged(args)
    path = Path(args.bundle[0]) if args.bundle else _latest(args)
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
    status = REGRESSION_FOUND if any(r.is_regression for r in records) else OK
    return _missing(missing_data(session), status)


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


