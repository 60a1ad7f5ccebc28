#!/usr/bin/env bash
# The onnxruntime floor in pyproject.toml's extras (>=1.18.1), checked against the real wheels from
# the package registry: which (onnxruntime, numpy) pairs pip installs, and whether `import onnxruntime`
# and an InferenceSession (one Relu, CPUExecutionProvider) then work.
#
#   bash .ci/ort_floors.sh              # the default pairs, with python3 (a CPU wheel must exist for it)
#   PYTHON=python3.11 PAIRS="1.18.0:2.0.2 1.19.0:2.0.2" bash .ci/ort_floors.sh
#
# One line per pair: the versions, what pip did (installed / refused by the wheel's metadata), and the
# import/session result. Exit 1: a pair at or above the floor cannot run a session, or one in
# EXPECT_FAIL works (the floor is too high); exit 2: no network access to the registry.
# Environment: PYTHON (python3), WORK (/tmp/aaco-ort-floors; one venv per pair), PAIRS, EXPECT_FAIL.
set -u
PYTHON=${PYTHON:-python3}
WORK=${WORK:-/tmp/aaco-ort-floors}
# 1.17.x and 1.18.0 declare numpy>=1.24.2 with no upper bound but are compiled against numpy 1.x;
# 1.18.1 declares numpy<2.0; 1.19.0 is the first release compiled against numpy 2
PAIRS=${PAIRS:-"1.17.3:2.0.2 1.18.0:2.0.2 1.18.0:1.26.4 1.18.1:2.0.2 1.18.1:1.26.4 1.19.0:2.0.2"}
EXPECT_FAIL=${EXPECT_FAIL:-"1.17.3:2.0.2 1.18.0:2.0.2"}
FLOOR=1.18.1
mkdir -p "$WORK"

probe='
import numpy, onnxruntime as ort
from onnx import TensorProto, helper
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
out = session.run(None, {"x": numpy.array([-1.0, 2.0], dtype=numpy.float32)})[0]
assert out.tolist() == [0.0, 2.0], out
print("session ok")
'

at_least() {  # at_least A B: version A >= version B
    [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]
}

status=0
printf '%-12s %-8s %-10s %s\n' onnxruntime numpy pip result
for pair in $PAIRS; do
    ort=${pair%%:*}
    np=${pair##*:}
    venv="$WORK/ort-$ort-numpy-$np"
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv" || exit 2
    log="$venv/pip.log"
    if "$venv/bin/python" -m pip install -q --disable-pip-version-check "onnxruntime==$ort" "numpy==$np" "onnx>=1.15" \
        >"$log" 2>&1; then
        pip_result=installed
        # "session ok", or the distinct error lines (numpy 2 under a numpy-1 build: "AttributeError:
        # _ARRAY_API not found", then "ImportError: numpy.core.multiarray failed to import" or a bare "ImportError")
        result=$("$venv/bin/python" -c "$probe" 2>&1 | grep -E '^(session ok|[A-Za-z.]*(Error|Exception)\b)' | awk '!seen[$0]++' \
                 | paste -sd ';' -)
    elif grep -q "conflicting dependencies\|ResolutionImpossible" "$log"; then
        pip_result=refused
        result="-"
    else
        echo "pip could not install onnxruntime==$ort numpy==$np (no network, or no wheel for $("$PYTHON" -V)):" >&2
        tail -2 "$log" >&2
        exit 2
    fi
    printf '%-12s %-8s %-10s %s\n' "$ort" "$np" "$pip_result" "$result"
    if [ "$pip_result" = installed ]; then
        if at_least "$ort" "$FLOOR" && [ "$result" != "session ok" ]; then
            echo "  FAIL: onnxruntime $ort is at or above the floor $FLOOR and pip installs it with numpy $np" >&2
            status=1
        fi
        case " $EXPECT_FAIL " in
            *" $pair "*) if [ "$result" = "session ok" ]; then
                echo "  FAIL: onnxruntime $ort with numpy $np was expected to fail; see whether the floor can go down" >&2
                status=1
            fi ;;
        esac
    fi
done
exit "$status"
