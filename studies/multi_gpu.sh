#!/usr/bin/env bash
# Several GPUs under pytest-xdist (issue 23): the six zoo models of tests/perf timed with one
# worker, then with two workers, and a summary of wall time, the GPU each item ran on (from the
# session bundles), overlapping measured phases on one device, each item's mean against the
# one-worker run, and GPU utilisation (nvidia-smi --query-gpu=index,utilization.gpu -l 1).
#
#   PYTHONPATH=/tmp/site:$PWD bash studies/multi_gpu.sh one [pytest args]   # (a) one GPU:  -n 1 vs -n 2 --aaco-device-id 0,0
#   PYTHONPATH=/tmp/site:$PWD bash studies/multi_gpu.sh two [pytest args]   # (b) two GPUs: -n 1 vs -n 2 --aaco-device-id 0,1
#   PYTHONPATH=/tmp/site:$PWD bash studies/multi_gpu.sh four [pytest args]  # four GPUs: -n 1 vs -n 4 --aaco-device-id all
#   PYTHONPATH=/tmp/site:$PWD bash studies/multi_gpu.sh aa  [pytest args]   # (c) two GPUs: A/A gate across both
#   PROVIDER=cpu bash studies/multi_gpu.sh one -k squeezenet --aaco-rounds=3 # the script itself, on a laptop
#
# (c) saves SAVES (5) runs with -n 2 --aaco-device-id 0,1, then gates GATES (3) unchanged runs so.
# Expected (docs/gpu.md): (a) 0 overlapping phases; (b) half the wall time; (c) 0 items failed.
# Runs from a folder of its own ($WORK/proj: tests/perf/test_models.py and an empty pytest.ini),
# so the repository's ini (filterwarnings = error) does not apply. Loads the plugin with
# -p pytest_aaco.plugin when it is not installed; needs pytest-xdist importable.
# Environment: PROVIDER (cuda), WORK (/tmp/aaco-multi-gpu), PYTHON (python3).
set -u
STUDY=${1:-}
case "$STUDY" in
    one) SECOND="0,0"; WORKERS=2 ;;
    two|aa) SECOND="0,1"; WORKERS=2 ;;
    four) SECOND="all"; WORKERS=4 ;;  # every visible GPU, one worker each (a 4-GPU host)
    *) echo "usage: bash studies/multi_gpu.sh one|two|four|aa [pytest args]" >&2; exit 2 ;;
esac
shift
PROVIDER=${PROVIDER:-cuda}
WORK=${WORK:-/tmp/aaco-multi-gpu}
PY=${PYTHON:-python3}
REPO=$(pwd)
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$REPO"
if ! "$PY" -c "import xdist" 2>/dev/null; then
    echo "pytest-xdist is not importable: pip install --target /tmp/site pytest-xdist execnet" >&2
    exit 2
fi
if [ "$PROVIDER" = cuda ] && ! "$PY" -c "import pynvml" 2>/dev/null; then
    echo "note: nvidia-ml-py is not importable, so items record no GPU and locks fall back to gpu<N>.lock:" \
        "pip install --target /tmp/site nvidia-ml-py" >&2
fi
PLUGIN=(-p pytest_aaco.plugin)
if "$PY" -c "import importlib.metadata as m, sys
sys.exit(0 if any(e.value == 'pytest_aaco.plugin' for e in m.entry_points(group='pytest11')) else 1)"; then
    PLUGIN=()  # installed: its entry point loads it already
fi
mkdir -p "$WORK/proj"
cp "$REPO/tests/perf/test_models.py" "$WORK/proj/test_perf.py"
printf '[pytest]\n' > "$WORK/proj/pytest.ini"
if [ "$STUDY" != one ] && command -v nvidia-smi > /dev/null; then
    gpus=$(nvidia-smi -L | wc -l)
    [ "$gpus" -ge "$WORKERS" ] || echo "warning: nvidia-smi lists $gpus GPU(s); study '$STUDY' needs $WORKERS" >&2
fi

run() {  # run NAME [pytest args]: one pytest session; its log, bundle, wall time and smi log in $WORK/$STUDY-NAME
    local name=$1; shift
    local out="$WORK/$STUDY-$name"
    rm -rf "$out" && mkdir -p "$out"
    local smi=""
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=index,utilization.gpu --format=csv -l 1 > "$out/smi.csv" 2>&1 &
        smi=$!
    fi
    local start end
    start=$(date +%s.%N)
    (cd "$WORK/proj" && "$PY" -m pytest test_perf.py "${PLUGIN[@]}" -p no:benchmark -p no:cacheprovider -q \
        --aaco-provider="$PROVIDER" --aaco-session-dir="$out/sessions" --aaco-baseline-dir="${BASELINES:-$out/baselines}" \
        "$@" > "$out/pytest.log" 2>&1)
    echo $? > "$out/rc"
    end=$(date +%s.%N)
    [ -n "$smi" ] && kill "$smi" 2> /dev/null
    "$PY" -c "print(f'{$end - $start:.1f}')" > "$out/wall_s"
    echo "$STUDY-$name: rc=$(cat "$out/rc") wall $(cat "$out/wall_s") s ($out/pytest.log)"
}

if [ "$STUDY" = aa ]; then
    BASELINES="$WORK/aa-baselines"
    rm -rf "$BASELINES"
    runs=()
    for i in $(seq "${SAVES:-5}"); do
        run "save$i" -n 2 --aaco-device-id "$SECOND" --aaco-save-baseline "$@"; runs+=("$WORK/aa-save$i")
    done
    for i in $(seq "${GATES:-3}"); do
        run "gate$i" -n 2 --aaco-device-id "$SECOND" "$@"; runs+=("$WORK/aa-gate$i")
    done
    "$PY" "$REPO/studies/multi_gpu_summary.py" "${runs[@]}"
    exit 0
fi
run n1 -n 1 "$@"
run "n$WORKERS" -n "$WORKERS" --aaco-device-id "$SECOND" "$@"
"$PY" "$REPO/studies/multi_gpu_summary.py" "$WORK/$STUDY-n1" "$WORK/$STUDY-n$WORKERS"
