"""What a traced block costs with CUPTI, step by step (ms, medians over 20 blocks).

    python studies/cupti_overhead.py [MODEL.onnx]   (default: the generated model-zoo ResNet-50)

Steps per block: activity_enable, 10 model runs, get_timestamp, activity_disable, forced
activity_flush_all, turning the records into a DeviceBlock; and, for contrast, 10 untraced runs.
Needs onnxruntime-gpu and cupti-python.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort

from pytest_aaco.measure.registry import zoo_model_path
from pytest_aaco.tracers import cupti as cupti_tracer
from pytest_aaco.tracers.base import block_of


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else str(zoo_model_path("resnet50"))
    sess = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in inp.shape]).astype(np.float32)

    def run() -> None:
        sess.run(None, {inp.name: x})

    for _ in range(20):
        run()
    cupti = cupti_tracer.load_cupti()
    col = cupti_tracer.collector(cupti)
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    names = ("enable", "runs", "disable", "flush", "take+block", "untraced runs", "flush, still enabled",
             "traced block as the tracer takes it")
    steps: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(20):
        t0 = time.perf_counter()
        for _ in range(10):
            run()
        steps["untraced runs"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        cupti.activity_enable(kind)
        t1 = time.perf_counter()
        for _ in range(10):
            run()
        t2 = time.perf_counter()
        cupti.activity_flush_all(1)
        t2b = time.perf_counter()
        cupti.activity_disable(kind)
        t3 = time.perf_counter()
        cupti.activity_flush_all(1)
        t4 = time.perf_counter()
        recs = col.take()
        block = block_of(recs, 10)
        t5 = time.perf_counter()
        # the order the tracer uses: enable, runs, disable, forced flush
        t6 = time.perf_counter()
        cupti.activity_enable(kind)
        for _ in range(10):
            run()
        cupti.activity_disable(kind)
        cupti.activity_flush_all(1)
        second = block_of(col.take(), 10)
        steps["traced block as the tracer takes it"].append((time.perf_counter() - t6) * 1e3)
        assert second.kernels == block.kernels, (second.kernels, block.kernels)
        for k, v in (("enable", t1 - t0), ("runs", t2 - t1), ("flush, still enabled", t2b - t2),
                     ("disable", t3 - t2b), ("flush", t4 - t3), ("take+block", t5 - t4)):
            steps[k].append(v * 1e3)
    print(f"kernels per run {block.kernels:g}, kernel time per run {block.kernel_ms:.3f} ms")
    for k, v in steps.items():
        print(f"{k:>22}: median {np.median(v):8.2f} ms  max {np.max(v):8.2f} ms")


if __name__ == "__main__":
    main()
