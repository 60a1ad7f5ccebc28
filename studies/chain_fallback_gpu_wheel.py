"""A fallback chain on the real onnxruntime-gpu wheel without an NVIDIA driver (issue 39).

Run with a Python that has onnxruntime-gpu installed and no NVIDIA driver, this checkout on PYTHONPATH:
``PYTHONPATH=. python studies/chain_fallback_gpu_wheel.py``. Prints what ORT lists, why each listed GPU EP
cannot make a session (ORT's own first line: the missing library), and where ``cuda|cpu`` and
``tensorrt|cuda|cpu`` resolve."""

from __future__ import annotations

import onnxruntime as ort

from pytest_aaco.measure.providers import parse_provider, parse_provider_list, resolve_chain, session_refusal

available = ort.get_available_providers()
print(f"onnxruntime {ort.__version__} ({ort.__file__}) lists: {', '.join(available)}")
for short in ("tensorrt", "cuda", "cpu"):
    print(f"  {short}: {session_refusal(parse_provider(short)) or 'makes a session'}")
for chain in ("cuda|cpu", "tensorrt|cuda|cpu"):
    ran, note = resolve_chain(parse_provider_list([chain])[0], available, ort.__version__, session_refusal)
    print(f"--aaco-provider={chain} -> {ran.short}: {note}")
