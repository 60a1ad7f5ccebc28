"""Check NVIDIAGPUSampler on a real NVIDIA GPU: sample at 100 ms around a load for N seconds.

    python benchmarks/nvml_check.py [--model PATH] [--seconds 10] [--interval 0.1] [--device-id 0]
                                    [--load auto|ort|torch|cupy|numpy]

The load runs in the main thread while the sampler thread reads NVML:

- ``ort`` (what ``auto`` picks when ``--model`` is given and onnxruntime has the
  CUDAExecutionProvider): the model in a loop on the CUDA EP, inputs generated from the model's
  input metadata (dynamic dimensions set to 1);
- ``torch`` / ``cupy``: fp16/fp32 matrix products on the GPU, when the CUDA EP is missing;
- ``numpy``: a CPU matrix product, the last resort. The GPU then stays idle and the table shows
  idle readings; the script says so.

Prints one row per sample (time, utilisation, power, temperature, SM and memory clocks, memory,
P-state, clock-event reasons) and then the sampler's summary as JSON. Writes no files.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_aaco.jsonio import dumps  # noqa: E402
from pytest_aaco.samplers.nvidia import NVIDIAGPUSampler, nvidia_gpu_identity  # noqa: E402

ORT_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def default_model() -> Path | None:
    """ResNet-50 from the onnx package's test data, if installed."""
    try:
        import onnx
    except ImportError:
        return None
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
    return path if path.exists() else None


def ort_load(model: Path, device_id: int) -> tuple[Callable[[], None], str]:
    """A callable that runs *model* once on the CUDA EP; RuntimeError when the EP is missing."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError(
            f"onnxruntime {ort.__version__} has no CUDAExecutionProvider ({ort.get_available_providers()})"
        )
    session = ort.InferenceSession(
        str(model), providers=[("CUDAExecutionProvider", {"device_id": device_id}), "CPUExecutionProvider"]
    )
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"session fell back to {session.get_providers()}")
    rng = np.random.default_rng(0)
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in arg.shape]
        dtype = ORT_DTYPES.get(arg.type, np.float32)
        if np.issubdtype(dtype, np.floating):
            feeds[arg.name] = rng.random(shape).astype(dtype)
        else:
            feeds[arg.name] = rng.integers(0, 2, size=shape).astype(dtype)
    session.run(None, feeds)
    return (lambda: session.run(None, feeds)), f"onnxruntime {ort.__version__} CUDA EP running {model.name}"


def torch_load(device_id: int) -> tuple[Callable[[], None], str]:
    """fp16 8192x8192 matmuls on ``cuda:<device_id>``; RuntimeError without CUDA torch."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch has no CUDA device")
    device = torch.device(f"cuda:{device_id}")
    a = torch.randn(8192, 8192, device=device, dtype=torch.float16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.float16)

    def step() -> None:
        for _ in range(8):
            torch.matmul(a, b)
        torch.cuda.synchronize(device)

    return step, f"torch {torch.__version__} fp16 8192^2 matmul on {torch.cuda.get_device_name(device)}"


def cupy_load(device_id: int) -> tuple[Callable[[], None], str]:
    """fp32 4096x4096 matmuls with CuPy; RuntimeError without it."""
    import cupy

    cupy.cuda.Device(device_id).use()
    a = cupy.random.random((4096, 4096), dtype=cupy.float32)
    b = cupy.random.random((4096, 4096), dtype=cupy.float32)

    def step() -> None:
        for _ in range(4):
            a @ b
        cupy.cuda.Device(device_id).synchronize()

    return step, f"cupy {cupy.__version__} fp32 4096^2 matmul"


def numpy_load() -> tuple[Callable[[], None], str]:
    """A CPU matmul: the GPU stays idle."""
    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    return (lambda: a @ a), "numpy CPU matmul (no GPU load: GPU readings will be idle)"


def choose_load(kind: str, model: Path | None, device_id: int) -> tuple[Callable[[], None], str]:
    """The load to run, falling back ort -> torch -> cupy -> numpy for ``auto``; notes print why."""
    attempts: list[tuple[str, Callable[[], tuple[Callable[[], None], str]]]] = []
    if kind in ("auto", "ort"):
        if model is None:
            print("note: no --model and no onnx test model: skipping the ORT load")
        else:
            attempts.append(("ort", lambda: ort_load(model, device_id)))
    if kind in ("auto", "torch"):
        attempts.append(("torch", lambda: torch_load(device_id)))
    if kind in ("auto", "cupy"):
        attempts.append(("cupy", lambda: cupy_load(device_id)))
    for name, build in attempts:
        try:
            return build()
        except Exception as exc:  # noqa: BLE001 - try the next load
            print(f"note: {name} load unavailable: {type(exc).__name__}: {exc}")
    print("note: falling back to a numpy CPU matmul load; the CUDA EP (onnxruntime-gpu) is missing")
    return numpy_load()


def fmt(value: object, spec: str = ".0f") -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(value) or "none"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="ONNX model to run on the CUDA EP")
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration in s (default 10)")
    parser.add_argument("--interval", type=float, default=0.1, help="sampling interval in s (default 0.1)")
    parser.add_argument("--device-id", type=int, default=0, help="GPU index (default 0)")
    parser.add_argument("--load", choices=("auto", "ort", "torch", "cupy", "numpy"), default="auto")
    args = parser.parse_args(argv)

    model = args.model or default_model()
    print(f"GPU {args.device_id}: {json.dumps(nvidia_gpu_identity(args.device_id))}")
    step, description = numpy_load() if args.load == "numpy" else choose_load(args.load, model, args.device_id)
    print(f"load: {description}; {args.seconds:.0f} s, sampling every {args.interval * 1000:.0f} ms")

    sampler = NVIDIAGPUSampler(device_id=args.device_id, interval_s=args.interval)
    idle_before = time.perf_counter_ns()
    sampler.start()
    time.sleep(min(1.0, args.seconds / 5))  # idle lead-in, to see the ramp
    runs = 0
    load_start = time.perf_counter()
    while time.perf_counter() - load_start < args.seconds:
        step()
        runs += 1
    load_s = time.perf_counter() - load_start
    time.sleep(min(1.0, args.seconds / 5))  # idle tail
    sampler.stop()

    if sampler.error:
        print(f"sampler error: {sampler.error}")
    samples = sampler.samples()
    header = (
        f"{'t_s':>6} {'util%':>5} {'power_W':>8} {'temp_C':>6} {'sm_MHz':>6} {'mem_MHz':>7} {'mem_MB':>8} "
        f"{'pstate':>6}  reasons"
    )
    print(header)
    for s in samples:
        print(
            f"{(s['t_ns'] - idle_before) / 1e9:>6.2f} {fmt(s['gpu_util_percent']):>5} {fmt(s['power_w'], '.1f'):>8} "
            f"{fmt(s['temp_edge_c']):>6} {fmt(s['gfx_clock_mhz']):>6} {fmt(s['mem_clock_mhz']):>7} "
            f"{fmt(s['vram_used_mb']):>8} {fmt(s['perf_level']):>6}  {fmt(s['clock_event_reasons'])}"
        )
    gaps = np.diff([s["t_ns"] for s in samples]) / 1e6 if len(samples) > 1 else np.array([])
    record = sampler.to_dict()
    record.pop("samples")
    record["n_samples"] = len(samples)
    record["interval_ms_observed"] = (
        {"median": float(np.median(gaps)), "p99": float(np.percentile(gaps, 99)), "max": float(gaps.max())}
        if gaps.size
        else None
    )
    record["load"] = {"description": description, "runs": runs, "runs_per_s": runs / load_s if load_s else None}
    print(dumps(record), end="")
    return 0 if not sampler.error else 1


if __name__ == "__main__":
    raise SystemExit(main())
