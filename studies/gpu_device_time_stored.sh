#!/usr/bin/env bash
# Device time with stored baselines on an NVIDIA GPU (issue 19): the real plugin in separate pytest
# processes, 5 saves of zoo models, then gates of the unchanged models (aa) and of slowed variants
# (kN: N extra 3x3 convs on a side branch scaled by 1e-30, built by `$SLOW_MODEL IN OUT K`).
#
#   SLOW_MODEL=../shared/tools/slow_model.py PYTHONPATH=/tmp/site:$PWD \
#       bash studies/gpu_device_time_stored.sh [pytest args, e.g. --aaco-cold-start=0]
#   MODELS="inception_v1 densenet121" BIG="4 8" ... : several models, each gated in every step (one
#       pytest process per step); the step `big` gates each model's variant with its own K from BIG
#       (one K per model, in MODELS order); the default steps are then 5 saves and 10 aa / 10 big.
#
# STEPS (default: 5 saves, then 10 aa and 10 k4 gates alternating) run in order; the state lives in
# $WORK (/tmp/aaco-device-stored), so a call stops before a step would start after MAX_S seconds (540)
# and the next goes on (RESET=1 starts over; STATE_OUT=/STATE_IN=FILE.tgz carry it to another machine).
# Per gate and model one line from the session bundle: variant, exit code, outcome, device and wall
# time (change, 95% CI, MDE), the traced share and the seconds; at the end
# studies/device_time_overhead.py over the last bundle. Needs onnxruntime-gpu and cupti-python.
#
# PRESET=one (one GPU) and PRESET=two (two GPUs, pytest-xdist) are the pooled-variance series: the
# gate's run-to-run variance pooled over the baseline folder's items (pytest_aaco/verdict/pooling.py).
#   one: resnet50, inception_v1, densenet121 (kernel +2%: K 1, 1, 3 = SMALL); 2 saves, then 10 gates
#        alternating mixs0 / mixs1 (each slows the models whose index is even / odd by their SMALL
#        K, the others unchanged, so each gate judges both), then 3 more saves (5 runs) and 4 gates
#        more. --aaco-cold-start=0. About 40 s a process on an H100: two calls of MAX_S=480.
#   two: those three plus squeezenet and shufflenet (kernel +6%: BIG "4 4 8 - -", "-" never slowed),
#        `-n 2 --aaco-device-id 0,1` (items land on either GPU, one history per GPU model), 3 saves,
#        then 3 gates all unchanged (aa) and 4 gates with every slowable model slowed (big).
#   cpu: the CPU EP (PROVIDER=cpu), ResNet-50, 5 saves then 5 unchanged gates: the stored wall-time MDE
#        on a quiet host; the load average is printed before and after.
# Each gated item goes to $WORK/items.jsonl; the end prints studies/stored_gate_summary.py's table
# (SUMMARY=1: only that).
set -u
REPO=$(pwd)
preset_args=()
case "${PRESET:-}" in
    one)
        WORK=${WORK:-/tmp/aaco-pool-one}; MODELS=${MODELS:-"resnet50 inception_v1 densenet121"}; SMALL=${SMALL:-"1 1 3"}
        STEPS=${STEPS:-"save save $(printf 'mixs0 mixs1 %.0s' 1 2 3 4 5)save save save $(printf 'mixs0 mixs1 %.0s' 1 2)"}
        MAX_S=${MAX_S:-480}; preset_args=(--aaco-cold-start=0) ;;
    two)
        WORK=${WORK:-/tmp/aaco-pool-two}; MODELS=${MODELS:-"resnet50 inception_v1 densenet121 squeezenet shufflenet"}
        BIG=${BIG:-"4 4 8 - -"}; STEPS=${STEPS:-"save save save aa big aa big aa big big"}
        MAX_S=${MAX_S:-480}; preset_args=(-n 2 --aaco-device-id 0,1 --aaco-cold-start=0) ;;
    cpu)  # the CPU EP on a quiet host (the GPU machine's 16 cores): ResNet-50, 5 saves, then 5 unchanged gates
        WORK=${WORK:-/tmp/aaco-pool-cpu}; PROVIDER=${PROVIDER:-cpu}; MODELS=${MODELS:-resnet50}
        STEPS=${STEPS:-"save save save save save aa aa aa aa aa"}; MAX_S=${MAX_S:-480}
        preset_args=(--aaco-cold-start=0)
        echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" ;;
    "") ;;
    *) echo "PRESET must be one, two or cpu, got ${PRESET}" >&2; exit 2 ;;
esac
if [ "${PRESET:-}" = two ] && ! "${PYTHON:-python3}" -c "import xdist" 2>/dev/null; then
    echo "PRESET=two needs pytest-xdist importable (pip install --target /tmp/site pytest-xdist execnet)" >&2; exit 2
fi
WORK=${WORK:-/tmp/aaco-device-stored}
if [ "${SUMMARY:-0}" = 1 ]; then "${PYTHON:-python3}" "$REPO/studies/stored_gate_summary.py" "$WORK"; exit $?; fi
MODELS=${MODELS:-${MODEL:-resnet50}}
MAX_S=${MAX_S:-540}
K=${K:-4}
read -r -a models <<< "$MODELS"
if [ -n "${BIG:-}" ]; then read -r -a bigs <<< "$BIG"; big=big; else bigs=(); big=k$K; fi
if [ -n "${SMALL:-}" ]; then read -r -a smalls <<< "$SMALL"; else smalls=(); fi
STEPS=${STEPS:-"save save save save save aa $big aa $big aa $big aa $big aa $big aa $big aa $big aa $big aa $big aa $big"}
export PYTHONPATH=${PYTHONPATH:-/tmp/site:$REPO}
[ "${RESET:-0}" = 1 ] && rm -rf "$WORK"
mkdir -p "$WORK/models" "$WORK/sessions"
if [ -n "${STATE_IN:-}" ] && [ ! -f "$WORK/done" ]; then
    tar -xzf "$STATE_IN" -C "$WORK" || exit 1
    echo "state from $STATE_IN: $(cat "$WORK/done") steps done"
fi
k_or_aa() {  # k_or_aa K -> kK, or aa for "-" (a model never slowed)
    if [ "$1" = - ]; then echo aa; else echo "k$1"; fi
}
variant_file() {  # variant_file STEP INDEX -> the file stem of that model's variant in this step
    case "$1" in
        save|aa) echo aa ;;
        big) k_or_aa "${bigs[$2]:?BIG needs one K per model}" ;;
        small) k_or_aa "${smalls[$2]:?SMALL needs one K per model}" ;;
        mixs0|mixs1|mixb0|mixb1)  # the models whose index parity is the last digit are slowed, the others not
            if [ $(( $2 % 2 )) != "${1: -1}" ]; then echo aa
            elif [ "${1:3:1}" = s ]; then k_or_aa "${smalls[$2]:?SMALL needs one K per model}"
            else k_or_aa "${bigs[$2]:?BIG needs one K per model}"; fi ;;
        *) echo "$1" ;;
    esac
}
if [ ! -f "$WORK/proj/models.yaml" ]; then
    mkdir -p "$WORK/proj"
    printf 'models:\n' > "$WORK/proj/models.yaml"
    for j in "${!models[@]}"; do
        name=${models[$j]}
        "${PYTHON:-python3}" - "$WORK" "$name" <<'PY'
import os, sys, onnx
work, name = sys.argv[1], sys.argv[2]
src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
onnx.save(onnx.load(src), f"{work}/models/{name}-aa.onnx")
PY
        for k in $(printf '%s\n' "$K" ${bigs[@]+"${bigs[@]}"} ${smalls[@]+"${smalls[@]}"} | grep -v '^-$' | sort -un); do
            "${PYTHON:-python3}" "${SLOW_MODEL:-../shared/tools/slow_model.py}" "$WORK/models/$name-aa.onnx" "$WORK/models/$name-k$k.onnx" "$k" || exit 1
        done
        printf '  %s:\n    path: %s.onnx\n' "$name" "$name" >> "$WORK/proj/models.yaml"
    done
    cp "$REPO/tests/perf/test_models.py" "$WORK/proj/test_perf.py"
    printf '[pytest]\naaco_models = models.yaml\n' > "$WORK/proj/pytest.ini"
    [ -f "$WORK/done" ] || echo 0 > "$WORK/done"
fi
# -p pytest_aaco.plugin where the plugin is on PYTHONPATH only (not installed with its pytest11 entry point)
if "${PYTHON:-python3}" -c "import importlib.metadata as m, sys; sys.exit(0 if any(e.value.startswith('pytest_aaco') for e in m.entry_points(group='pytest11')) else 1)"; then
    plugin=()
else
    plugin=(-p pytest_aaco.plugin)
fi
done_steps=$(cat "$WORK/done")
started=$(date +%s)
i=0
for step in $STEPS; do
    i=$((i + 1))
    [ "$i" -le "$done_steps" ] && continue
    if [ $(( $(date +%s) - started )) -gt "$MAX_S" ]; then
        echo "stopped before step $i of $(echo $STEPS | wc -w) (MAX_S=$MAX_S): run the script again to go on"
        [ -n "${STATE_OUT:-}" ] && tar -czf "$STATE_OUT" -C "$WORK" done baselines items.jsonl
        [ -f "$WORK/items.jsonl" ] && "${PYTHON:-python3}" "$REPO/studies/stored_gate_summary.py" "$WORK"
        exit 0
    fi
    args=()
    if [ "$step" = save ]; then args=(--aaco-save-baseline); fi
    variants=""
    for j in "${!models[@]}"; do
        v=$(variant_file "$step" "$j")
        variants="$variants ${models[$j]}=$v"
        cp "$WORK/models/${models[$j]}-$v.onnx" "$WORK/proj/${models[$j]}.onnx"
    done
    saves=$(echo $STEPS | awk -v n=$((i - 1)) '{c = 0; for (k = 1; k <= n; k++) if ($k == "save") c++; print c}')
    bundle="$WORK/sessions/step$i"
    cd "$WORK/proj" || exit 1
    t0=$(date +%s.%N)
    "${PYTHON:-python3}" -m pytest test_perf.py ${plugin[@]+"${plugin[@]}"} -p no:benchmark -p no:cacheprovider -q \
        --aaco-provider="${PROVIDER:-cuda}" --aaco-baseline-dir="$WORK/baselines" --aaco-session-dir="$bundle" \
        ${args[@]+"${args[@]}"} ${preset_args[@]+"${preset_args[@]}"} "$@" > "$WORK/step$i-$step.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    cd "$REPO" || exit 1
    "${PYTHON:-python3}" - "$bundle" "$step" "$rc" "$t0" "$t1" "$i" "$variants" "$saves" "$WORK/items.jsonl" <<'PY'
import json, sys
from pathlib import Path
bundle, step, rc, t0, t1, i, variants, saves, jsonl = sys.argv[1:]
variant_of = dict(v.split("=", 1) for v in variants.split())
items = sorted(Path(bundle).glob("*/items/*.json"))
secs = float(t1) - float(t0)
if not items:
    print(f"step {i} {step} rc={rc} {secs:.1f}s | no item record (see the log)")
    sys.exit(0)
def pct(x):
    return "-" if x is None else f"{(x - 1) * 100:+.2f}%"
def ci(d):
    lo, hi = d.get("ci_low"), d.get("ci_high")
    return "" if lo is None else f" [{(lo - 1) * 100:+.2f}, {(hi - 1) * 100:+.2f}]"
for item in items:
    rec = json.loads(item.read_text())
    model = rec.get("model") or item.stem
    v = rec.get("verdict") or {}
    dev = v.get("device_time") or {}
    res = rec.get("result") or {}
    traced = sum(float(((r or {}).get("device_time") or {}).get("traced_s") or 0)
                 + float((((r or {}).get("reference") or {}).get("device_time") or {}).get("traced_s") or 0)
                 for r in (res, res.get("confirmation")))
    measure = sum(float(((r or {}).get("device_time") or {}).get("measure_s") or 0)
                  for r in (res, res.get("confirmation")))
    share = f"{traced / measure:.1%}" if measure else "-"
    item_s = float(rec.get("duration_s") or 0)  # pytest's setup + call + teardown of the item
    variant = variant_of.get(model, step)
    pooled = dev.get("pooled") or {}
    with open(jsonl, "a", encoding="utf-8") as out:  # one line per item, for studies/stored_gate_summary.py
        out.write(json.dumps({
            "step": int(i), "step_kind": "save" if step == "save" else "gate", "saves": int(saves), "model": model,
            "variant": variant, "failed": rec.get("outcome") == "failed", "outcome": v.get("outcome"),
            "device_ratio": dev.get("ratio"), "device_mde": dev.get("mde"), "device_outcome": dev.get("outcome"),
            "device_method": dev.get("method"), "device_series": dev.get("series"), "wall_mde": v.get("mde"),
            "gpu": (rec.get("gpu") or {}).get("uuid") or (rec.get("gpu") or {}).get("pci_bus_id"),
            "gpu_offset": pooled.get("gpu_offset"), "pooled_items": pooled.get("items"), "pooled_d0": pooled.get("d0"),
            "confirmed": v.get("confirmed"), "seconds": item_s, "message": v.get("message")}) + "\n")
    head = f"step {i} {step} {model}={variant} rc={rc} process {secs:.1f}s item {item_s:.1f}s"
    if step == "save":
        d = res.get("device_time") or {}
        print(f"{head} | kernel {d.get('kernel_ms', float('nan')):.4f} ms/run,"
              f" busy {d.get('busy_ms', float('nan')):.4f} ms/run, kernels {d.get('kernels')}, traced share {share}"
              f" | {v.get('message', '')[:160]}")
        continue
    kernels = dev.get("kernels") or {}
    dev_mde = "-" if dev.get("mde") is None else format(dev["mde"], ".2%")
    wall_mde = "-" if v.get("mde") is None else format(v["mde"], ".1%")
    print(f"{head} | {v.get('outcome')}"
          f" | device {pct(dev.get('ratio'))}{ci(dev)} MDE {dev_mde}"
          f" ({dev.get('method')}, {dev.get('series')}, {dev.get('outcome')},"
          f" kernels {kernels.get('baseline')} -> {kernels.get('candidate')})"
          f" | wall {pct(v.get('ratio'))}{ci(v)} MDE {wall_mde}"
          f" ({dev.get('wall_outcome', v.get('outcome'))}) | traced share {share}"
          + (" | confirmed" if v.get("confirmed") else "") + (f" | {dev['reason']}" if dev.get("reason") else ""))
PY
    echo "$i" > "$WORK/done"
done
last=$(ls -d "$WORK"/sessions/step*/ 2>/dev/null | sort -V | tail -1)
[ -n "$last" ] && "${PYTHON:-python3}" "$REPO/studies/device_time_overhead.py" "$last"
[ -n "${STATE_OUT:-}" ] && tar -czf "$STATE_OUT" -C "$WORK" done baselines items.jsonl
[ -f "$WORK/items.jsonl" ] && "${PYTHON:-python3}" "$REPO/studies/stored_gate_summary.py" "$WORK"
echo "all $(echo $STEPS | wc -w) steps done; logs and bundles in $WORK; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
