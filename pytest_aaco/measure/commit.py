"""Which commit of the project under test a session measured: git commit, branch and dirty flag.

:func:`commit_info` is read once per session (two ``git`` subprocess calls, no new dependency) and
recorded in the session bundle's ``session_meta.json`` and in every baseline history run, as
pytest-benchmark records its ``commit_info``
(https://github.com/ionelmc/pytest-benchmark/blob/master/src/pytest_benchmark/utils.py, ``get_commit_info``).
Without git, outside a repository, or when git refuses the folder, the record says unknown and
why; it never raises.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pytest_aaco.jsonio import JSONDict

#: seconds one git call may take before the commit is recorded as unknown
GIT_TIMEOUT_S = 10.0
#: hex digits of the commit id shown by ``aaco ls``, ``aaco baseline show`` and the HTML report
SHORT_ID = 10


def _git(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # GIT_OPTIONAL_LOCKS=0: git status must not take the index lock (a concurrent git command in the
    # project would otherwise fail), https://git-scm.com/docs/git#Documentation/git.txt-codeGITOPTIONALLOCKScode
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=False,
                          timeout=GIT_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)


def unknown(error: str) -> JSONDict:
    """The record of a commit that could not be read: every field None, and *error* saying why."""
    return {"id": None, "branch": None, "dirty": None, "time": None, "error": error}


def commit_info(where: Path) -> JSONDict:
    """The git commit checked out at *where* (the pytest root folder), as a JSON-ready dict.

    Keys: ``id`` (the full commit hash), ``branch`` (the branch name; None on a detached HEAD, as in
    a pull-request checkout), ``dirty`` (True when tracked files differ from the commit, staged or
    not; untracked files do not count, so the session folder a run writes into the project does
    not make the next run dirty), ``time`` (the commit's committer date, ISO 8601) and ``error``
    (None, or why the commit is unknown: no git on PATH, not a git repository, a repository
    without commits, git refusing a folder owned by another user). Never raises.
    """
    try:
        status = _git(where, "status", "--porcelain=v2", "--branch", "--untracked-files=no")
    except FileNotFoundError:
        return unknown("git is not on PATH")
    except subprocess.TimeoutExpired:
        return unknown(f"git status took longer than {GIT_TIMEOUT_S:g} s")
    except OSError as exc:
        return unknown(f"git could not run ({exc.strerror or exc})")
    if status.returncode != 0:
        lines = (status.stderr.strip() or f"git status exited with {status.returncode}").splitlines()
        return unknown(lines[0].removeprefix("fatal: "))
    head: dict[str, str] = {}
    dirty = False
    for line in status.stdout.splitlines():
        if line.startswith("# branch."):
            key, _, value = line[len("# branch."):].partition(" ")
            head[key] = value
        elif line and not line.startswith("#"):
            dirty = True
    commit = head.get("oid")
    if not commit or commit == "(initial)":
        return unknown("the git repository has no commit yet")
    branch = head.get("head")
    info: JSONDict = {"id": commit, "branch": None if branch in (None, "(detached)") else branch,
                      "dirty": dirty, "time": None, "error": None}
    try:
        shown = _git(where, "show", "-s", "--format=%cI", commit)
        if shown.returncode == 0:
            info["time"] = shown.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def describe_commit(info: object, short: int = SHORT_ID) -> str:
    """One cell for a table: ``"1a2b3c4d5e main"``, ``"1a2b3c4d5e main, dirty"``, ``"1a2b3c4d5e
    (detached)"``; ``"-"`` for a record without a commit (older files, or git unknown)."""
    if not isinstance(info, dict) or not isinstance(info.get("id"), str) or not info["id"]:
        return "-"
    text = f"{info['id'][:short]} {info['branch']}" if info.get("branch") else f"{info['id'][:short]} (detached)"
    return text + (", dirty" if info.get("dirty") else "")


def commit_text(info: object) -> str:
    """A sentence part for reports: ``"1a2b3c4d5e (branch main, committed 2026-11-27T12:00:00+00:00),
    with uncommitted changes"``, or ``"unknown (not a git repository)"``."""
    if not isinstance(info, dict) or not isinstance(info.get("id"), str) or not info["id"]:
        reason = info.get("error") if isinstance(info, dict) else None
        return f"unknown ({reason})" if reason else "unknown"
    where = [f"branch {info['branch']}" if info.get("branch") else "detached HEAD"]
    if info.get("time"):
        where.append(f"committed {info['time']}")
    text = f"{info['id'][:SHORT_ID]} ({', '.join(where)})"
    return text + (", with uncommitted changes" if info.get("dirty") else "")
