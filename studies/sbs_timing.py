"""Where a side-by-side item's seconds go, from the newest session bundle under a project.

    python studies/sbs_timing.py PROJECT_DIR

Prints one line per item of the newest bundle in ``PROJECT_DIR/.aaco/sessions``: pytest's seconds
for the item (setup, call and teardown) and the cold-start pass's, the seconds of
the deciding measurement and of the first look when a confirmation ran, the looks (cycles at
each, and the seconds from the measurement's start), the session creation and first-run times of
each side (ms), and the device-time figures (per cent and 95% CI, kernels per run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(project: str) -> int:
    sessions = sorted((Path(project) / ".aaco" / "sessions").glob("*/session_meta.json"),
                      key=lambda p: p.stat().st_mtime)
    if not sessions:
        print(f"no session bundle under {project}/.aaco/sessions")
        return 1
    for item_file in sorted((sessions[-1].parent / "items").glob("*.json")):
        item = json.loads(item_file.read_text())
        sbs = ((item.get("verdict") or {}).get("side_by_side")) or item.get("side_by_side") or {}
        if not sbs:
            print(f"{item.get('nodeid')}: no side-by-side record")
            continue
        looks = " ".join(f"{lk['cycles']}@{lk.get('elapsed_s', 0):.1f}s" for lk in sbs.get("looks", []))
        sides = sbs.get("sides", {})
        create = {k: [round(x) for x in v.get("create_ms", [])] for k, v in sides.items()}
        first = {k: [round(x) for x in v.get("first_run_ms", [])] for k, v in sides.items()}
        dev = sbs.get("device_time") or {}
        dev_text = (f"device {100 * (dev['ratio'] - 1):+.2f}% [{100 * (dev['ci_low'] - 1):+.2f}, "
                    f"{100 * (dev['ci_high'] - 1):+.2f}] kernels {dev.get('kernels')} {dev.get('outcome')}"
                    if dev else "no device time")
        cold = item.get("cold_start") or (item.get("verdict") or {}).get("cold_start") or {}
        cold_text = f" cold start {cold['phase_s']:.1f}s" if isinstance(cold.get("phase_s"), (int, float)) else ""
        print(f"{item.get('nodeid')}: item {item.get('duration_s') or 0:.1f}s{cold_text}"
              f" sbs {sbs.get('duration_s', 0):.1f}s cycles {sbs.get('cycles')} looks [{looks}]"
              f" confirmed={sbs.get('confirmed')} create_ms {create} first_run_ms {first} | {dev_text}"
              f" | wall {100 * (sbs['ratio'] - 1):+.2f}% [{100 * (sbs['ci_low'] - 1):+.2f},"
              f" {100 * (sbs['ci_high'] - 1):+.2f}] {sbs.get('outcome')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
