#!/usr/bin/env bash
# What --aaco-graph=auto should be (issue 19, "Graph replay"): the real plugin side by side
# (--aaco-compare against a base commit) on an unchanged ResNet-50 (other bytes, same compute),
# PROCS separate pytest processes with --aaco-graph=off and PROCS with --aaco-graph=on (CUDA graphs,
# IO binding on the device), on an NVIDIA GPU with onnxruntime-gpu and cupti-python importable.
#
#   PYTHONPATH=/tmp/site:$PWD bash studies/graph_check.sh [extra pytest args]
#
# Prints one line per process: the mode, pytest's exit code, the wall-time ratio and its 95% CI,
# the device-time ratio and its 95% CI, the kernels per run, and the seconds the item took (as the
# comparison measured it, and the whole pytest process). An unchanged model should give intervals
# around 1.0; the narrower wall interval at fewer seconds per item is the better default, while
# device time should read the same in both modes. Logs and session bundles stay in $WORK.
# Environment: WORK (/tmp/aaco-graph-check), MODEL (resnet50), PROCS (3), MODES ("off on"), PROVIDER (cuda),
# PLUGIN ("-p pytest_aaco.plugin").
set -u
WORK=${WORK:-/tmp/aaco-graph-check}
MODEL=${MODEL:-resnet50}
PROCS=${PROCS:-3}
MODES=${MODES:-"off on"}
# loads the plugin from PYTHONPATH; set PLUGIN="" where pytest-aaco is pip-installed (its entry point loads it)
PLUGIN=${PLUGIN-"-p pytest_aaco.plugin"}
REPO=$(pwd)
mkdir -p "$WORK"
if [ ! -d "$WORK/proj/.git" ]; then
    rm -rf "$WORK/proj" && mkdir -p "$WORK/proj"
    python3 - "$WORK/proj" "$MODEL" <<'PY'
import os, sys, onnx
proj, name = sys.argv[1], sys.argv[2]
src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
m = onnx.load(src)
onnx.save(m, f"{proj}/model.onnx")
m.doc_string = "same compute, other bytes"
onnx.save(m, f"{proj}/model_aa.onnx")
PY
    cd "$WORK/proj" || exit 1
    printf 'models:\n  %s:\n    path: model.onnx\n' "$MODEL" > models.yaml
    cp "$REPO/tests/perf/test_models.py" test_perf.py
    printf '[pytest]\naaco_models = models.yaml\n' > pytest.ini
    git init -q && git config user.email a@b && git config user.name a && git add models.yaml test_perf.py pytest.ini model.onnx \
        && git commit -qm base && git tag base
    cp model_aa.onnx model.onnx && git commit -qam "unchanged compute, other bytes"
    cd "$REPO" || exit 1
fi
for mode in $MODES; do
    for i in $(seq "$PROCS"); do
        cd "$WORK/proj" || exit 1
        sessions="$WORK/sessions-$mode-$i"
        rm -rf "$sessions"
        start=$(date +%s.%N)
        # shellcheck disable=SC2086  # PLUGIN is word-split on purpose
        python3 -m pytest test_perf.py $PLUGIN -p no:benchmark -p no:cacheprovider -q \
            --aaco-provider="${PROVIDER:-cuda}" --aaco-compare=base --aaco-iobinding=all --aaco-graph="$mode" \
            --aaco-session-dir="$sessions" "$@" > "$WORK/$mode-$i.log" 2>&1
        rc=$?
        end=$(date +%s.%N)
        python3 - "$sessions" "$mode" "$rc" "$start" "$end" <<'PY'
import glob, json, sys
folder, mode, rc, start, end = sys.argv[1:6]
items = [json.load(open(p)) for p in glob.glob(f"{folder}/*/items/*.json")]
if not items:
    print(f"graph={mode} rc={rc} {float(end) - float(start):.1f}s: no item record (see the log)")
for item in items:
    sbs = ((item.get("verdict") or {}).get("side_by_side")) or {}
    dev = sbs.get("device_time") or {}
    graph = (item.get("graph") or {}).get("state", "-")
    wall = (f"wall {sbs['ratio']:.4f} [{sbs['ci_low']:.4f}, {sbs['ci_high']:.4f}]" if "ratio" in sbs
            else "wall -")
    device = (f"device {dev['ratio']:.4f} [{dev['ci_low']:.4f}, {dev['ci_high']:.4f}] kernels {dev.get('kernels')}"
              if "ratio" in dev else "device -")
    print(f"graph={mode} ({graph}) rc={rc} {item.get('label')}: {wall}; {device};"
          f" {sbs.get('duration_s', float('nan')):.1f} s measuring, {float(end) - float(start):.1f} s process;"
          f" outcome {(item.get('verdict') or {}).get('outcome')}")
PY
        cd "$REPO" || exit 1
    done
done
