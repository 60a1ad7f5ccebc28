"""Summary of the runs of ``studies/multi_gpu.sh`` (issue 23): wall time, which GPU each item ran
on, whether measured phases on one GPU overlapped, each item's mean against the first run, and the
GPU utilisation nvidia-smi logged during each run.

    python studies/multi_gpu_summary.py RUN_FOLDER [RUN_FOLDER ...]

Each RUN_FOLDER holds ``wall_s``, ``rc``, the session bundle ``sessions/<bundle>/`` and, on NVIDIA,
``smi.csv``. Phase bounds are the telemetry's ``start_ns``/``end_ns`` (``time.perf_counter_ns``, one
clock for every process of the host), so two pytest-xdist workers' phases compare.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any


def items(run: Path) -> list[dict[str, Any]]:
    """The item records of the run's (only) session bundle, in nodeid order; [] when there is none."""
    bundles = sorted(p for p in (run / "sessions").glob("*") if p.is_dir())
    if not bundles:
        return []
    return sorted((json.loads(p.read_text()) for p in (bundles[-1] / "items").glob("*.json")),
                  key=lambda r: r.get("nodeid", ""))


def gpu_of(record: dict[str, Any]) -> str:
    """``<logical id>:<UUID or PCI bus id>`` of the item's GPU, ``host`` on the CPU, ``unknown`` on a GPU
    EP whose GPU was not recorded (no nvidia-ml-py / amdsmi importable)."""
    gpu = record.get("gpu") or {}
    key = gpu.get("uuid") or gpu.get("pci_bus_id") or (f"index{gpu['index']}" if gpu.get("index") is not None else None)
    if key:
        return f"{gpu.get('logical_id')}:{key}"
    return "host" if record.get("provider") in ("cpu", "openvino") else "unknown"


def phase(record: dict[str, Any]) -> tuple[int, int] | None:
    """The measured rounds' ``(start_ns, end_ns)``, or None when the bundle has no telemetry bounds."""
    telemetry = (record.get("result") or {}).get("telemetry") or {}
    start, end = telemetry.get("start_ns"), telemetry.get("end_ns")
    return (int(start), int(end)) if isinstance(start, int) and isinstance(end, int) else None


def overlaps(records: list[dict[str, Any]]) -> int:
    """Pairs of items on one device (same physical GPU key, or both on the host) whose measured phases overlap."""
    by_device: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for record in records:
        bounds = phase(record)
        if bounds is not None:
            by_device[gpu_of(record).split(":", 1)[-1]].append(bounds)
    count = 0
    for spans in by_device.values():
        spans.sort()
        count += sum(1 for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1])
    return count


def smi_usage(run: Path) -> dict[str, tuple[float, int, int]]:
    """Per GPU index: (mean utilisation %, seconds at >= 10%, seconds logged) from ``smi.csv``."""
    path = run / "smi.csv"
    usage: dict[str, list[float]] = defaultdict(list)
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                try:
                    usage[parts[0]].append(float(parts[1].rstrip("%").strip()))
                except ValueError:
                    continue
    return {k: (sum(v) / len(v), sum(1 for x in v if x >= 10), len(v)) for k, v in sorted(usage.items())}


def read(run: Path, name: str) -> str:
    return (run / name).read_text().strip() if (run / name).is_file() else "?"


def main(runs: list[Path]) -> int:
    first: dict[str, float] = {}
    walls = []
    for n, run in enumerate(runs):
        records = items(run)
        wall = read(run, "wall_s")
        walls.append(float(wall) if wall.replace(".", "", 1).isdigit() else None)
        print(f"== {run.name}: rc={read(run, 'rc')} wall {wall} s, {len(records)} items,"
              f" overlapping measured phases on one device: {overlaps(records)}")
        print(f"   {'model':<14} {'provider':<9} {'gpu (id:uuid or bus id)':<32} {'mean ms':>9} {'vs first run':>13}"
              f"  verdict")
        for record in records:
            mean = ((record.get("result") or {}).get("summary") or {}).get("mean_ms")
            label = str(record.get("label") or record.get("nodeid"))
            change = "-"
            if isinstance(mean, (int, float)):
                if n == 0:
                    first[label] = float(mean)
                elif label in first and first[label] > 0:
                    change = f"{(mean / first[label] - 1) * 100:+.1f}%"
            verdict = (record.get("verdict") or {}).get("outcome", record.get("outcome"))
            mean_text = f"{mean:.3f}" if isinstance(mean, (int, float)) else "-"
            print(f"   {record.get('model', '-'):<14} {record.get('provider', '-'):<9} {gpu_of(record):<32}"
                  f" {mean_text:>9} {change:>13}  {verdict}")
        outcomes = Counter(str((r.get("verdict") or {}).get("outcome", r.get("outcome"))) for r in records)
        failed = sum(1 for r in records if r.get("outcome") == "failed")
        print(f"   verdicts: {dict(sorted(outcomes.items()))}; items failed: {failed};"
              f" GPUs used: {len({gpu_of(r) for r in records})}")
        for index, (mean_util, busy, seconds) in smi_usage(run).items():
            print(f"   nvidia-smi GPU {index}: mean utilisation {mean_util:.0f}%, busy (>=10%) {busy} of {seconds} s")
    if len(walls) > 1 and walls[0] and walls[-1]:
        print(f"wall time, last run / first run: {walls[-1] / walls[0]:.2f} (0.5 would be twice as fast)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main([Path(p) for p in sys.argv[1:]]))
