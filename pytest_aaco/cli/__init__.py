"""The ``aaco`` command: look at this machine, session bundles and baselines without running pytest.

    aaco info                                   ORT version and EPs, GPUs, clocks, the machine fingerprint
    aaco diff A B                               compare two session bundles or two baseline files
    aaco report BUNDLE [--html OUT]             the results table of a bundle; optional HTML report
    aaco report BUNDLE BUNDLE ... [--html OUT] [--github-summary FILE]
                                                one report for the bundles of several jobs (runners, shards)
    aaco ls [--session-dir DIR]                 recent session bundles, newest first
    aaco bisect GOOD BAD [-- PYTEST ARGS]      the first commit that made an item slower, side by side
    aaco trends [--baseline-dir DIR] [--out DIR]  a static page of every item's history and its change points
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

``aaco diff`` compares with the gate's statistics; :mod:`pytest_aaco.cli.diff` is its engine and
says how.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pytest_aaco.cli.baseline import (
    cmd_baseline_archived,
    cmd_baseline_prune,
    cmd_baseline_restore,
    cmd_baseline_show,
)
from pytest_aaco.cli.bisect import cmd_bisect
from pytest_aaco.cli.bundles import cmd_ls, cmd_report
from pytest_aaco.cli.common import (
    DEFAULT_BASELINE_DIR,
    DEFAULT_SESSION_DIR,
    OK,
    REGRESSION_FOUND,
    USAGE_ERROR,
    CliError,
    Project,
    _bundle,
    _cores,
    _err,
    _folder_arg,
    _fraction,
    _fraction_or_zero,
    _out,
    _out_file,
    _positive_int,
    _side,
    check_folder,
    find_project,
    load_bundle,
)
from pytest_aaco.cli.diff import cmd_diff
from pytest_aaco.cli.info import cmd_info, device_map, machine_info
from pytest_aaco.cli.trends import cmd_trends
from pytest_aaco.jsonio import AacoFileError
from pytest_aaco.options import default

__all__ = ["OK", "REGRESSION_FOUND", "USAGE_ERROR", "CliError", "Project", "_err", "_out", "build_parser",
           "check_folder",
           "cmd_baseline_archived", "cmd_baseline_prune", "cmd_baseline_restore", "cmd_baseline_show", "cmd_bisect",
           "cmd_diff",
           "cmd_info", "cmd_ls", "cmd_report", "cmd_trends",
           "device_map", "find_project", "load_bundle", "machine_info", "main"]


# ---------------------------------------------------------------- parser and entry point


def build_parser() -> argparse.ArgumentParser:
    """The ``aaco`` argument parser with its subcommands."""
    parser = argparse.ArgumentParser(
        prog="aaco", description="pytest-aaco: inspect this machine, session bundles and baselines.",
        epilog="exit status: 0 ok, 1 regression found (diff, report), 2 usage or input error, or a damaged or"
               " partial bundle (report); docs/exit-codes.md",
    )
    import pytest_aaco

    parser.add_argument("--version", action="version", version=f"%(prog)s {pytest_aaco.__version__}",
                        help="print pytest-aaco's version and exit")
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

    p = sub.add_parser("report", help="print session bundles' results; optionally write HTML",
                       description="Print the results table of a session bundle, or one table for the bundles of"
                                   " several jobs (each row names its runner: machine key and GPU), exit 1 when"
                                   " any holds a regression, exit 2 naming the file when a bundle lacks data (an"
                                   " item file truncated or missing, a session that never finished), and optionally"
                                   " write the HTML report and a GitHub job summary (of the latest bundle when none"
                                   " is named).")
    p.add_argument("bundle", metavar="BUNDLE", nargs="*", type=_bundle,
                   help="session bundle folder(s) (see `aaco ls`; default: the latest under the project's session"
                        " folder)")
    p.add_argument("--session-dir", metavar="DIR", type=_folder_arg,
                   help="where to look for the latest bundle (default: the project's, as pytest finds the project)")
    p.add_argument("--html", metavar="OUT", type=_out_file, help="write a self-contained HTML report to OUT")
    p.add_argument("--github-summary", metavar="FILE", type=_out_file,
                   help="append the GitHub job summary (Markdown) to FILE, e.g. \"$GITHUB_STEP_SUMMARY\"")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("ls", help="list recent session bundles, newest first",
                       description="List session bundles, newest first.")
    p.add_argument("--session-dir", metavar="DIR", type=_folder_arg,
                   help=f"where bundles are (default: {DEFAULT_SESSION_DIR} under the project root, found as pytest"
                        " finds its rootdir, or the aaco_session_dir ini setting)")
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="show at most N (default: 20)")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("bisect", usage="aaco bisect [options] GOOD BAD [-- PYTEST_ARGS ...]",
                       help="find the first commit that made an item slower (side by side per step)",
                       description="Binary search over the first-parent commits after GOOD up to BAD: each step"
                                   " runs pytest at the commit with --aaco-compare=GOOD in a temporary linked"
                                   " worktree (the work tree is never touched). BAD is measured first; the items"
                                   " that regress there are tracked. A commit whose run cannot judge them is"
                                   " skipped and named. Running the same command again resumes. PYTEST_ARGS, after --,"
                                   " are each step's pytest arguments (tests, -k, --aaco-provider ...)."
                                   " Exit status: 0 the first bad commit was named, 1 none could be named,"
                                   " 2 usage or input error.")
    p.add_argument("good", metavar="GOOD", help="a commit without the regression (e.g. the last green nightly)")
    p.add_argument("bad", metavar="BAD", help="a commit with it (e.g. HEAD)")
    p.add_argument("--state", metavar="DIR", type=_folder_arg,
                   help="where the state and the steps' bundles live (default: aaco-bisect in the git folder)")
    p.add_argument("--reset", action="store_true",
                   help="start over (the earlier state and its bundles are moved aside, not deleted)")
    p.add_argument("--out", metavar="FILE", type=_out_file,
                   help="the result as JSON (default: .aaco/bisect/<UTC time>.json under the current folder)")
    p.add_argument("--python", metavar="PYTHON",
                   help="the interpreter that runs each step's pytest (default: this one)")
    p.add_argument("--max-steps", type=_positive_int, metavar="N",
                   help="measure at most N commits in this call, then stop with exit 1 (run again to go on;"
                        " default: until the first bad commit is found)")
    p.set_defaults(func=cmd_bisect)

    p = sub.add_parser("trends", help="a static page of every item's history per runner, change points marked",
                       description="Write a self-contained HTML page (no network) of every item's saved runs and"
                                   " gated session runs, per runner and execution provider, with each run's 95%%"
                                   " interval, commit and device time, and the points where the series changed"
                                   " (binary segmentation, Welch test, at least --threshold). Exit status 0, also"
                                   " with no history (the page says so); 2 usage or input error.")
    p.add_argument("--baseline-dir", action="append", metavar="DIR", type=_folder_arg,
                   help="a baseline folder (repeatable; default: the project's, and its session folder)")
    p.add_argument("--session-dir", action="append", metavar="DIR", type=_folder_arg,
                   help="a session bundle, or a folder of them (repeatable)")
    p.add_argument("--out", metavar="DIR", type=_folder_arg, default=".aaco/trends",
                   help="where index.html is written (default: %(default)s)")
    p.add_argument("--threshold", type=_fraction, default=default("threshold"), metavar="FRACTION",
                   help="the smallest change marked, e.g. 0.05 or 5%% (default: %(default)g)")
    p.set_defaults(func=cmd_trends)

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
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if argv[:1] == ["bisect"] and "--" in argv:  # argparse's subparsers do not pass "--" through
        argv, pytest_args = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    try:
        args = parser.parse_args(argv)
        args.pytest_args = pytest_args
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here (``aaco info | head -1``), not at interpreter exit
        return status
    except BrokenPipeError:
        return _closed_pipe()
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


def _closed_pipe() -> int:
    """The reader of stdout went away (``aaco info | head -1``): what it wanted it has, so exit 0
    without a traceback. Python's own flush of stdout at exit would raise again, so stdout is pointed
    at /dev/null first (the recipe of https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no real file (a test's capture): nothing to silence
        pass
    return OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
