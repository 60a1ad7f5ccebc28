"""Requirements read from pyproject.toml, for CI to install (one a line on stdout).

    python .ci/requirements.py extra NAME          the requirements of extra NAME, as declared
    python .ci/requirements.py floors [EXTRA ...]  NAME==FLOOR for every dependency and every dependency
                                                   of each EXTRA whose marker holds on this interpreter

A floor is the version of the requirement's ``>=`` (or ``~=``, ``==``) specifier: what the package
declares it works with at the lowest. A dependency without one has no floor to test: that is an error
naming it (exit 2), so that a new dependency cannot slip past the floors job. Needs ``packaging`` and,
before Python 3.11, ``tomli`` (the floors job installs both first).
"""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
USAGE = __doc__.split("\n\n")[1]


class NoFloor(ValueError):
    """A requirement declares no lowest version."""


def project(path: Path = PYPROJECT) -> dict:
    """The ``[project]`` table of *path*."""
    with open(path, "rb") as handle:
        return tomllib.load(handle)["project"]


def extra(table: dict, name: str) -> list[str]:
    """The requirements of extra *name*, as declared. Raises KeyError naming the extras there are."""
    extras = table.get("optional-dependencies", {})
    if name not in extras:
        raise KeyError(f"no extra {name!r} in pyproject.toml (there are: {', '.join(sorted(extras))})")
    return list(extras[name])


def floor(text: str) -> str:
    """``name==version`` for requirement *text*, its lowest declared version. Raises :class:`NoFloor`."""
    requirement = Requirement(text)
    for spec in requirement.specifier:
        if spec.operator in (">=", "~=", "==", "==="):
            return f"{requirement.name}=={spec.version}"
    raise NoFloor(f"{text!r} declares no lowest version (>=): give it one in pyproject.toml")


def floors(table: dict, extras: list[str]) -> list[str]:
    """The floor of every dependency and of each of *extras*' requirements whose marker holds here,
    each package once (the first declaration wins: the same floor is declared everywhere)."""
    pins: dict[str, str] = {}
    for text in [*table.get("dependencies", []), *(r for name in extras for r in extra(table, name))]:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pins.setdefault(requirement.name.lower(), floor(text))
    return list(pins.values())


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 2 and argv[0] == "extra":
            lines = extra(project(), argv[1])
        elif argv and argv[0] == "floors":
            lines = floors(project(), argv[1:])
        else:
            print(USAGE, file=sys.stderr)
            return 2
    except (KeyError, NoFloor) as exc:
        print(f"requirements.py: {exc.args[0]}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
