#!/usr/bin/env bash
# Calibrated claims of the stored gate on one NVIDIA GPU (issue 43, "What to build" 3): 2 saved runs of three
# models (densenet121, squeezenet, shufflenet: none of the models the issue measured), then 5 unchanged gates
# (aa) alternating with 5 gates of slowed variants (big: K extra 3x3 convs on a side branch scaled by 1e-30,
# /work/shared/tools/slow_model.py, outputs unchanged; BIG gives K per model, about +5% device time). It runs
# studies/gpu_device_time_stored.sh with these steps, then writes a compact table to $OUT/calibrated_claims.md
# (and prints it): per model, the unchanged gates' failures, `no regression` and `improvement` words, and the
# slowed gates caught with a headline that leads with device time, with the device-time changes' median.
#
#   OUT=/tmp/out SLOW_MODEL=../shared/tools/slow_model.py PYTHONPATH=/tmp/site:$PWD \
#       bash studies/gpu_calibrated_claims.sh
#
# Expected (issue 43): 0 failures among the unchanged gates (memory included), >= 95% `no regression`,
# 0 `improvement`; every slowed gate caught, its headline `REGRESSION <item>: device time ...`.
# Budget: 12 pytest processes of 3 models; MAX_S (default 480) stops before a step would start later, so the
# call ends inside a 10-minute limit (call again to go on: the state stays in $WORK). CPU dry run:
#   PROVIDER=cpu MODELS=squeezenet BIG=2 STEPS="save save aa big" bash studies/gpu_calibrated_claims.sh
set -u
REPO=$(pwd)
export WORK=${WORK:-/tmp/aaco-calibrated}
export MODELS=${MODELS:-"densenet121 squeezenet shufflenet"}
export BIG=${BIG:-"8 2 2"}
export STEPS=${STEPS:-"save save aa big aa big aa big aa big aa big"}
export MAX_S=${MAX_S:-480}
export SLOW_MODEL=${SLOW_MODEL:-/work/shared/tools/slow_model.py}
[ -f "$SLOW_MODEL" ] || SLOW_MODEL=$REPO/../shared/tools/slow_model.py
OUT=${OUT:-$WORK-out}
mkdir -p "$OUT"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
bash "$REPO/studies/gpu_device_time_stored.sh" --aaco-cold-start=0 "$@" | tee "$OUT/steps.log"
"${PYTHON:-python3}" - "$WORK/items.jsonl" "$OUT/calibrated_claims.md" <<'PY' || rc=1
import json, statistics, sys
from collections import defaultdict
from pathlib import Path
src, dest = Path(sys.argv[1]), Path(sys.argv[2])
rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()] if src.exists() else []
gates = [r for r in rows if r["step_kind"] == "gate"]
by = defaultdict(lambda: {"aa": [], "slow": []})
for r in gates:
    by[r["model"]]["aa" if r["variant"] == "aa" else "slow"].append(r)
lines = ["| model | unchanged gates | failed | no regression | improvement | other words | slowed gates | caught |"
         " headline leads with device time | device time of slowed (median) | words of slowed |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
tot = defaultdict(int)
for model, g in sorted(by.items()):
    aa, slow = g["aa"], g["slow"]
    nr = sum(r["outcome"] == "no-regression" for r in aa)
    imp = sum(r["outcome"] == "improvement" for r in aa)
    other = sorted({r["outcome"] for r in aa} - {"no-regression", "improvement"})
    caught = sum(r["failed"] and r["outcome"] == "regression" for r in slow)
    led = sum(bool(r.get("message")) and r["message"].split(": ", 1)[-1].startswith("device time") for r in slow)
    devs = [r["device_ratio"] for r in slow if r.get("device_ratio")]
    med = f"{(statistics.median(devs) - 1) * 100:+.1f}%" if devs else "-"
    walls = ", ".join(sorted({str(r["outcome"]) for r in slow})) if slow else "-"
    failed = sum(r["failed"] for r in aa)
    lines.append(f"| {model} | {len(aa)} | {failed} | {nr} | {imp} | {', '.join(other) or '-'} | {len(slow)} |"
                 f" {caught} | {led} | {med} | {walls} |")
    for k, v in (("aa", len(aa)), ("failed", failed), ("nr", nr), ("imp", imp), ("slow", len(slow)),
                 ("caught", caught), ("led", led)):
        tot[k] += v
share = f"{tot['nr'] / tot['aa']:.0%}" if tot["aa"] else "-"
lines.append(f"\nunchanged: {tot['failed']} of {tot['aa']} failed, {tot['nr']} no regression ({share}),"
             f" {tot['imp']} improvement; slowed: {tot['caught']} of {tot['slow']} caught,"
             f" {tot['led']} led by device time")
for r in gates:
    if (r["variant"] == "aa" and (r["failed"] or r["outcome"] != "no-regression")) or (
            r["variant"] != "aa" and not r["failed"]):
        lines.append(f"- step {r['step']} {r['model']}={r['variant']}: {str(r.get('message'))[:300]}")
dest.parent.mkdir(parents=True, exist_ok=True)
dest.write_text("\n".join(lines) + "\n")
print("\n".join(lines)); sys.exit(0 if gates else "no gate ran: see the steps above")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"; exit "${rc:-0}"
