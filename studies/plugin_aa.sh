#!/usr/bin/env bash
# The real plugin's unchanged gates on stored baselines (issue 11): SAVES runs with
# --aaco-save-baseline, QUIET unchanged gates, then BUSY unchanged gates while a Python loop keeps
# one core busy. Prints each run's exit code and its results-table rows; every run's output is
# kept in $WORK. Extra arguments go to every pytest run (e.g. --aaco-rounds=30).
#   flock /work/coord/measure.lock bash studies/plugin_aa.sh [pytest args...]
# Environment: K (the -k expression, default "resnet50 or inception_v1"), SAVES (5), QUIET (6),
# BUSY (6), PROVIDER (cpu), WORK (/tmp/aaco-plugin-aa; its baselines are replaced).
set -u
K=${K:-"resnet50 or inception_v1"}
WORK=${WORK:-/tmp/aaco-plugin-aa}
rm -rf "$WORK/baselines" && mkdir -p "$WORK"
run() {  # run NAME [extra pytest args]: one pytest session on the perf suite
    local name=$1; shift
    python -m pytest tests/perf -k "$K" -p no:cacheprovider -q --aaco-provider="${PROVIDER:-cpu}" \
        --aaco-baseline-dir="$WORK/baselines" "$@" > "$WORK/$name.log" 2>&1
    echo "$name rc=$?"
    grep -E "^[a-z0-9_]+ +[a-z]+ +[0-9.]+ " "$WORK/$name.log" | grep -v " saved$" || true
}
for i in $(seq "${SAVES:-5}"); do run "save$i" --aaco-save-baseline "$@"; done
for i in $(seq "${QUIET:-6}"); do run "quiet$i" "$@"; done
for i in $(seq "${BUSY:-6}"); do
    python -c "import time
t = time.time()
while time.time() - t < 600: pass" &
    hog=$!
    run "busy$i" "$@"
    kill "$hog"
done
