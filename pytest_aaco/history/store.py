"""Baseline files: one JSON file per item and runner (CI machine), holding a history of earlier runs.

Layout: ``<baseline dir>/<machine key>/<item slug>-<hash>.json``, so baselines of several runners
live side by side in git. Each file has a ``schema_version``, stable key order and indentation, and
is written atomically. It stores what the statistics need to be recomputed later: each run's
round summaries (mean ln ms per round, ...) and, for the latest run only, the raw iterations.

Nothing is ever destroyed (:func:`save_run`):

* the read-append-write of a file holds a lock next to it (``.<name>.lock``, ``filelock``), so two
  processes on one host and filesystem never lose each other's runs, whatever their ``TMPDIR``;
* a file that cannot be read is moved aside byte for byte as ``<name>.corrupt-<UTC time>.json``;
* a history restarted by a fingerprint change, a model change or ``--aaco-baseline-reset`` is
  kept in the file's ``archive`` (one entry per restart); ``aaco baseline`` lists and restores them,
  and a later save on an archived fingerprint resumes that history;
* a file named by an earlier pytest-aaco (slug without hash) is migrated on the next save.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from pytest_aaco.history.checks import _RE_RECORD, _check_folder, _check_history, _latencies, _require
from pytest_aaco.jsonio import AacoFileError, JSONDict, atomic_write_json, atomic_write_text, read_json
from pytest_aaco.measure.results import BenchmarkResult
from pytest_aaco.records.device import BaselineRecord
from pytest_aaco.records.item import ItemRecord
from pytest_aaco.verdict.comparable import Fingerprint
from pytest_aaco.verdict.stats import VariancePrior, fastest_rounds, fit_reference, fit_variance_prior

#: 3: history runs may hold ``reference`` (the reference workload's round log-means, the normalized
#: ones and its identity); files of versions 1 and 2 are read as runs without a reference
SCHEMA_VERSION = 3
#: files without an archive are still written as version 1, which every pytest-aaco reads; a file
#: with an archive is version 2, and one with reference series version 3, so an older pytest-aaco
#: refuses to overwrite (and lose) what it does not understand
PLAIN_SCHEMA_VERSION = 1
ARCHIVE_SCHEMA_VERSION = 2
#: readable part of a file name, in characters (the hash after it makes the name unique)
SLUG_CHARS = 80
#: hex digits of the item hash in a file name
NAME_HASH_CHARS = 10
#: seconds to wait for another process's lock on a baseline file before giving up with an error
LOCK_TIMEOUT_S = 120.0


class SchemaVersionError(AacoFileError):
    """A baseline file was written by a newer pytest-aaco; it is never overwritten by an older one."""


def legacy_slug(nodeid: str) -> str:
    """The file stem pytest-aaco 0.1 used: readable, cut at 180 characters, no hash (two items could share it)."""
    slug = re.sub(r"[^A-Za-z0-9_.\-]+", "-", nodeid.replace("::", "--")).strip("-")
    return slug[:180] or "item"


def item_slug(nodeid: str, machine_key: str = "") -> str:
    """A unique, file-name-safe stem for *nodeid* on the runner *machine_key*.

    A readable slug of the node id (at most :data:`SLUG_CHARS` characters) plus ``-`` and the first
    :data:`NAME_HASH_CHARS` hex digits of SHA-256 over the full node id and machine key, so
    ``net+fp16`` and ``net-fp16``, or two long ids with a common prefix, never share a file.
    """
    # surrogateescape: a node id from a file name that is not UTF-8 hashes as its bytes (UTF-8 ones unchanged)
    digest = hashlib.sha256(f"{machine_key}\n{nodeid}".encode("utf-8", "surrogateescape")).hexdigest()[:NAME_HASH_CHARS]
    return f"{legacy_slug(nodeid)[:SLUG_CHARS].rstrip('-.')}-{digest}"


def baseline_path(baseline_dir: Path, machine_key: str, nodeid: str) -> Path:
    """``<baseline_dir>/<machine_key>/<slug>-<hash>.json`` (:func:`item_slug`)."""
    return baseline_dir / machine_key / f"{item_slug(nodeid, machine_key)}.json"


def legacy_path(path: Path, nodeid: str) -> Path:
    """Where pytest-aaco 0.1 kept the baseline that now lives at *path*."""
    return path.with_name(f"{legacy_slug(nodeid)}.json")


def lock_path(path: Path) -> Path:
    """The lock file of a baseline file: ``.<name>.lock`` next to it (hidden; see :func:`save_run`)."""
    return path.with_name(f".{path.name}.lock")


def other_runners(baseline_dir: Path, machine_key: str, nodeid: str) -> list[str]:
    """Machine keys of other runners that have a baseline for this item."""
    if not baseline_dir.is_dir():
        return []
    found = []
    for folder in baseline_dir.iterdir():
        if folder.name == machine_key or not folder.is_dir():
            continue
        named = baseline_path(baseline_dir, folder.name, nodeid)
        if named.is_file() or _legacy_file(named, nodeid) is not None:
            found.append(folder.name)
    return sorted(found)


@dataclass
class Baseline:
    """A loaded baseline file. ``history`` is oldest first; each run is a dict with ``timestamp``,
    ``rounds`` (round summaries), ``summary`` (mean/p50/p99 ms ...), ``telemetry`` (summary) and,
    when a reference workload was measured alongside, ``reference``
    (:meth:`pytest_aaco.measure.results.ReferenceSeries.to_dict`: ``id``, ``log_means``, ``normalized`` ...).
    ``archive`` holds the histories that restarts set aside, oldest first: each a dict with
    ``archived_at`` (UTC ISO 8601), ``reason``, ``fingerprint``, ``fingerprint_id``, ``item``,
    ``history`` and ``latest_latencies_ms``."""

    path: Path
    item: str
    fingerprint: JSONDict
    fingerprint_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    latest_latencies_ms: list[list[float]] = field(default_factory=list)
    archive: list[dict[str, Any]] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return len(self.history)

    def run_round_log_means(self) -> list[list[float]]:
        """Per run, its round log-means (mean ln ms of each round); shape ``(runs, rounds_i)``."""
        return [[r["log_mean"] for r in run["rounds"]] for run in self.history]

    def run_levels(self) -> list[float]:
        """Per run with rounds, its level (ln ms): the mean of its fastest quarter of round log-means
        (:func:`pytest_aaco.verdict.stats.fastest_rounds`), the figure the stored gate compares runs by."""
        return [float(np.mean(fastest_rounds(r))) for r in self.run_round_log_means() if len(r)]

    def reference_pairs(self, reference_id: str) -> list[tuple[list[float], dict[str, Any]]]:
        """Per run measured with reference *reference_id* (oldest first): the item's round log-means
        and that run's ``reference`` record, so the two line up run by run."""
        return [([r["log_mean"] for r in run["rounds"]], run["reference"]) for run in self.history
                if isinstance(run.get("reference"), dict) and run["reference"].get("id") == reference_id]

    def reference_ids(self) -> list[str]:
        """The distinct reference identities in the history, in order of first use."""
        ids = [run["reference"]["id"] for run in self.history if isinstance(run.get("reference"), dict)]
        return list(dict.fromkeys(ids))

    def latest(self) -> JSONDict:
        return self.history[-1]

    def current(self) -> JSONDict:
        """The live history as an archive entry (without ``archived_at``/``reason``)."""
        return {"item": self.item, "fingerprint": self.fingerprint, "fingerprint_id": self.fingerprint_id,
                "history": self.history, "latest_latencies_ms": self.latest_latencies_ms}

    def to_dict(self) -> JSONDict:
        runs = self.history + [run for entry in self.archive for run in entry.get("history", [])]
        version = (SCHEMA_VERSION if any("reference" in run for run in runs)  # an older reader must not rewrite it
                   else ARCHIVE_SCHEMA_VERSION if self.archive else PLAIN_SCHEMA_VERSION)
        data = {"schema_version": version, **self.current()}
        if self.archive:
            data["archive"] = self.archive
        return data


@dataclass
class SaveOutcome:
    """What :func:`save_run` did: the saved baseline, a sentence for the item's report, and the
    warnings for the terminal (a file moved aside, a history archived), each naming the files."""

    baseline: Baseline
    note: str
    warnings: list[str] = field(default_factory=list)


def load_baseline(path: Path, nodeid: str | None = None) -> Baseline | None:
    """Load a baseline file; None when it does not exist.

    With *nodeid*, a file that pytest-aaco 0.1 named for this item (:func:`legacy_path`) is read
    when *path* does not exist yet. Raises :class:`~pytest_aaco.jsonio.AacoFileError` naming the
    file for malformed JSON, a newer schema version, missing or mistyped keys, and for a file
    standing where the baseline folder should be.
    """
    _check_folder(path)
    if not path.exists() and nodeid is not None:
        path = _legacy_file(path, nodeid) or path
    if not path.exists():
        return None
    if not path.is_file():
        raise AacoFileError(f"{path} is not a file; move it away so pytest-aaco can keep the baseline there")
    data = read_json(path)
    version = _require(path, data, "schema_version", int)
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(f"{path}: schema_version {version} is newer than this pytest-aaco understands"
                                 f" ({SCHEMA_VERSION}); upgrade pytest-aaco")
    history = _require(path, data, "history", list)
    fingerprint = _require(path, data, "fingerprint", dict)
    if not history:  # every save appends a run: an empty history is a damaged file, never a baseline
        raise AacoFileError(f"{path}: baseline key 'history' is an empty list, so there is no run to compare"
                            f" with;{_RE_RECORD}")
    _check_history(path, history)
    archive = data.get("archive") or []
    if not isinstance(archive, list):
        raise AacoFileError(f"{path}: baseline key 'archive' is not a list; restore the file from git")
    for number, entry in enumerate(archive):
        _check_history(path, _require(path, entry, "history", list), f"archive[{number}].history")
        _require(path, entry, "fingerprint", dict)
        _latencies(path, entry, f"archive[{number}].")
    return Baseline(
        path=path,
        item=str(data.get("item", "")),
        fingerprint=fingerprint,
        fingerprint_id=str(data.get("fingerprint_id", "")),
        history=history,
        latest_latencies_ms=_latencies(path, data),
        archive=archive,
    )


#: every baseline file :func:`read_baseline` parsed, by path: the file's (mtime ns, size, inode) then,
#: and what it gave (a Baseline, or the AacoFileError it raised)
_PARSED: dict[str, tuple[tuple[int, int, int], Baseline | AacoFileError]] = {}


def forget_parsed() -> None:
    """Drop every file :func:`read_baseline` keeps (the plugin does at the start of each session)."""
    _PARSED.clear()


def read_baseline(path: Path, nodeid: str | None = None) -> Baseline | None:
    """:func:`load_baseline`, with each file parsed once while it is unchanged (the same modification
    time in ns, size and inode; a save replaces the file, so a new inode).

    A gating session reads one runner folder's files for the item's own gate, the runner's variance
    priors (:func:`runner_priors`), each pooled series (:mod:`pytest_aaco.history.pooled`) and the
    HTML report; through this function each file is parsed once. The :class:`Baseline` returned is
    shared: read it, never change it (:func:`prune` and :func:`save_run` load their own). Raises
    :class:`~pytest_aaco.jsonio.AacoFileError` as :func:`load_baseline` does, again on every call
    while the unreadable file is unchanged."""
    try:
        info = path.stat()
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        return load_baseline(path, nodeid)  # missing (or a 0.1 name), or not a file: as load_baseline says
    key = (info.st_mtime_ns, info.st_size, info.st_ino)
    known = _PARSED.get(str(path))
    if known is None or known[0] != key:
        loaded: Baseline | AacoFileError | None
        try:
            loaded = load_baseline(path)
        except AacoFileError as exc:
            loaded = exc
        if loaded is None:  # removed since the stat
            _PARSED.pop(str(path), None)
            return None
        known = _PARSED[str(path)] = (key, loaded)
    if isinstance(known[1], AacoFileError):
        raise known[1].with_traceback(None)
    return known[1]


def check_data(path: Path, data: dict[str, Any]) -> None:
    """Validate a baseline document as :func:`load_baseline` does (every number finite, typed and in
    range); :class:`~pytest_aaco.jsonio.AacoFileError` naming *path* and the JSON path otherwise."""
    _check_history(path, _require(path, data, "history", list))
    _latencies(path, data)
    for number, entry in enumerate(data.get("archive") or []):
        _check_history(path, _require(path, entry, "history", list), f"archive[{number}].history")
        _latencies(path, entry, f"archive[{number}].")


def _write(path: Path, data: JSONDict) -> None:
    """Write a baseline document: validated first (:func:`check_data`), and never a NaN, an infinity
    or a null where a number belongs (``strict`` dumps), so a save never rewrites a history damaged."""
    try:
        check_data(path, data)
        atomic_write_json(path, data, strict=True)
    except ValueError as exc:
        raise AacoFileError(f"{path}: not saved, the baseline would hold {exc}") from None


def _legacy_file(path: Path, nodeid: str) -> Path | None:
    """The 0.1-named file of *nodeid* next to *path*, when it exists and was written for this very item
    (a 0.1 name could be shared by two items; the file's ``item`` says whose history it holds)."""
    legacy = legacy_path(path, nodeid)
    if legacy == path or not legacy.is_file():
        return None
    try:
        data = read_json(legacy)
    except AacoFileError:
        return None
    return legacy if isinstance(data, dict) and data.get("item") == nodeid else None


def run_record(result: BenchmarkResult, extra: JSONDict | None = None) -> JSONDict:
    """The history entry for one run: timestamp, round summaries (raw round log-means), summary,
    telemetry summary, *extra* entries (``cold_start``, ``profile``: what the run measured beside its
    rounds) and, with a reference workload, its series (:class:`~pytest_aaco.measure.results.ReferenceSeries`:
    the reference's round log-means, the normalized ones and its identity). With a kernel tracer, the
    item's ``device_time`` (and the reference's, inside ``reference``): :meth:`pytest_aaco.measure.
    device_time.DeviceSeries.to_dict`, kernel time, busy time and kernels per run, and per traced
    block the ln kernel time per run the history test needs; files without it load unchanged."""
    record = {
        "timestamp": _now(),
        "rounds": [r.summary() for r in result.rounds],
        "summary": result.summary(),
        "telemetry": (result.telemetry or {}).get("summary", {}),
        **(extra or {}),
    }
    if result.reference is not None:
        record["reference"] = result.reference.to_dict()
    if result.device is not None:
        record["device_time"] = result.device.to_dict()
    return record


def history_entries(baseline: Baseline | None, key: str) -> list[JSONDict]:
    """The *key* entry (``cold_start``, ``profile``) of every history run that has one, oldest first."""
    if baseline is None:
        return []
    return [run[key] for run in baseline.history if isinstance(run.get(key), dict)]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def move_aside(path: Path) -> Path:
    """Rename an unreadable file to ``<stem>.corrupt-<UTC time>[-N].json`` in its folder (same bytes,
    same inode) and return the new path. Raises OSError when the folder cannot be written."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.stem}.corrupt-{stamp}.json")
    counter = 1
    while target.exists():
        target = path.with_name(f"{path.stem}.corrupt-{stamp}-{counter}.json")
        counter += 1
    os.replace(path, target)
    return target


@contextmanager
def locked(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the lock file of baseline *path* (:func:`lock_path`, ``filelock``) for a read-append-write.

    The lock lives next to the file, so every process saving it on this host and filesystem takes
    the same lock whatever its ``TMPDIR``. The folder gets a ``.gitignore`` for the lock files.
    Raises :class:`AacoFileError` when another process holds the lock longer than *timeout_s* (s).
    """
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    ignore = path.parent / ".gitignore"
    if not ignore.exists():
        atomic_write_text(ignore, "# lock files of pytest-aaco's baseline saves\n.*.lock\n")
    lock = FileLock(str(lock_path(path)), timeout=timeout_s)
    try:
        lock.acquire()
    except Timeout:
        raise AacoFileError(f"{path}: another process held {lock_path(path).name} for {timeout_s:.0f} s;"
                            " if no pytest-aaco run is saving, delete the lock file and re-run") from None
    try:
        yield
    finally:
        lock.release()


def _archived(baseline: Baseline, reason: str) -> JSONDict:
    return {"archived_at": _now(), "reason": reason, **baseline.current()}


def _resumable(archive: list[dict[str, Any]], fingerprint: Fingerprint) -> int | None:
    """Index of the newest archived history recorded on *fingerprint* (same model), or None."""
    for index in range(len(archive) - 1, -1, -1):
        stored = archive[index]["fingerprint"]
        if fingerprint.matches(stored) and not fingerprint.subject_changes(stored):
            return index
    return None


def _plural(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def save_run(path: Path, nodeid: str, fingerprint: Fingerprint, result: BenchmarkResult,
             keep: int = 30, reset: bool = False, extra: JSONDict | None = None) -> SaveOutcome:
    """Append *result* (with *extra* entries, see :func:`run_record`) to the item's history
    (keeping the last *keep* runs) and write it atomically.

    The read-append-write holds the file's lock (:func:`locked`). Nothing is lost: an unreadable
    file is moved aside (:func:`move_aside`); a fingerprint change, a model change or *reset* starts
    a new history and archives the old one in the file (a later fingerprint change back resumes
    it); a file with the 0.1 name is migrated to *path*. Returns what happened, for the report and
    the terminal. Raises :class:`SchemaVersionError` for a file from a newer pytest-aaco (never
    overwritten) and :class:`AacoFileError` when the file or folder cannot be written.
    """
    try:
        _check_folder(path)
        with locked(path):
            return _save_locked(path, nodeid, fingerprint, result, keep, reset, extra)
    except OSError as exc:
        raise AacoFileError(f"{path}: cannot save the baseline ({exc.strerror or exc});"
                            f" make {path.parent} writable or point --aaco-baseline-dir elsewhere") from None


def _save_locked(path: Path, nodeid: str, fingerprint: Fingerprint, result: BenchmarkResult,
                 keep: int, reset: bool, extra: JSONDict | None = None) -> SaveOutcome:
    notes: list[str] = []
    warnings: list[str] = []
    source = path if path.exists() else (_legacy_file(path, nodeid) or path)
    try:
        existing = load_baseline(source)
    except SchemaVersionError:
        raise  # written by a newer pytest-aaco: replacing it would destroy its history
    except AacoFileError as exc:
        kept = move_aside(source)
        warnings.append(f"unreadable baseline {source} moved aside to {kept} ({exc}); a new history starts")
        notes.append(f"unreadable baseline moved aside to {kept.name}")
        existing, source = None, path
    archive = list(existing.archive) if existing is not None else []
    history = list(existing.history) if existing is not None else []
    reason = ""
    if existing is not None and not fingerprint.matches(existing.fingerprint):
        reason = f"fingerprint changed ({fingerprint.describe_diff(existing.fingerprint)})"
    elif existing is not None and reset:
        reason = "history reset"
    elif existing is not None and fingerprint.subject_changes(existing.fingerprint):
        reason = "model changed since the history was recorded"
    if existing is not None and reason:
        archive.append(_archived(existing, reason))
        history = []
        index = None if reset else _resumable(archive[:-1], fingerprint)
        text = f"{reason}: the {_plural(existing.runs)} history is archived in {path.name}"
        if index is not None:
            resumed = archive.pop(index)
            history = list(resumed["history"])
            text += f"; resumed the {_plural(len(history))} history archived {resumed.get('archived_at')}"
        else:
            text += " and a new history starts"
        notes.append(text + " (aaco baseline --archived lists it, --restore brings it back)")
        if not reset:
            warnings.append(f"{nodeid}: {text}")
    history = (history + [run_record(result, extra)])[-keep:]
    baseline = Baseline(
        path=path,
        item=nodeid,
        fingerprint=fingerprint.fields,
        fingerprint_id=fingerprint.id,
        history=history,
        latest_latencies_ms=[r.latencies_ms.round(4).tolist() for r in result.rounds],
        archive=archive,
    )
    _write(path, baseline.to_dict())
    if source != path:  # a 0.1 name: the history now lives under the new one
        source.unlink()
        notes.append(f"migrated from {source.name}")
    notes.append(f"baseline saved ({_plural(len(history))} in history)")
    return SaveOutcome(baseline, "; ".join(notes), warnings)


def corrupt_target(copy: Path) -> Path:
    """The baseline file a moved-aside copy (``<stem>.corrupt-<time>.json``) came from."""
    stem, sep, _ = copy.name.rpartition(".corrupt-")
    if not sep:
        raise AacoFileError(f"{copy}: not a moved-aside baseline (<name>.corrupt-<time>.json)")
    return copy.with_name(f"{stem}.json")


def restore(path: Path, index: int | None = None, copy: Path | None = None) -> str:
    """Bring back archived history *index* (0-based, as in ``Baseline.archive``) of *path*, or the
    repaired moved-aside *copy* of it, as the live history; the live one goes to the archive.

    Runs under the file's lock and writes atomically. Returns a sentence saying what happened.
    Raises :class:`AacoFileError` naming the file when it (or the copy) cannot be read or written,
    or the index does not exist.
    """
    try:
        with locked(path):
            return _restore_locked(path, index, copy)
    except OSError as exc:
        raise AacoFileError(f"{path}: cannot restore the baseline ({exc.strerror or exc});"
                            f" make {path.parent} writable") from None


def _restore_locked(path: Path, index: int | None, copy: Path | None) -> str:
    current = load_baseline(path)
    if copy is not None:
        restored = load_baseline(copy)  # still unreadable: AacoFileError naming it, nothing changes
        if restored is None:
            raise AacoFileError(f"{copy}: no such file")
        archive = list(restored.archive) + (current.archive if current is not None else [])
        if current is not None:
            archive.append(_archived(current, f"replaced by aaco baseline restore {copy.name}"))
        restored.path, restored.archive = path, archive
        _write(path, restored.to_dict())
        copy.unlink()
        return f"restored {path} from {copy.name} ({_plural(restored.runs)})"
    if current is None:
        raise AacoFileError(f"{path}: no such baseline file")
    if index is None or not 0 <= index < len(current.archive):
        raise AacoFileError(f"{path}: no archived history #{(index or 0) + 1};"
                            f" it has {len(current.archive)} (aaco baseline archived lists them)")
    archive = list(current.archive)
    entry = archive.pop(index)
    archive.append(_archived(current, f"replaced by aaco baseline restore #{index + 1}"))
    baseline = Baseline(path=path, item=str(entry.get("item") or current.item), fingerprint=entry["fingerprint"],
                        fingerprint_id=str(entry.get("fingerprint_id", "")), history=entry["history"],
                        latest_latencies_ms=entry.get("latest_latencies_ms") or [], archive=archive)
    _write(path, baseline.to_dict())
    return (f"restored the {_plural(baseline.runs)} history archived {entry.get('archived_at')} in {path}"
            f" ({entry.get('reason')}); the live one is archived")


def prune(path: Path, keep: int, dry_run: bool = False) -> int:
    """Trim the live history of baseline *path* to its last *keep* runs (``aaco baseline prune``).

    The read-trim-write runs under the file's lock (:func:`locked`), the lock every writer of the
    store takes, so a run saved meanwhile by another process is never lost: the file is read again
    inside the lock, never trimmed from an earlier read. Archived histories are left as they are.
    With *dry_run* nothing is written (and no lock taken). Returns the runs dropped (would be
    dropped), 0 when the file holds *keep* runs or fewer or is gone. Raises :class:`AacoFileError`
    naming the file when it cannot be read (left as it is) or written.
    """
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    try:
        if dry_run:
            current = load_baseline(path)
            return max(current.runs - keep, 0) if current is not None else 0
        with locked(path):
            current = load_baseline(path)
            if current is None or current.runs <= keep:
                return 0
            dropped = current.runs - keep
            current.history = current.history[-keep:]
            _write(path, current.to_dict())
            return dropped
    except OSError as exc:
        raise AacoFileError(f"{path}: cannot trim the baseline ({exc.strerror or exc});"
                            f" make {path.parent} writable") from None


@dataclass(frozen=True)
class RunnerPriors:
    """The variance priors of one runner's items: ``raw`` for the prediction-interval test on raw
    run means, ``adjusted`` for the residual variance of the reference-adjusted test; each None
    with fewer than 3 usable items."""

    raw: VariancePrior | None = None
    adjusted: VariancePrior | None = None


def _runner_baselines(folder: Path) -> list[Baseline]:
    """Every readable baseline file in *folder* (one runner), each parsed once while unchanged
    (:func:`read_baseline`); unreadable ones are skipped."""
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            baseline = read_baseline(path)
        except AacoFileError:
            continue
        if baseline is not None:
            found.append(baseline)
    return found


def runner_priors(folder: Path, min_runs: int = 3) -> RunnerPriors:
    """Both variance priors of one runner (:class:`RunnerPriors`, :func:`pytest_aaco.verdict.stats.fit_variance_prior`).

    Reads every baseline file in *folder* (one runner; parsed once while unchanged, :func:`read_baseline`,
    so the pooled variance reuses them); files that cannot be read are skipped.
    ``raw`` is fitted to the variances of the run levels (ln units²; each run's fastest quarter of rounds,
    :func:`pytest_aaco.verdict.stats.fastest_rounds`, as the gate tests them) of each history with at
    least *min_runs* runs; ``adjusted`` to the residual variances (``H - 2`` df) of the items whose last reference
    workload ran in at least 4 of their runs (:func:`pytest_aaco.verdict.stats.fit_reference`)."""
    variances, dfs, residuals, residual_dfs = [], [], [], []
    for baseline in _runner_baselines(folder):
        if baseline.runs >= min_runs:
            means = np.array([np.mean(fastest_rounds(r)) for r in baseline.run_round_log_means()])
            variances.append(float(np.var(means, ddof=1)))
            dfs.append(baseline.runs - 1)
        ids = baseline.reference_ids()
        pairs = baseline.reference_pairs(ids[-1]) if ids else []
        if len(pairs) >= 4:
            fit = fit_reference([np.mean(fastest_rounds(rounds)) for rounds, _ in pairs],
                                [np.mean(fastest_rounds(r["log_means"])) for _, r in pairs])
            residuals.append(fit.residual_var)
            residual_dfs.append(len(pairs) - 2)
    return RunnerPriors(fit_variance_prior(variances, dfs), fit_variance_prior(residuals, residual_dfs))


def report_baselines(records: Iterable[ItemRecord]) -> dict[str, BaselineRecord]:
    """What the reports show of each item's baseline file (:class:`~pytest_aaco.records.device.BaselineRecord`),
    by node id, for the records whose ``verdict.baseline_path`` can be read. Missing or unreadable
    files are left out (the HTML report then says the baseline file was not found); raises nothing."""
    found = {}
    for record in records:
        path = record.verdict.baseline_path if record.verdict is not None else None
        if not path:
            continue
        try:
            baseline = read_baseline(Path(path))
        except (AacoFileError, OSError):
            continue
        if baseline is not None:
            found[record.nodeid] = BaselineRecord.from_dict(baseline.to_dict())
    return found
