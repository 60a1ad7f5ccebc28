"""What device time costs: per item, the share of its measuring time spent in traced blocks (at most 15%).
``python studies/device_time_overhead.py BUNDLE``: a session bundle folder or the folder of bundles (the newest).

Per item of ``items/*.json``: stored baselines, ``result.device_time`` (``traced_s`` over
``measure_s``, the whole measuring phase) plus the reference workload's and the confirmation's
``traced_s``; side by side, ``verdict.side_by_side.device_time.traced_s`` over its ``duration_s``.
Prints one line per item (``label: traced 1.23 s of 9.87 s measuring = 12.5%``, with the rounds or
side-cycles left untraced), then the largest share and how many items are over the target. Exit
status 0; 2 when the folder holds no bundle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TARGET = 0.15


def _stored(result: dict[str, Any]) -> tuple[float, float]:
    """(traced s, measuring s) of one stored measurement and its confirmation look."""
    traced = measure = 0.0
    while isinstance(result, dict):
        dev = result.get("device_time") or {}
        ref = ((result.get("reference") or {}).get("device_time")) or {}
        traced += float(dev.get("traced_s") or 0) + float(ref.get("traced_s") or 0)
        measure += float(dev.get("measure_s") or 0)
        result = result.get("confirmation")  # type: ignore[assignment]
    return traced, measure


def overhead(record: dict[str, Any]) -> tuple[float, float] | None:
    """(traced s, measuring s) of one item record, or None when it was not traced."""
    sbs = (record.get("verdict") or {}).get("side_by_side") or {}
    dev = sbs.get("device_time") or {}
    if dev.get("traced_s") is not None and sbs.get("duration_s"):
        return float(dev["traced_s"]), float(sbs["duration_s"])
    traced, measure = _stored(record.get("result") or {})
    return (traced, measure) if measure > 0 else None


def is_sbs(record: dict[str, Any]) -> bool:
    """Whether *record* was measured side by side with device time."""
    return bool(((record.get("verdict") or {}).get("side_by_side") or {}).get("device_time"))


def untraced(record: dict[str, Any]) -> int:
    """Stored rounds the item's trace budget left without a traced block (``device_time.skipped``,
    first measurement and confirmation), or side by side the side-cycles left untraced (the deciding
    measurement's ``verdict.side_by_side.device_time.skipped``); 0 for records written before."""
    sbs = ((record.get("verdict") or {}).get("side_by_side") or {}).get("device_time") or {}
    if sbs:
        return int(sbs.get("skipped") or 0)
    result, skipped = record.get("result") or {}, 0
    while isinstance(result, dict):
        skipped += int((result.get("device_time") or {}).get("skipped") or 0)
        result = result.get("confirmation")  # type: ignore[assignment]
    return skipped


def bundle_folder(path: Path) -> Path | None:
    """*path* when it is a bundle, else its newest bundle child; None without one."""
    if (path / "session_meta.json").is_file() or (path / "items").is_dir():
        return path
    found = sorted((p for p in path.glob("*/session_meta.json")), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    folder = bundle_folder(Path(argv[0]))
    if folder is None:
        print(f"{argv[0]}: no session bundle there (run pytest without --aaco-no-bundle)")
        return 2
    shares = []
    for item in sorted((folder / "items").glob("*.json")):
        record = json.loads(item.read_text())
        label = record.get("label") or record.get("nodeid") or item.stem
        found = overhead(record)
        if found is None:
            print(f"{label}: not traced")
            continue
        traced, measure = found
        share = traced / measure
        shares.append(share)
        skipped = untraced(record)
        what = "side-cycles untraced: every other cycle" if is_sbs(record) else "rounds untraced by the budget"
        print(f"{label}: traced {traced:.2f} s of {measure:.2f} s measuring = {share:.1%}"
              + (f" ({skipped} {what})" if skipped else "")
              + ("  OVER the 15% target" if share > TARGET else ""))
    if shares:
        print(f"largest share {max(shares):.1%}; {sum(s > TARGET for s in shares)} of {len(shares)} traced items"
              f" over {TARGET:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
