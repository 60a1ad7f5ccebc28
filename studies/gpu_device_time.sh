#!/usr/bin/env bash
# Device time side by side on an NVIDIA GPU (issue 19): the real plugin, --aaco-compare against a
# base commit, for ResNet-50 unchanged (other bytes, same compute) and slowed variants made by
# ../shared/tools/slow_model.py (K extra 3x3 convs on a side branch scaled by 1e-30).
#   SLOW_MODEL=path/to/slow_model.py RUNS="aa aa k4 k1" bash studies/gpu_device_time.sh [pytest args]
# Needs onnxruntime-gpu and cupti-python importable. Prints, per run: the variant, pytest's exit
# code, the seconds the run took and the item's verdict line, then where the item's seconds went
# (studies/sbs_timing.py). Logs stay in $WORK.
set -u
WORK=${WORK:-/tmp/aaco-device-time}
MODEL=${MODEL:-resnet50}
RUNS=${RUNS:-"aa aa k4 k1"}
REPO=$(pwd)
mkdir -p "$WORK"
if [ ! -d "$WORK/proj/.git" ]; then
    rm -rf "$WORK/proj" && mkdir -p "$WORK/proj" "$WORK/models"
    python3 - "$WORK" "$MODEL" <<'PY'
import os, sys, onnx
work, name = sys.argv[1], sys.argv[2]
src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
m = onnx.load(src)
onnx.save(m, f"{work}/models/base.onnx")
m.doc_string = "same compute, other bytes"
onnx.save(m, f"{work}/models/aa.onnx")
PY
    for k in 1 2 4 8; do python3 "${SLOW_MODEL:-../shared/tools/slow_model.py}" "$WORK/models/base.onnx" "$WORK/models/k$k.onnx" "$k"; done
    cd "$WORK/proj" || exit 1
    printf 'models:\n  %s:\n    path: model.onnx\n' "$MODEL" > models.yaml
    cp "$REPO/tests/perf/test_models.py" test_perf.py
    printf '[pytest]\naaco_models = models.yaml\n' > pytest.ini
    cp "$WORK/models/base.onnx" model.onnx
    git init -q && git config user.email a@b && git config user.name a && git add -A && git commit -qm base && git tag base
    cd "$REPO" || exit 1
fi
i=0
for variant in $RUNS; do
    i=$((i + 1))
    cd "$WORK/proj" || exit 1
    cp "$WORK/models/$variant.onnx" model.onnx
    git commit -qam "$variant $i" --allow-empty
    start=$(date +%s.%N)
    python3 -m pytest test_perf.py -p no:cacheprovider -p no:benchmark -q --aaco-provider="${PROVIDER:-cuda}" --aaco-compare=base \
        "$@" > "$WORK/run$i-$variant.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    secs=$(python3 -c "print(f'{$end - $start:.1f}')")
    line=$(grep -E "^(REGRESSION|no regression|NO REGRESSION|inconclusive|improvement|IMPROVEMENT)|: (wall time|device time|[+-][0-9.]+%) " "$WORK/run$i-$variant.log" | grep "$MODEL" | head -1)
    echo "run $i $variant rc=$rc ${secs}s | $line"
    python3 "$REPO/studies/sbs_timing.py" "$WORK/proj" | sed "s/^/    timing $i $variant: /"
    cd "$REPO" || exit 1
done
