"""Is a CUPTI flush's cost in cupti-python's records or in our callback? (ms per traced block)

    python studies/cupti_flush_cost.py noop|ours RUNS

``noop`` registers a buffer-completed callback that only counts the records it is handed;
``ours`` the package's collector. Prints the median time of a traced block of RUNS ResNet-50
runs (enable, runs, disable, forced flush) over 20 blocks, and the records per block.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort

from pytest_aaco.measure.registry import zoo_model_path
from pytest_aaco.tracers import cupti as cupti_tracer


def main(mode: str, runs: int) -> None:
    path = str(zoo_model_path("resnet50"))  # the generated model-zoo ResNet-50 (seed 0)
    sess = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.zeros([d if isinstance(d, int) else 1 for d in inp.shape], np.float32)
    for _ in range(10):
        sess.run(None, {inp.name: x})
    cupti = cupti_tracer.load_cupti()
    counted = [0]
    if mode == "noop":
        cupti.activity_register_callbacks(lambda: (cupti_tracer.BUFFER_BYTES, 0),
                                          lambda acts: counted.__setitem__(0, counted[0] + len(acts)))
    else:
        col = cupti_tracer.collector(cupti)
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        cupti.activity_enable(kind)
        for _ in range(runs):
            sess.run(None, {inp.name: x})
        t1 = time.perf_counter()
        cupti.activity_disable(kind)
        cupti.activity_flush_all(1)
        if mode != "noop":
            counted[0] += len(col.take())
        times.append(((time.perf_counter() - t0) * 1e3, (time.perf_counter() - t1) * 1e3))
    print(f"{mode} runs={runs}: block median {np.median([t[0] for t in times]):.1f} ms, after the runs"
          f" {np.median([t[1] for t in times]):.1f} ms, records per block {counted[0] / 20:g}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
