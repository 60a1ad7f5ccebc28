"""Conformance against the real onnxruntime-migraphx wheels: every MIGraphX option set the plugin produces
must pass each wheel's own option parser.

For onnxruntime-migraphx 1.23.2 and the newest release on the package registry, the wheel is downloaded
(kept in ``~/.cache/pytest-aaco/wheels``), its ``libonnxruntime_providers_migraphx.so`` is loaded over
stand-in HIP and MIGraphX libraries built with gcc from its own undefined symbols
(tests/migraphx_wheels.py), and sessions are built through the plugin's code path
(``build_session``, ``choose_graph``/``with_graph``, ``set_compile_cache``) in a child process that
imports the wheel's onnxruntime and this checkout's pytest_aaco (tests/migraphx_child.py). Passing: no
option refused by the real parser, ``--aaco-graph=on`` refused with the reason before any session, and a
user option the EP refuses reported naming the key, the build and the keys it takes. Skips with the
reason when the download, gcc/nm/readelf, or this machine's C library is missing. studies/migraphx_conformance.py
runs the same over every release and prints the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import migraphx_wheels as mw

OLDEST_CHECKED = "1.23.2"


def newest_release() -> str:
    """The newest onnxruntime-migraphx on the registry; the newest known when the registry cannot be asked
    (then its download skips the test the same way)."""
    try:
        return mw.released_versions(timeout=30)[-1]
    except mw.WheelUnavailable:
        return mw.KNOWN_RELEASES[-1]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("migraphx-wheels")


@pytest.fixture(scope="module", params=[OLDEST_CHECKED, "newest"])
def rows(request: pytest.FixtureRequest, work: Path) -> dict[str, mw.Row]:
    version = newest_release() if request.param == "newest" else request.param
    try:
        found = mw.conformance(version, work, mw.PLUGIN_OPTION_SETS + (mw.REFUSED_USER_SET,))
    except mw.WheelUnavailable as exc:
        pytest.skip(str(exc))
    return {row.option_set: row for row in found}


def test_the_harness_reaches_the_real_parser(rows: dict[str, mw.Row]) -> None:
    invented, known = rows["self-check: invented key"], rows["self-check: known key"]
    assert (invented.state, invented.words) == ("refused", 'Unknown provider option: "aaco_invented_key"')
    assert known.state == "accepted" and "stand-in" in known.words


@pytest.mark.parametrize("option_set", [name for name, _ in mw.PLUGIN_OPTION_SETS if name != "--aaco-graph=on"])
def test_no_option_the_plugin_produces_is_refused(rows: dict[str, mw.Row], option_set: str) -> None:
    row = rows[option_set]
    assert row.state == "accepted", f"onnxruntime-migraphx {row.wheel}, {option_set}: {row.state}: {row.words}"


def test_graph_on_is_refused_with_a_reason_not_a_parse_error(rows: dict[str, mw.Row]) -> None:
    row = rows["--aaco-graph=on"]
    assert row.state == "refused with a reason", row
    assert f"onnxruntime-migraphx {row.wheel}) has no graph replay option" in row.words
    assert "refuses migraphx_hip_graph_enable" in row.words and "use --aaco-graph=off" in row.words


def test_a_refused_user_option_names_the_key_the_build_and_what_it_takes(rows: dict[str, mw.Row]) -> None:
    row = rows[mw.REFUSED_USER_SET[0]]
    assert row.state == "refused"
    assert f"(onnxruntime-migraphx {row.wheel}) refuses option(s) migraphx_save_compiled_model" in row.words
    assert "--aaco-compile-cache" in row.words and "it takes: device_id" in row.words
