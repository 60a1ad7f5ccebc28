#!/usr/bin/env bash
# Device time side by side on an NVIDIA GPU (issue 19): the real plugin, --aaco-compare against a
# base commit, for zoo models unchanged (other bytes, same compute) and slowed variants made by
# ../shared/tools/slow_model.py (K extra 3x3 convs on a side branch scaled by 1e-30).
#   SLOW_MODEL=path/to/slow_model.py RUNS="aa aa k4 k1" bash studies/gpu_device_time.sh [pytest args]
#   MODELS="inception_v1 densenet121" BIG="4 8" SMALL="1 3" RUNS="aa big small" bash studies/gpu_device_time.sh
# MODELS (default $MODEL, default resnet50): zoo models, all gated in every run (one pytest process
# per run). A run's variant applies to every model: `aa`, `kN` (N extra convs), or `big` / `small`
# (each model's K from BIG / SMALL, in MODELS order: about the same kernel-time growth on each).
# Needs onnxruntime-gpu and cupti-python importable. Prints, per run and model: the variant, pytest's
# exit code, the seconds the run took, the item's pytest setup + call seconds and its verdict line.
# MAX_S (default: none) stops before a run would start after that many seconds; a later call with
# the same WORK and RUNS goes on with the first run not done ($WORK/runs_done counts them).
set -u
WORK=${WORK:-/tmp/aaco-device-time}
MODELS=${MODELS:-${MODEL:-resnet50}}
RUNS=${RUNS:-"aa aa k4 k1"}
BIG=${BIG:-}
SMALL=${SMALL:-}
REPO=$(pwd)
mkdir -p "$WORK"
read -r -a models <<< "$MODELS"
read -r -a bigs <<< "$BIG"
read -r -a smalls <<< "$SMALL"
variant_k() {  # variant_k VARIANT INDEX -> the file stem of that model's variant
    case "$1" in
        big) echo "k${bigs[$2]:?BIG needs one K per model}" ;;
        small) echo "k${smalls[$2]:?SMALL needs one K per model}" ;;
        *) echo "$1" ;;
    esac
}
if [ ! -d "$WORK/proj/.git" ]; then
    rm -rf "$WORK/proj" && mkdir -p "$WORK/proj" "$WORK/models"
    printf 'models:\n' > "$WORK/proj/models.yaml"
    for name in "${models[@]}"; do
        "${PYTHON:-python3}" - "$WORK" "$name" <<'PY'
import os, sys, onnx
work, name = sys.argv[1], sys.argv[2]
src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
m = onnx.load(src)
onnx.save(m, f"{work}/models/{name}-base.onnx")
m.doc_string = "same compute, other bytes"
onnx.save(m, f"{work}/models/{name}-aa.onnx")
PY
        ks=$(printf '%s\n' 1 2 4 8 "${bigs[@]}" "${smalls[@]}" | sort -un)
        for k in $ks; do
            "${PYTHON:-python3}" "${SLOW_MODEL:-../shared/tools/slow_model.py}" "$WORK/models/$name-base.onnx" "$WORK/models/$name-k$k.onnx" "$k"
        done
        printf '  %s:\n    path: %s.onnx\n' "$name" "$name" >> "$WORK/proj/models.yaml"
        cp "$WORK/models/$name-base.onnx" "$WORK/proj/$name.onnx"
    done
    cd "$WORK/proj" || exit 1
    cp "$REPO/tests/perf/test_models.py" test_perf.py
    printf '[pytest]\naaco_models = models.yaml\n' > pytest.ini
    git init -q && git config user.email a@b && git config user.name a && git add -A && git commit -qm base && git tag base
    cd "$REPO" || exit 1
fi
i=0
done_runs=$(cat "$WORK/runs_done" 2>/dev/null || echo 0)
started=$(date +%s)
for variant in $RUNS; do
    i=$((i + 1))
    [ "$i" -le "$done_runs" ] && continue
    if [ -n "${MAX_S:-}" ] && [ $(( $(date +%s) - started )) -gt "$MAX_S" ]; then
        echo "stopped before run $i of $(echo $RUNS | wc -w) (MAX_S=$MAX_S): call again with the same WORK and RUNS to go on"
        exit 0
    fi
    cd "$WORK/proj" || exit 1
    for j in "${!models[@]}"; do
        cp "$WORK/models/${models[$j]}-$(variant_k "$variant" "$j").onnx" "${models[$j]}.onnx"
    done
    git commit -qam "$variant $i" --allow-empty
    start=$(date +%s.%N)
    "${PYTHON:-python3}" -m pytest test_perf.py -p no:cacheprovider -p no:benchmark -q --aaco-provider="${PROVIDER:-cuda}" --aaco-compare=base \
        --durations=0 --durations-min=0 "$@" > "$WORK/run$i-$variant.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    secs=$("${PYTHON:-python3}" -c "print(f'{$end - $start:.1f}')")
    for j in "${!models[@]}"; do
        name=${models[$j]}
        line=$(grep -E "^(REGRESSION|no regression|NO REGRESSION|inconclusive|improvement|IMPROVEMENT)|: (wall time|device time|[+-][0-9.]+%) " "$WORK/run$i-$variant.log" | grep "$name\[" | head -1)
        [ -z "$line" ] && line=$(grep -E "^$name " "$WORK/run$i-$variant.log" | head -1 | tr -s ' ')
        item_s=$(grep -E "^[0-9.]+s (setup|call) .*\[$name-" "$WORK/run$i-$variant.log" | awk '{s += $1} END {printf "%.1f", s}')
        echo "run $i $variant $name $(variant_k "$variant" "$j") rc=$rc process ${secs}s item ${item_s}s | $line"
    done
    [ "$rc" -le 1 ] || bad=1; echo "$i" > "$WORK/runs_done"  # exit 0 (no regression) or 1 (regression)
    cd "$REPO" || exit 1
done; exit "${bad:-0}"
