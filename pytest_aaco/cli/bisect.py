"""``aaco bisect GOOD BAD [-- PYTEST ARGS]``: find the first commit that made an item slower.

A binary search over the first-parent commits after GOOD up to BAD, as ``git bisect`` runs one
(``git bisect --first-parent``), where each step is a side-by-side gate: the pytest run of the
commit, with ``--aaco-compare=GOOD``, so it uses the same machinery, rules and budget as a pull
request's ``--aaco-compare`` job (interleaved cycles, paired test, device time where traced).
This is how Chromium's Pinpoint bisects a performance regression: every step is measured against
the known-good side in one process, never against a number from another day
(https://chromium.googlesource.com/chromium/src/+/HEAD/docs/speed/bisects.md).

* **The user's work tree is never touched.** Each step runs in a linked worktree of the commit
  (``git worktree add --detach`` in a temporary folder, removed after the step), and the state and
  the steps' bundles live under the repository's git folder (``<git common dir>/aaco-bisect``).
* **BAD is measured first.** The items that regress at BAD against GOOD are the ones tracked; a
  later step is *bad* when one of them regresses, *good* when each of them was judged ``no
  regression`` (or is unchanged at that commit), and *skipped* otherwise, as ``git bisect skip``
  would: the registry or the model is missing, the session cannot be built, pytest stopped, or the
  verdict is inconclusive. The next step then takes the untested commit nearest the middle.
* **Resumable.** The state file is rewritten after every step; running the same command again goes
  on where it stopped (``--reset`` starts over).
* It ends by naming the first bad commit with the tracked item's metric, effect and the bound its
  rule compared, the skipped commits, and the steps taken; the result is written as JSON
  (``--out``, default ``.aaco/bisect/<UTC time>.json`` under the current folder) and appended to
  the GitHub job summary when ``GITHUB_STEP_SUMMARY`` is set.

Exit status: 0 the first bad commit was named; 1 none could be named (BAD does not regress against
GOOD, or every candidate was skipped: the range is printed); 2 a usage or input error.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_aaco.cli.common import OK, REGRESSION_FOUND, CliError, _out
from pytest_aaco.jsonio import AacoFileError, append_text, atomic_write_json, read_json
from pytest_aaco.records import Outcome
from pytest_aaco.reports.bundle import list_sessions, load_session, records_of

BAD, GOOD, SKIP = "bad", "good", "skip"
STATE_FOLDER = "aaco-bisect"
STATE_FILE = "state.json"
#: state files of another layout are refused, not misread
STATE_VERSION = 1


class BisectError(Exception):
    """A usage or input problem: the message names the argument or file and the fix."""


@dataclass
class ItemFinding:
    """One tracked item in one step: its node id, the verdict's outcome word, the metric that decided,
    its change (``ratio`` current / baseline) and the bound the rule compared (``lower_bound`` for a
    regression, ``upper_bound`` otherwise; ratios), and the verdict's message."""

    nodeid: str
    outcome: str
    metric: str | None = None
    ratio: float | None = None
    bound: float | None = None
    bound_name: str | None = None
    message: str = ""
    paired: bool = False

    def effect(self) -> str:
        """``device time +7.1% paired (lower bound +5.2%)``: the metric, its change (``paired`` when measured
        side by side, the paired test's estimate) and the compared bound, in per cent."""
        if self.ratio is None:
            return self.outcome
        text = f"{self.metric or 'latency'} {(self.ratio - 1) * 100:+.1f}%" + (" paired" if self.paired else "")
        if self.bound is not None and self.bound_name:
            text += f" ({self.bound_name} {(self.bound - 1) * 100:+.1f}%)"
        return text


@dataclass
class Step:
    """One measured commit: ``state`` is :data:`BAD`, :data:`GOOD` or :data:`SKIP`, ``reason`` says why,
    ``items`` the tracked items' findings, ``seconds`` the step's wall time (s), ``bundle`` its session
    bundle folder, ``exit_code`` pytest's."""

    commit: str
    subject: str
    state: str
    reason: str
    items: list[ItemFinding] = field(default_factory=list)
    seconds: float = 0.0
    bundle: str | None = None
    exit_code: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        items = [ItemFinding(**item) for item in data.get("items") or [] if isinstance(item, dict)]
        return cls(**{**{k: v for k, v in data.items() if k in cls.__dataclass_fields__}, "items": items})


@dataclass
class Bisection:
    """The search: ``good`` and ``bad`` commits (SHA), ``commits`` the first-parent commits after GOOD up
    to and including BAD as ``[sha, subject]`` oldest first, ``pytest_args`` each step's arguments,
    ``subdir`` the folder below the repository's top level that pytest runs in, ``tracked`` the node ids
    that regress at BAD, ``steps`` by commit."""

    good: str
    bad: str
    commits: list[list[str]]
    pytest_args: list[str]
    subdir: str
    tracked: list[str] = field(default_factory=list)
    steps: dict[str, Step] = field(default_factory=dict)
    version: int = STATE_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "steps": {sha: asdict(step) for sha, step in self.steps.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Bisection:
        steps = {sha: Step.from_dict(s) for sha, s in (data.get("steps") or {}).items() if isinstance(s, dict)}
        return cls(good=str(data["good"]), bad=str(data["bad"]), commits=[list(c) for c in data["commits"]],
                   pytest_args=[str(a) for a in data["pytest_args"]], subdir=str(data.get("subdir") or ""),
                   tracked=[str(t) for t in data.get("tracked") or []], steps=steps,
                   version=int(data.get("version") or 0))

    # ------------------------------------------------------------ the search

    def bounds(self) -> tuple[int, int]:
        """``(lo, hi)``: the index of the last commit known good (-1: GOOD itself) and of the first known
        bad one after it (the index of BAD when nothing else was found bad)."""
        states = [self.steps[sha].state if sha in self.steps else None for sha, _ in self.commits]
        hi = len(self.commits) - 1
        for i, state in enumerate(states):
            if state == BAD:
                hi = i
                break
        lo = max([i for i, state in enumerate(states[:hi]) if state == GOOD], default=-1)
        return lo, hi

    def next_index(self) -> int | None:
        """The commit to measure next: BAD while it is unmeasured, then the untested commit strictly between
        the bounds nearest their middle (the later one on a tie); None when the search is over."""
        last = len(self.commits) - 1
        if self.commits[last][0] not in self.steps:
            return last
        if self.steps[self.commits[last][0]].state != BAD:
            return None
        lo, hi = self.bounds()
        untested = [i for i in range(lo + 1, hi) if self.commits[i][0] not in self.steps]
        if not untested:
            return None
        middle = (lo + hi) / 2
        return min(untested, key=lambda i: (abs(i - middle), -i))

    def culprits(self) -> list[int]:
        """The indices the first bad commit can be: the first known bad one, preceded by the skipped
        commits between the bounds (one index when the search named it)."""
        lo, hi = self.bounds()
        return list(range(lo + 1, hi + 1))


# ---------------------------------------------------------------- git


def _git(repo: Path, *args: str, check: bool = True) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise BisectError("aaco bisect needs the git command, which is not on PATH") from None
    if check and done.returncode:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BisectError(f"git {' '.join(args)}: {message[-1] if message else f'exit {done.returncode}'}")
    return done.stdout.decode("utf-8", "surrogateescape")


def _commit(repo: Path, ref: str, name: str) -> str:
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).strip()
    if not sha:
        raise BisectError(f"{name} {ref!r} is not a commit in {repo}; fetch it (a CI checkout needs"
                          " actions/checkout with fetch-depth: 0) or pass a SHA")
    return sha


def first_parent_commits(repo: Path, good: str, bad: str) -> list[list[str]]:
    """``[[sha, subject], ...]``: the first-parent commits after *good* up to and including *bad*,
    oldest first. Raises :class:`BisectError` when *good* is not a first-parent ancestor of *bad*."""
    lines = _git(repo, "log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good}..{bad}").splitlines()
    commits = [line.split("\0", 1) for line in lines if "\0" in line]
    if not commits:
        raise BisectError(f"no commits after GOOD {good[:12]} up to BAD {bad[:12]}: GOOD must be older than BAD")
    parent = _git(repo, "rev-parse", f"{commits[0][0]}^", check=False).strip()
    if parent != good:
        raise BisectError(f"GOOD {good[:12]} is not on BAD's first-parent line (git log --first-parent {bad[:12]});"
                          " pass a commit of that line as GOOD")
    return commits


# ---------------------------------------------------------------- one step


def _findings(bundle: Path, tracked: list[str]) -> tuple[list[ItemFinding], list[str]]:
    """The findings of every item in the newest bundle under *bundle* (only *tracked* node ids when
    given), and the bundle's unreadable files."""
    sessions = list_sessions(bundle)
    if not sessions:
        return [], []
    loaded = load_session(sessions[0])
    found = []
    for record in records_of(loaded):
        if tracked and record.nodeid not in tracked:
            continue
        verdict = record.verdict
        finding = ItemFinding(nodeid=record.nodeid, outcome=str(record.effective_outcome.value),
                              message=(verdict.message if verdict is not None else record.error) or "")
        if verdict is not None:
            metrics = verdict.failed_metrics or list(verdict.judgements)
            judgement = verdict.judgements.get(metrics[0]) if metrics else None
            if judgement is not None:
                regressed = record.effective_outcome == Outcome.REGRESSION
                finding.metric = judgement.metric
                finding.ratio = judgement.ratio
                finding.bound = judgement.lower_bound if regressed else judgement.upper_bound
                finding.bound_name = "lower bound" if regressed else "upper bound"
                finding.paired = verdict.side_by_side is not None
        if record.error and record.verdict is None:
            finding.outcome = "error"
        found.append(finding)
    return found, sorted(loaded["errors"])


def classify(findings: list[ItemFinding], tracked: list[str], exit_code: int) -> tuple[str, str]:
    """``(state, reason)`` of a step from its tracked items' findings and pytest's *exit_code*:
    :data:`BAD` when a tracked item regressed; :data:`GOOD` when every tracked item found was judged
    ``no-regression``, ``unchanged`` or ``new`` and none is missing; :data:`SKIP` otherwise (the reason
    names the item and what it read, or pytest's exit code)."""
    regressed = [f for f in findings if f.outcome == Outcome.REGRESSION.value]
    if regressed:
        return BAD, f"{regressed[0].nodeid}: {regressed[0].effect()}"
    if exit_code in (2, 3, 4, 5) and not findings:
        why = {2: "interrupted or a collection error", 3: "internal error", 4: "usage error",
               5: "no tests collected"}[exit_code]
        return SKIP, f"pytest exit {exit_code} ({why}): the registry, model or tests cannot be run at this commit"
    seen = {f.nodeid for f in findings}
    missing = [t for t in tracked if t not in seen]
    if missing:
        return SKIP, f"{missing[0]} did not run at this commit"
    if not findings:
        return SKIP, f"no item was judged (pytest exit {exit_code})"
    judged = (Outcome.NO_REGRESSION.value, Outcome.UNCHANGED.value, Outcome.NEW.value)
    unjudged = [f for f in findings if f.outcome not in judged]
    if unjudged:
        return SKIP, f"{unjudged[0].nodeid} read {unjudged[0].outcome}: {unjudged[0].message[:200]}"
    return GOOD, "no regression in " + ", ".join(f.nodeid for f in findings)


def first_error(log: Path) -> str:
    """``: <line>``, the first line of pytest's error report in *log* (a collection error names the
    registry file and what is wrong), at most 300 characters; '' when there is none."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for i, line in enumerate(lines):
        if line.startswith("_") and "ERROR" in line and i + 1 < len(lines):
            return f": {lines[i + 1].strip()[:300]}"
        if line.startswith(("E   ", "ERROR: ")):
            return f": {line[4:].strip()[:300]}"
    return ""


def run_step(repo: Path, state: Bisection, index: int, work: Path, python: str) -> Step:
    """Measure ``state.commits[index]`` against GOOD side by side: a linked worktree of the commit in a
    temporary folder, ``python -m pytest ARGS --aaco-compare=GOOD`` in it (the step's session bundle
    under *work*), the worktree removed after. Never raises for a failing run: that is a skipped step."""
    sha, subject = state.commits[index]
    bundle = work / "steps" / f"{index + 1:03d}-{sha[:12]}"
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    started = time.monotonic()
    tree = Path(tempfile.mkdtemp(prefix="aaco-bisect-"))
    checkout = tree / "tree"
    try:
        _git(repo, "worktree", "add", "--detach", "--force", str(checkout), sha)
        cwd = checkout / state.subdir
        env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}  # the bisection writes its own
        cmd = [python, "-m", "pytest", *state.pytest_args, f"--aaco-compare={state.good}",
               f"--aaco-session-dir={bundle}"]
        with open(bundle / "pytest.log", "wb") as log:
            exit_code = subprocess.run(cmd, cwd=cwd if cwd.is_dir() else checkout, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, check=False).returncode
    except BisectError as exc:
        return Step(sha, subject, SKIP, f"the commit could not be laid out: {exc}", seconds=time.monotonic() - started)
    finally:
        _git(repo, "worktree", "remove", "--force", str(checkout), check=False)
        shutil.rmtree(tree, ignore_errors=True)
        _git(repo, "worktree", "prune", check=False)
    findings, damaged = _findings(bundle, state.tracked)
    step_state, reason = classify(findings, state.tracked, exit_code)
    if step_state == SKIP and not findings:
        reason += first_error(bundle / "pytest.log")
    if damaged and step_state != BAD:
        step_state, reason = SKIP, f"the step's bundle has unreadable files: {', '.join(damaged)}"
    return Step(sha, subject, step_state, reason, findings, time.monotonic() - started, str(bundle), exit_code)


# ---------------------------------------------------------------- the command


def _load_state(path: Path) -> Bisection | None:
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except AacoFileError as exc:
        raise BisectError(f"{exc} (a bisection state: run again with --reset to start over)") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise BisectError(f"{path} is not a bisection state this version of aaco can read; run again with --reset")
    try:
        return Bisection.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BisectError(f"{path} is damaged ({type(exc).__name__}: {exc}); run again with --reset") from None


def _short(sha: str, subject: str) -> str:
    return f"{sha[:12]} {subject}"


def result_of(state: Bisection) -> dict[str, Any]:
    """The bisection's result as JSON: ``first_bad`` (sha, subject, the tracked item's finding) or None,
    ``candidates`` (the commits it can be, when skipped commits leave more than one), the skipped
    commits, the steps in the order taken, and GOOD/BAD."""
    order = sorted(state.steps.values(), key=lambda s: [c[0] for c in state.commits].index(s.commit))
    bad_step = state.steps.get(state.bad)
    found: dict[str, Any] | None = None
    candidates: list[dict[str, Any]] = []
    if bad_step is not None and bad_step.state == BAD and state.next_index() is None:
        indices = state.culprits()
        candidates = [{"commit": state.commits[i][0], "subject": state.commits[i][1]} for i in indices]
        if len(indices) == 1:
            sha, subject = state.commits[indices[0]]
            step = state.steps[sha]
            found = {"commit": sha, "subject": subject, "items": [asdict(f) for f in step.items
                                                                 if f.outcome == Outcome.REGRESSION.value]}
    return {"good": state.good, "bad": state.bad, "first_bad": found, "candidates": candidates,
            "skipped": [{"commit": s.commit, "subject": s.subject, "reason": s.reason} for s in order
                        if s.state == SKIP],
            "steps": [asdict(s) for s in order], "measured_steps": len(order),
            "seconds": round(sum(s.seconds for s in order), 1)}


def summary_markdown(result: dict[str, Any]) -> str:
    """The GitHub job summary of a bisection (Markdown)."""
    lines = ["## aaco bisect", ""]
    first = result.get("first_bad")
    if first:
        lines.append(f"**First bad commit: `{first['commit'][:12]}`** {_md(first['subject'])}")
        for item in first["items"]:
            lines.append(f"- `{_md(item['nodeid'])}`: {_md(ItemFinding(**item).effect())}")
    elif result["candidates"]:
        lines.append("**The first bad commit is one of** (skipped commits leave more than one): "
                     + ", ".join(f"`{c['commit'][:12]}`" for c in result["candidates"]))
    else:
        lines.append("**No first bad commit named:** BAD does not regress against GOOD.")
    lines += ["", "| step | commit | state | why |", "|---|---|---|---|"]
    for i, step in enumerate(result["steps"], 1):
        lines.append(f"| {i} | `{step['commit'][:12]}` {_md(step['subject'])} | {step['state']} |"
                     f" {_md(step['reason'])} |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def cmd_bisect(args: argparse.Namespace) -> int:
    """Run or resume the bisection; returns the exit status (module docstring)."""
    cwd = Path.cwd()
    try:
        top = Path(_git(cwd, "rev-parse", "--show-toplevel").strip())
        common = Path(_git(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
        good, bad = _commit(top, args.good, "GOOD"), _commit(top, args.bad, "BAD")
        pytest_args = list(args.pytest_args)
        for arg in pytest_args:
            if arg.startswith(("--aaco-compare=", "--aaco-session-dir")) or arg == "--aaco-compare":
                raise BisectError(f"{arg.split('=')[0]} is set by aaco bisect for each step; leave it out")
            if arg == "--aaco-no-bundle":
                raise BisectError("--aaco-no-bundle: each step's verdicts are read from its session bundle;"
                                  " leave it out")
        work = Path(args.state) if args.state else common / STATE_FOLDER
        state_path = work / STATE_FILE
        if args.reset and work.exists():  # nothing is lost: the old state and its bundles are moved aside
            aside = work.with_name(f"{work.name}.old-{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}")
            work.rename(aside)
            _out(f"the earlier bisection was moved aside to {aside}")
        state = _load_state(state_path)
        subdir = os.path.relpath(cwd.resolve(), top.resolve())
        subdir = "" if subdir == "." else subdir
        if state is not None and (state.good, state.bad, state.pytest_args, state.subdir) != (good, bad, pytest_args,
                                                                                               subdir):
            raise BisectError(f"{state_path} holds another bisection ({state.good[:12]}..{state.bad[:12]}"
                              f" {' '.join(state.pytest_args)}); run with --reset to start this one")
        if state is None:
            state = Bisection(good, bad, first_parent_commits(top, good, bad), pytest_args, subdir)
        else:
            _out(f"resuming: {len(state.steps)} step(s) done ({state_path})")
    except BisectError as exc:
        raise CliError(str(exc)) from None
    work.mkdir(parents=True, exist_ok=True)
    atomic_write_json(state_path, state.to_dict())
    _out(f"bisecting {len(state.commits)} first-parent commit(s) after {good[:12]} up to {bad[:12]}")
    taken = 0
    while (index := state.next_index()) is not None:
        if args.max_steps is not None and taken >= args.max_steps:
            _out(f"stopped after {taken} step(s) (--max-steps): run the same command again to go on ({state_path})")
            return REGRESSION_FOUND  # no first bad commit named yet
        taken += 1
        sha, subject = state.commits[index]
        lo, hi = state.bounds()
        _out(f"step {len(state.steps) + 1}: {_short(sha, subject)} against GOOD ({hi - lo} candidate(s) left)")
        step = run_step(top, state, index, work, args.python or sys.executable)
        if index == len(state.commits) - 1 and step.state == BAD:
            state.tracked = [f.nodeid for f in step.items if f.outcome == Outcome.REGRESSION.value]
            step.items = [f for f in step.items if f.nodeid in state.tracked]
        state.steps[sha] = step
        atomic_write_json(state_path, state.to_dict())
        _out(f"  {step.state}: {step.reason} ({step.seconds:.0f} s; log {step.bundle}/pytest.log)")
    result = result_of(state)
    out = Path(args.out) if args.out else cwd / ".aaco" / "bisect" / (
        _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, result)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        append_text(summary, summary_markdown(result))
    _out("")
    for skipped in result["skipped"]:
        _out(f"skipped {skipped['commit'][:12]} {skipped['subject']}: {skipped['reason']}")
    steps = f"{result['measured_steps']} side-by-side step(s), {result['seconds']:.0f} s"
    first = result["first_bad"]
    if first:
        effects = "; ".join(f"{i['nodeid']}: {ItemFinding(**i).effect()}" for i in first["items"])
        _out(f"first bad commit: {_short(first['commit'], first['subject'])}")
        _out(f"  {effects}")
        _out(f"  {steps}; result {out}")
        return OK
    bad_step = state.steps.get(state.bad)
    if result["candidates"]:
        _out("the first bad commit is one of (skipped commits leave more than one): "
             + ", ".join(_short(c["commit"], c["subject"]) for c in result["candidates"]))
    elif bad_step is not None and bad_step.state == SKIP:
        _out(f"BAD {bad[:12]} could not be measured: {bad_step.reason}")
    else:
        _out(f"BAD {bad[:12]} does not regress against GOOD {good[:12]}: nothing to bisect"
             + (f" ({bad_step.reason})" if bad_step is not None else ""))
    _out(f"  {steps}; result {out}")
    return REGRESSION_FOUND  # no first bad commit named
