"""The session bundle: one folder of JSON files per pytest session, written as the session goes.

Layout::

    <root>/<YYYYmmdd-HHMMSS>_<8 hex id>/      # UTC start time, random id
        session_meta.json                      # written at start, rewritten by finish()
        environment.json                       # the lockbox (pytest_aaco.measure.environment)
        items/<safe nodeid>.json               # one per finished item, written at once

Every file goes through :func:`pytest_aaco.jsonio.atomic_write_json` (temporary file, fsync,
``os.replace``), so a crash or Ctrl-C leaves each file whole or absent, and every item that
finished before it is kept. :func:`list_sessions` and :func:`load_session` read bundles back
for the ``aaco`` command line.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import uuid
from pathlib import Path
from typing import TypedDict

from pytest_aaco.jsonio import AacoFileError, JSONDict, atomic_write_json, read_json
from pytest_aaco.records import ItemRecord

META_FILE = "session_meta.json"
ENVIRONMENT_FILE = "environment.json"
ITEMS_DIR = "items"
SCHEMA_VERSION = 1
#: folder names made by :class:`SessionBundle`: UTC timestamp, underscore, 8 lower-case hex digits
SESSION_DIR_PATTERN = re.compile(r"^(\d{8}-\d{6})_([0-9a-f]{8})$")
#: longest item file stem; longer node ids are cut and keep a hash of the full id
MAX_STEM = 120


def safe_file_stem(nodeid: str) -> str:
    """A file-name stem for a pytest node id, unique per node id and safe on Linux, macOS and Windows.

    Characters other than ``[A-Za-z0-9._-]`` become ``_`` (``tests/perf/test_models.py::test_a[resnet50-cpu]``
    -> ``tests_perf_test_models.py__test_a_resnet50-cpu_``), then the first 8 hex digits of the
    SHA-256 of the node id are appended, so ids that map to the same characters (``a/b``, ``a_b``)
    stay apart. The readable part is cut to :data:`MAX_STEM` characters.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", nodeid).strip("._") or "item"
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogateescape")).hexdigest()[:8]  # any file-name bytes
    return f"{readable[:MAX_STEM]}.{digest}"


def _utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


class SessionBundle:
    """Writer of one session's bundle folder (created by the constructor).

    *root* is the parent folder (``--aaco-session-dir``, default ``.aaco/sessions``); *session_id*
    is 8 hex digits, random when omitted. Raises ValueError for an id that is not 8 hex digits
    and OSError when the folder cannot be created.
    """

    def __init__(self, root: str | Path, session_id: str | None = None) -> None:
        if session_id is None:
            session_id = uuid.uuid4().hex[:8]
        if not re.fullmatch(r"[0-9a-f]{8}", session_id):
            raise ValueError(f"session_id must be 8 lower-case hex digits, got {session_id!r}")
        self.session_id = session_id
        self.started = _utc_now()
        name = f"{self.started.strftime('%Y%m%d-%H%M%S')}_{session_id}"
        self._path = Path(root) / name
        (self._path / ITEMS_DIR).mkdir(parents=True, exist_ok=True)
        self._meta: JSONDict = {}
        self._items: dict[str, Path] = {}

    @classmethod
    def attach(cls, path: str | Path) -> SessionBundle:
        """Write into an existing bundle folder made by another process (a pytest-xdist worker
        writing into its controller's bundle). Raises ValueError for a folder name that is not a
        bundle's."""
        folder = Path(path)
        match = SESSION_DIR_PATTERN.match(folder.name)
        if match is None:
            raise ValueError(f"{folder}: not a session bundle folder (expected <YYYYmmdd-HHMMSS>_<8 hex>)")
        bundle = cls.__new__(cls)
        bundle.session_id = match.group(2)
        started = _dt.datetime.strptime(match.group(1), "%Y%m%d-%H%M%S")
        bundle.started = started.replace(tzinfo=_dt.timezone.utc)
        bundle._path = folder
        (folder / ITEMS_DIR).mkdir(parents=True, exist_ok=True)
        bundle._meta = {}
        bundle._items = {}
        return bundle

    @property
    def path(self) -> Path:
        """The bundle folder."""
        return self._path

    def _base_meta(self) -> JSONDict:
        return {
            "schema_version": SCHEMA_VERSION,
            "session_id": self.session_id,
            "bundle_started_at": self.started.isoformat(timespec="seconds"),
        }

    def write_meta(self, meta: JSONDict) -> Path:
        """Write ``session_meta.json``: *meta* plus ``schema_version``, ``session_id``, ``bundle_started_at``."""
        self._meta = {**self._base_meta(), **meta}
        return atomic_write_json(self._path / META_FILE, self._meta)

    def write_environment(self, env: JSONDict) -> Path:
        """Write ``environment.json`` (the lockbox from :func:`pytest_aaco.measure.environment.collect_environment`)."""
        return atomic_write_json(self._path / ENVIRONMENT_FILE, env)

    def write_item(self, nodeid: str, payload: JSONDict) -> Path:
        """Write ``items/<safe_file_stem(nodeid)>.json`` now, atomically; returns its path.

        The file holds ``{"nodeid": nodeid, **payload}``. Writing the same node id again (a
        confirmation run) replaces the file.
        """
        target = self._path / ITEMS_DIR / f"{safe_file_stem(nodeid)}.json"
        atomic_write_json(target, {**payload, "nodeid": nodeid})
        self._items[nodeid] = target
        return target

    def finish(self, summary: JSONDict | None = None) -> Path:
        """Rewrite ``session_meta.json`` with the end time, duration and *summary*.

        *summary* is stored under ``"summary"``. If it is instead a whole meta dict (it has its
        own ``"summary"`` key), its keys are merged at the top level. Adds ``bundle_finished_at``,
        ``duration_s`` and ``items_written`` (item files in the folder, written by this process or
        by pytest-xdist workers).
        """
        finished = _utc_now()
        meta = {**self._base_meta(), **self._meta}
        summary = summary or {}
        if "summary" in summary:
            meta.update(summary)
        else:
            meta["summary"] = summary
        meta.update(
            bundle_finished_at=finished.isoformat(timespec="seconds"),
            duration_s=round((finished - self.started).total_seconds(), 3),
            items_written=sum(1 for p in (self._path / ITEMS_DIR).glob("*.json") if not p.name.startswith(".")),
        )
        self._meta = meta
        return atomic_write_json(self._path / META_FILE, meta)


def is_bundle(path: Path) -> bool:
    """A session bundle folder has a ``session_meta.json``."""
    return path.is_dir() and (path / META_FILE).is_file()


#: how far (s) a bundle's name may be ahead of this machine's clock before it counts as future-dated
FUTURE_TOLERANCE_S = 300


def session_started(path: Path) -> _dt.datetime | None:
    """The UTC start time in a bundle folder's name (``20250101-120000_...``), None for another name."""
    match = SESSION_DIR_PATTERN.match(path.name)
    if not match:
        return None
    try:
        return _dt.datetime.strptime(match.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None


def is_future_dated(path: Path, now: _dt.datetime | None = None) -> bool:
    """True when the start time in *path*'s name is more than :data:`FUTURE_TOLERANCE_S` ahead of
    *now* (this machine's clock): the machine that wrote it had its clock ahead."""
    started = session_started(path)
    now = now or _utc_now()
    return started is not None and started > now + _dt.timedelta(seconds=FUTURE_TOLERANCE_S)


def list_sessions(root: str | Path, now: _dt.datetime | None = None) -> list[Path]:
    """Bundle folders under *root*, newest first (by the UTC timestamp in the name, then by the
    modification time of ``session_meta.json``). A future-dated bundle (:func:`is_future_dated`:
    written while the clock was ahead) comes after all the others, so it does not stay the newest
    for good; once the clock passes its time it takes its place. ``[]`` when *root* does not exist."""
    base = Path(root)
    if not base.is_dir():
        return []
    found = []
    for child in base.iterdir():
        match = SESSION_DIR_PATTERN.match(child.name)
        if match and child.is_dir():
            meta = child / META_FILE
            try:
                mtime = meta.lstat().st_mtime_ns
            except OSError:
                mtime = 0
            found.append((not is_future_dated(child, now), match.group(1), mtime, child))
    found.sort(key=lambda entry: entry[:3], reverse=True)
    return [entry[3] for entry in found]


def incomplete_reason(path: Path) -> str | None:
    """Why the bundle folder *path* cannot be reported (its ``session_meta.json`` missing, empty
    after a full disk, not JSON, not a regular file), None when it can. Never blocks on a FIFO."""
    try:
        meta = read_json(path / META_FILE)
    except AacoFileError as exc:
        text = str(exc)
        if (path / META_FILE).is_file() and (path / META_FILE).stat().st_size == 0:
            return f"{META_FILE} is empty (a full disk or a killed session?)"
        return text.removeprefix(f"{path / META_FILE}: ")
    except (OSError, UnicodeDecodeError) as exc:
        return f"{META_FILE} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return None if isinstance(meta, dict) else f"{META_FILE} is not a JSON object"


def latest_session(root: str | Path, now: _dt.datetime | None = None) -> tuple[Path | None, list[str]]:
    """The newest bundle under *root* that can be reported (:func:`list_sessions` order), and one
    note for each newer one skipped: incomplete (:func:`incomplete_reason`), or future-dated
    (placed after the others, named so the user can remove it or fix the clock)."""
    notes: list[str] = []
    sessions = list_sessions(root, now)
    for path in sessions:
        if is_future_dated(path, now):
            continue  # listed last; named below when one was passed over
        reason = incomplete_reason(path)
        if reason is None:
            notes += [f"{p} is dated ahead of this machine's clock (clock skew?), so it is not taken as the latest"
                      for p in sessions if is_future_dated(p, now)]
            return path, notes
        notes.append(f"{path} skipped: incomplete bundle: {reason}")
    for path in sessions:  # only future-dated ones are left
        if is_future_dated(path, now) and incomplete_reason(path) is None:
            notes.append(f"{path} is dated ahead of this machine's clock (clock skew?); it is the only complete"
                         " bundle")
            return path, notes
    return None, notes


class LoadedSession(TypedDict):
    """A bundle folder read back (:func:`load_session`): the folder, ``session_meta.json``, the
    environment record (None when absent or unreadable), the item files by node id, and a message per
    file that could not be read."""

    path: str
    meta: JSONDict
    environment: JSONDict | None
    items: dict[str, object]
    errors: dict[str, str]


def records_of(session: LoadedSession) -> list[ItemRecord]:
    """The item records of a bundle read back, in file order (each with its node id; an item file that is
    not a JSON object reads as an empty record of that node id)."""
    return [ItemRecord.from_dict({**(data if isinstance(data, dict) else {}), "nodeid": nodeid})
            for nodeid, data in session["items"].items()]


def missing_data(session: LoadedSession) -> list[str]:
    """What a bundle read back lacks, one sentence per problem, each naming the file: an item file
    that could not be read (truncated in a downloaded artifact, not JSON), item files that the
    finished session wrote (``items_written``) but the folder no longer holds, and a session that
    never finished (killed, or still running: its items may be missing). Empty when the bundle is
    whole. A report built from a bundle with missing data must not pass (``aaco report`` exits 2);
    an unreadable ``environment.json`` is not counted (no verdict is lost, only the runner's name)."""
    folder = Path(session["path"])
    found = []
    for name, problem in session["errors"].items():
        if name == ENVIRONMENT_FILE:
            continue
        where = folder / ITEMS_DIR / name
        problem = problem if problem.startswith(str(where)) else f"{where}: {problem}"
        # a bundle is an artifact, not a tracked file: the fix is a fresh copy, not git
        found.append(problem.replace("; delete it or restore it from git, then re-run",
                                     "; copy the bundle again (a downloaded artifact may be cut short)"))
    meta = session["meta"]
    written = meta.get("items_written")
    present = len(session["items"]) + len(found)
    if isinstance(written, (int, float)) and not isinstance(written, bool) and present < written:
        found.append(f"{folder / ITEMS_DIR}: {int(written) - present} item file(s) missing (the session wrote"
                     f" {int(written)}, the folder holds {present})")
    if not meta.get("bundle_finished_at"):
        found.append(f"{folder / META_FILE}: the session never finished (killed, or still running), so items may"
                     " be missing")
    return found


def load_session(path: str | Path) -> LoadedSession:
    """Read a bundle folder back.

    Returns ``{"path": str, "meta": dict, "environment": dict | None, "items": {nodeid: payload},
    "errors": {file name: message}}``. An item file that cannot be read is listed in ``errors``
    and skipped; leftover temporary files (``.*.tmp``) are ignored. Raises
    :class:`~pytest_aaco.jsonio.AacoFileError` when *path* has no readable ``session_meta.json``.
    """
    folder = Path(path)
    found = read_json(folder / META_FILE)
    meta: JSONDict = found if isinstance(found, dict) else {}
    environment = None
    errors: dict[str, str] = {}
    if (folder / ENVIRONMENT_FILE).exists():
        try:
            read = read_json(folder / ENVIRONMENT_FILE)
            environment = read if isinstance(read, dict) else None
        except AacoFileError as exc:
            errors[ENVIRONMENT_FILE] = str(exc)
    items: dict[str, object] = {}
    for item_file in sorted((folder / ITEMS_DIR).glob("*.json")):
        if item_file.name.startswith("."):
            continue
        try:
            payload = read_json(item_file)
        except AacoFileError as exc:
            errors[item_file.name] = str(exc)
            continue
        nodeid = payload.get("nodeid", item_file.stem) if isinstance(payload, dict) else item_file.stem
        items[str(nodeid)] = payload
    return {"path": str(folder), "meta": meta, "environment": environment, "items": items, "errors": errors}
