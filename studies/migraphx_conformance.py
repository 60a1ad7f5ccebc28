"""Every onnxruntime-migraphx release from 1.23.0 against the plugin's MIGraphX option sets.

For each release on the package registry (``pip index versions onnxruntime-migraphx``), downloads the wheel
for this Python (kept in ``~/.cache/pytest-aaco/wheels``), loads its own MIGraphX provider library over
stand-in HIP/MIGraphX libraries built from its undefined symbols (tests/migraphx_wheels.py), and prints
the table wheel x option set -> accepted / refused, with the parser's words. Then the raw key and boolean
spellings each parser takes (``--keys``). No GPU is needed; gcc, nm, readelf and objdump are.

    python studies/migraphx_conformance.py [--keys] [--work DIR] [VERSION ...]

A wheel whose libraries need a newer glibc than this machine's is listed as such (run the study on a
newer distribution for it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import migraphx_wheels as mw  # noqa: E402

#: keys and spellings asked of each parser directly (raw sessions, outside the plugin) with --keys
RAW_KEYS = {
    "device_id": "0", "migraphx_fp16_enable": "1", "migraphx_bf16_enable": "1", "migraphx_fp8_enable": "1",
    "migraphx_int8_enable": "1", "migraphx_int8_calibration_table_name": "calib.flatbuffers",
    "migraphx_int8_use_native_calibration_table": "1", "migraphx_use_native_calibration_table": "1",
    "migraphx_exhaustive_tune": "0", "migraphx_mem_limit": "1073741824",
    "migraphx_arena_extend_strategy": "kSameAsRequested", "migraphx_model_cache_dir": "/tmp/aaco-study-cache",
    "migraphx_save_compiled_model": "0", "migraphx_save_model_path": "/tmp/m.mxr",
    "migraphx_load_compiled_model": "0", "migraphx_load_model_path": "/tmp/m.mxr",
    "migraphx_hip_graph_enable": "1", "migraphx_external_alloc": "0", "migraphx_external_free": "0",
    "migraphx_external_empty_cache": "0", "migraphx_max_dynamic_batch": "1", "migraphx_max_compiled_models": "1",
}
BOOL_SPELLINGS = ("True", "False", "true", "false", "1", "0", "yes", "TRUE", "on")


def raw_rows(version: str, work: Path) -> list[mw.Row]:
    """Each of :data:`RAW_KEYS` alone, then each of :data:`BOOL_SPELLINGS` for ``migraphx_fp16_enable``."""
    site, standins = mw.prepare(version, work)
    model = mw.tiny_model(work / "study-tiny.onnx")
    attempts = [{"options": {k: v}} for k, v in RAW_KEYS.items()]
    attempts += [{"options": {"migraphx_fp16_enable": b}} for b in BOOL_SPELLINGS]
    out = mw.run_child(Path(mw.__file__).with_name("migraphx_child.py"), site, standins,
                       {"mode": "raw", "model": str(model), "attempts": attempts})
    assert isinstance(out, dict)
    rows = []
    for result in out["results"]:
        (key, value), = result["options"].items()
        state, words = mw.classify(result["on_ep"], result["message"], result["calls"])
        rows.append(mw.Row(version, f"{key}={value}", state, words))
    return rows


def print_table(rows: list[mw.Row], versions: list[str]) -> None:
    sets = list(dict.fromkeys(r.option_set for r in rows))
    cell = {(r.wheel, r.option_set): r for r in rows}
    width = max(len(s) for s in sets) + 2
    print("option set".ljust(width) + " ".join(v.ljust(10) for v in versions))
    for name in sets:
        marks = []
        for version in versions:
            row = cell.get((version, name))
            marks.append({"accepted": "accepted", "refused": "REFUSED", "refused with a reason": "reason",
                          "other": "other"}.get(row.state, row.state)[:10] if row else "-")
        print(name.ljust(width) + " ".join(m.ljust(10) for m in marks))
    print("\nwords (wheels):")
    words: dict[tuple[str, str, str], list[str]] = {}
    for row in rows:
        words.setdefault((row.option_set, row.state, row.words), []).append(row.wheel)
    for (name, state, text), wheels in words.items():
        print(f"  {name}: {state} ({', '.join(wheels)}): {text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="releases to check (default: every release from 1.23.0)")
    parser.add_argument("--keys", action="store_true", help="also ask each parser about each key and spelling")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    versions = args.versions or [v for v in mw.released_versions()
                                 if tuple(int(p) for p in v.split(".")[:2]) >= (1, 23)]
    work = args.work or Path(tempfile.mkdtemp(prefix="aaco-migraphx-study-"))
    rows: list[mw.Row] = []
    keys: list[mw.Row] = []
    ran = []
    for version in versions:
        try:
            rows += mw.conformance(version, work, mw.PLUGIN_OPTION_SETS + (mw.REFUSED_USER_SET,))
            if args.keys:
                keys += raw_rows(version, work)
            ran.append(version)
        except mw.WheelUnavailable as exc:
            print(f"onnxruntime-migraphx {version}: not checked here: {exc}")
    print(f"\nplugin option sets through build_session (onnxruntime-migraphx {', '.join(ran)}):")
    print_table(rows, ran)
    if args.keys:
        print("\neach key and boolean spelling asked of the parser directly:")
        print_table(keys, ran)
    bad = [r for r in rows if r.state == "refused" and r.option_set in dict(mw.PLUGIN_OPTION_SETS)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
