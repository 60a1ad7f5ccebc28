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
from pytest_aaco.history.commit import commit_text, describe_commit
from pytest_aaco.jsonio import AacoFileError, atomic_write_text, read_json
from pytest_aaco.records import ItemRecord, SessionSummary
from pytest_aaco.reports.bundle import META_FILE, list_sessions
from pytest_aaco.reports.html import render_html
from pytest_aaco.reports.terminal import detail_lines, format_rows, format_table


def cmd_report(args: argparse.Namespace) -> int:
    if args.bundle:
        path = Path(args.bundle)
    else:
        root, where = _folder(args.session_dir, "session-dir", "--session-dir")
        sessions = list_sessions(root) if root.is_dir() else []
        if not sessions:
            raise CliError(f"no session bundles under {root} {where}; run pytest first, or name a bundle"
                           " (`aaco ls` lists them)")
        path = sessions[0]
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
        summary = meta.get("summary") or {}
        verdicts = ", ".join(f"{n} {k}" for k, n in sorted((summary.get("verdicts") or {}).items()))
        finished = "" if meta.get("bundle_finished_at") else " (unfinished)"
        rows.append((str(folder), str(meta.get("started_at") or meta.get("bundle_started_at") or "-"),
                     describe_commit(meta.get("commit_info")), ",".join(meta.get("providers") or []) or "-",
                     str(summary.get("items", meta.get("items_written", "-"))), (verdicts or "-") + finished))
    for line in format_rows(("session", "started (UTC)", "commit", "providers", "items", "verdicts"), rows,
                            numeric=frozenset({4})):
        _out(line)
    return OK


