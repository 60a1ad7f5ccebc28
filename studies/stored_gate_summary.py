"""Summarize a stored-baseline device-time series of studies/gpu_device_time_stored.sh (reads WORK/items.jsonl):
``python studies/stored_gate_summary.py WORK``.

Per number of saved runs and per variant class (``aa``: unchanged; otherwise slowed): gated items,
false failures, the share of unchanged items decided ``no regression``, the share of slowed items
caught, the median device-time change, the device-time MDE (median and range), the median wall-time
MDE, how often the pooled variance decided and, with several GPUs, each GPU's fitted offset.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2%}"


def rows(lines: list[dict[str, Any]]) -> list[str]:
    """The summary lines of *lines* (one dict per gated item)."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        groups[(int(line.get("saves") or 0), "aa" if line["variant"] == "aa" else "slowed")].append(line)
    out = [f"{'saves':>5} {'variant':>7} {'items':>5} | {'false fail':>10} {'no-regr':>8} {'caught':>7} |"
           f" {'device chg med':>14} | {'device MDE med (range)':>26} | {'wall MDE med':>12} | {'pooled':>6} |"
           " variants"]
    for (saves, kind), items in sorted(groups.items()):
        n = len(items)
        failed = sum(1 for i in items if i.get("failed"))
        dev = [i for i in items if i.get("device_ratio") is not None]
        mdes = sorted(float(i["device_mde"]) for i in dev if i.get("device_mde") is not None)
        change = statistics.median(float(i["device_ratio"]) - 1 for i in dev) if dev else None
        pooled = sum(1 for i in dev if i.get("device_method") == "pooled-prediction-interval")
        mde_text = (f"{statistics.median(mdes):.2%} ({mdes[0]:.2%}-{mdes[-1]:.2%})" if mdes else "-")
        walls = [float(i["wall_mde"]) for i in items if i.get("wall_mde") is not None]
        wall_text = f"{statistics.median(walls):.2%}" if walls else "-"
        if kind == "aa":
            decided = sum(1 for i in items if i.get("outcome") == "no-regression")
            cells = f"{failed:>10} {decided / n:>8.0%} {'-':>7}"
        else:
            caught = sum(1 for i in items if i.get("failed") and i.get("outcome") == "regression")
            cells = f"{'-':>10} {'-':>8} {caught:>3}/{n:<3}"
        variants = ",".join(sorted({str(i["variant"]) for i in items}))
        out.append(f"{saves:>5} {kind:>7} {n:>5} | {cells} | {_pct(change):>14} | {mde_text:>26} | {wall_text:>12} |"
                   f" {pooled:>3}/{len(dev):<2} | {variants}")
    offsets: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        if line.get("gpu") and line.get("gpu_offset") is not None:
            offsets[str(line["gpu"])].append(float(line["gpu_offset"]))
    gpus = {str(line.get("gpu")) for line in lines if line.get("gpu")}
    if len(gpus) > 1:
        out.append(f"items ran on {len(gpus)} GPUs: " + ", ".join(
            f"{g[:16]} {sum(1 for i in lines if i.get('gpu') == g)} items" for g in sorted(gpus)))
        for gpu, values in sorted(offsets.items()):
            out.append(f"  fitted device-time offset of {gpu[:16]}: median {statistics.median(values):+.3%}"
                       f" over {len(values)} verdicts")
    failures = [i for i in lines if i["variant"] == "aa" and i.get("failed")]
    for i in failures:
        out.append(f"  FALSE FAILURE step {i['step']} {i['model']}: {str(i.get('message'))[:300]}")
    return out


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python studies/stored_gate_summary.py WORK")
    path = Path(sys.argv[1]) / "items.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: no such file; run studies/gpu_device_time_stored.sh with WORK={sys.argv[1]} first")
    lines = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
    print("\n".join(rows([line for line in lines if line.get("step_kind") == "gate"])))


if __name__ == "__main__":
    main()
