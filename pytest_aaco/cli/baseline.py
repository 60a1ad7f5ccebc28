"""``aaco baseline show|prune|archived|restore``: the baseline store, without running pytest."""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

from pytest_aaco.cli.common import OK, USAGE_ERROR, CliError, _err, _folder, _out, check_folder
from pytest_aaco.cli.diff import baseline_files
from pytest_aaco.history.pooled import offsets_lines
from pytest_aaco.history.store import Baseline, corrupt_target, load_baseline, prune, restore
from pytest_aaco.jsonio import AacoFileError
from pytest_aaco.measure.commit import describe_commit
from pytest_aaco.records.device import Figures, HistoryRun
from pytest_aaco.reports.terminal import format_rows, num


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
        latest = HistoryRun.from_dict(b.history[-1] if b.history else {})
        rows.append((b.path.parent.name, b.item, str(b.runs), num(latest.summary.of("mean_ms"), ".3f"),
                     latest.timestamp or "-", describe_commit(latest.commit_info), b.fingerprint_id))
    for line in format_rows(("runner", "item", "runs", "latest mean ms", "latest run", "commit", "fingerprint"), rows,
                            numeric=frozenset({2, 3})):
        _out(line)
    if len(found) == 1:
        (b,) = found
        _out(f"history of {b.path}:")
        hist = []
        runs = [HistoryRun.from_dict(run) for run in b.history]
        traced = any(run.device_time is not None for run in runs)
        for i, run in enumerate(runs):
            cells = (str(i + 1), run.timestamp or "-", describe_commit(run.commit_info), str(len(run.rounds)),
                     *(num(run.summary.of(k), ".3f") for k in ("mean_ms", "p50_ms", "p99_ms")))
            if traced:  # device time per run: kernel-time sum, busy time (union), kernels
                dev = run.device_time or Figures()
                cells += tuple(num(dev.of(k), f) for k, f in (("kernel_ms", ".4f"), ("busy_ms", ".4f"),
                                                              ("kernels", ".1f")))
            hist.append(cells)
        header: tuple[str, ...] = ("#", "timestamp", "commit", "rounds", "mean ms", "p50 ms", "p99 ms")
        numeric = {0, 3, 4, 5, 6}
        if traced:
            header += ("device ms", "busy ms", "kernels")
            numeric |= {7, 8, 9}
        for line in format_rows(header, hist, numeric=frozenset(numeric)):
            _out(line)
    for folder in sorted({b.path.parent for b in found}):  # each physical GPU's fitted offset (verdict/pooling.py)
        for line in offsets_lines(folder):
            _out(f"GPU offset in {folder.name}: {line}")
    return USAGE_ERROR if problems else OK


def cmd_baseline_prune(args: argparse.Namespace) -> int:
    root = _baseline_root(args)
    found, problems = _baselines(root, args.pattern)
    for problem in problems:
        _err(f"aaco: error: {problem} (left as it is)")
    trimmed = 0
    for b in found:
        try:  # read again and trimmed under the file's lock: a run saved meanwhile is kept
            dropped = prune(b.path, args.keep, args.dry_run)
        except AacoFileError as exc:
            raise CliError(str(exc)) from None
        if not dropped:
            continue
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


