"""What every ``aaco`` subcommand shares: the usage error, the exit statuses, the argument
converters, the project root as pytest finds it, and opening a session bundle."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import iniconfig

from pytest_aaco.options import cores, default, fraction_below, fraction_or_zero, int_at_least, option, path_text
from pytest_aaco.reports.bundle import LoadedSession, is_bundle, load_session
from pytest_aaco.reports.markup import terminal_line

_T = TypeVar("_T")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest depends on tomli below Python 3.11
    import tomli as tomllib

#: exit statuses of the ``aaco`` command (docs/exit-codes.md is their one table; tests/test_exit_codes.py
#: checks it against :data:`EXIT_CODES`)
OK = 0
#: ``report`` / ``diff``: a regression was found; ``bisect``: no first bad commit could be named
REGRESSION_FOUND = 1
#: a usage or input error: the message names the file or option
USAGE_ERROR = 2
#: ``report``: a bundle lacks data (an item file truncated or missing, a session that never finished);
#: the same status as an input error, so a CI step that checks for non-zero fails
INCOMPLETE_BUNDLE = USAGE_ERROR
#: every status with what it means, the source of docs/exit-codes.md's table
EXIT_CODES: dict[int, str] = {
    OK: "done: nothing regressed (`report`, `diff`), the first bad commit named (`bisect`), or the "
        "command did what was asked",
    REGRESSION_FOUND: "a regression was found (a latency, p99, memory or cold-start regression in `diff` or "
                      "in a bundle given to `report`); `bisect` could name no first bad commit",
    USAGE_ERROR: "a usage or input error (the message names the file or option): a bad option, a missing or "
                 "unreadable file, a damaged or partial bundle given to `report`, no common items or items of "
                 "different models, inputs or providers in `diff`, or an internal error",
}
DEFAULT_SESSION_DIR = Path(default("session-dir"))
DEFAULT_BASELINE_DIR = Path(default("baseline-dir"))
#: pytest's configuration files, in the order pytest looks for them in each folder
#: (``_pytest/config/findpaths.py``, pytest 8 and 9)
CONFIG_FILES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


class CliError(Exception):
    """A usage or input problem: printed as ``aaco: error: <message>``, exit status 2."""


# ---------------------------------------------------------------- small helpers


def _out(line: str = "") -> None:
    print(terminal_line(line), flush=False)  # a bundle's or registry's text may hold control characters


def _err(line: str) -> None:
    print(terminal_line(line), file=sys.stderr)


def _argument(parse: Callable[..., _T], *args: object) -> Callable[[str], _T]:
    """An argparse ``type=`` from a value parser of :mod:`pytest_aaco.options` (ValueError -> usage error)."""
    def convert(text: str) -> _T:
        try:
            return parse(text, *args)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_positive_int = _argument(int_at_least, 1)
_fraction = _argument(fraction_below)
_fraction_or_zero = _argument(fraction_or_zero)
#: path arguments: an empty or blank value (an unset CI variable) is a usage error naming the
#: argument, never the current folder
_folder_arg = _argument(path_text, "a folder")
_bundle = _argument(path_text, "a session bundle folder (aaco ls lists them)")
_side = _argument(path_text, "a bundle folder, a baseline file or a folder of baseline files")
_out_file = _argument(path_text, "a file such as perf.html")


def _where(path: Path) -> str:
    """*path* as given, and for a relative one what it was resolved against (the current folder)."""
    return str(path) if path.is_absolute() else f"{path} (relative to the current folder {Path.cwd()})"


def check_folder(path: Path, option: str) -> Path:
    """*path* when it is a folder this user can list; else :class:`CliError` naming *option*, the
    path (and the folder a relative one was resolved against) and what it is instead."""
    if not path.exists():
        broken = " (a broken symlink)" if path.is_symlink() else ""
        raise CliError(f"{option}: {_where(path)}: no such folder{broken}")
    if not path.is_dir():
        raise CliError(f"{option}: {_where(path)}: not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CliError(f"{option}: {_where(path)}: cannot be read (permission denied)")
    return path


_cores = _argument(cores)


# ---------------------------------------------------------------- the project root, as pytest finds it


@dataclass(frozen=True)
class Project:
    """Where pytest would put the rootdir when run from here, and its ini settings: *rootdir* (a
    folder), *inifile* (None when there is none) and *ini* (the pytest section: name -> value)."""

    rootdir: Path
    inifile: Path | None
    ini: dict[str, object]

    def folder(self, name: str) -> Path:
        """The folder of option *name* (``baseline-dir``, ``session-dir``) as the plugin resolves it
        run from the rootdir: its ini twin (``aaco_baseline_dir``) else the default, relative to the rootdir."""
        value = self.ini.get(option(name).dest)
        text = str(value).strip() if isinstance(value, str) and value.strip() else default(name)
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.rootdir / path

    def where(self) -> str:
        return f"project root {self.rootdir}" + (f", from {self.inifile.name}" if self.inifile else "")


def _pytest_section(path: Path) -> dict[str, object] | None:
    """The pytest settings in configuration file *path*, None when it holds none (a ``pyproject.toml``
    without ``[tool.pytest]``, a ``tox.ini`` without ``[pytest]``, a ``setup.cfg`` without
    ``[tool:pytest]``); ``pytest.ini`` and ``pytest.toml`` always count. Raises CliError naming the
    file when it cannot be parsed."""
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            if path.name != "pyproject.toml":
                return dict(data.get("pytest") or {})
            tool = (data.get("tool") or {}).get("pytest")
            if not isinstance(tool, dict):
                return None
            native = {k: v for k, v in tool.items() if k != "ini_options"}
            return native or dict(tool.get("ini_options") or {})
        config = iniconfig.IniConfig(str(path))
    except (OSError, UnicodeDecodeError, ValueError, iniconfig.ParseError) as exc:
        raise CliError(f"{path}: cannot read it as pytest does ({exc}); fix the file or run aaco elsewhere") from None
    section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    if section in config:
        return dict(config[section].items())
    return {} if path.name in ("pytest.ini", ".pytest.ini") else None


def find_project(start: Path) -> Project:
    """The rootdir and ini file pytest would find when run from *start* with no arguments.

    Mirrors pytest's rootdir discovery (https://docs.pytest.org/en/stable/reference/customize.html,
    ``_pytest/config/findpaths.py``; not imported, it is private and its signature changed in
    pytest 9): from *start* up, the first folder with a configuration file of :data:`CONFIG_FILES`
    that holds pytest settings; else the first ``pyproject.toml`` seen; else the first folder with a
    ``setup.py``; else *start*. Raises CliError for a configuration file that cannot be parsed.
    """
    start = start.resolve()
    first_pyproject: Path | None = None
    for base in (start, *start.parents):
        for name in CONFIG_FILES:
            path = base / name
            if not path.is_file():
                continue
            if name == "pyproject.toml" and first_pyproject is None:
                first_pyproject = path
            section = _pytest_section(path)
            if section is not None:
                return Project(base, path, section)
    if first_pyproject is not None:
        return Project(first_pyproject.parent, first_pyproject, {})
    for base in (start, *start.parents):
        if (base / "setup.py").is_file():
            return Project(base, None, {})
    return Project(start, None, {})


def _folder(given: str | None, name: str, flag: str) -> tuple[Path, str]:
    """The folder of option *name*: *given* on the command line (relative to the current folder),
    else the project's (:meth:`Project.folder`); with a note for messages (``(--baseline-dir)``)."""
    if given:
        return Path(given), f"({flag})"
    project = find_project(Path.cwd())
    return project.folder(name), f"({flag}; {project.where()})"


def load_bundle(path: Path) -> LoadedSession:
    """:func:`pytest_aaco.reports.bundle.load_session`, with a missing or wrong folder as :class:`CliError`."""
    if not path.exists():
        raise CliError(f"{_where(path)}: no such file or folder")
    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
        raise CliError(f"{_where(path)}: cannot be read (permission denied)")
    if not is_bundle(path):
        raise CliError(f"{path}: not a session bundle (no session_meta.json); list bundles with `aaco ls`")
    return load_session(path)


