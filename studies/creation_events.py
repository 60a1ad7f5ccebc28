"""Which events ORT's profiler records while an InferenceSession is created, per available EP.

pytest-aaco splits each fresh session's creation into ``model_loading_*`` and
``session_initialization`` (:func:`pytest_aaco.passes.coldstart.creation_phases`) because those are the
only creation events seen so far (CPU EP here, CUDA EP on an H100). A compiling EP (TensorRT,
MIGraphX, OpenVINO) might add its own; this prints, for every EP of this onnxruntime build that
can create a session of the model, the Session-category events of the creation, the creation's
wall time and the split. One command, no network::

    python studies/creation_events.py [--model resnet50] [--providers cuda tensorrt migraphx]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def main() -> None:
    import onnxruntime as ort

    from pytest_aaco.measure.inference import SessionError, build_session
    from pytest_aaco.measure.ortprofile import read_events
    from pytest_aaco.measure.providers import ProviderError, parse_provider
    from pytest_aaco.measure.registry import zoo_model_path
    from pytest_aaco.passes.coldstart import creation_phases

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50", help="a zoo model name")
    parser.add_argument("--providers", nargs="+", default=["cpu", "cuda", "tensorrt", "migraphx", "openvino"])
    args = parser.parse_args()
    path = zoo_model_path(args.model)
    print(json.dumps({"onnxruntime": ort.__version__, "available": ort.get_available_providers()}))
    for short in args.providers:
        try:
            provider = parse_provider(short)
        except ProviderError as exc:
            print(json.dumps({"provider": short, "skipped": str(exc)}))
            continue
        if provider.ep_name not in ort.get_available_providers():
            print(json.dumps({"provider": short, "skipped": "not in this onnxruntime build"}))
            continue
        with tempfile.TemporaryDirectory(prefix="aaco-events-") as tmp:
            try:
                handle = build_session(Path(path), provider, profile_prefix=f"{tmp}/creation")
            except SessionError as exc:
                print(json.dumps({"provider": short, "error": str(exc)[:500]}))
                continue
            events = read_events(handle.session.end_profiling())
        session_events = [{"name": e.get("name"), "dur_us": e.get("dur")} for e in events if e.get("cat") == "Session"]
        print(json.dumps({"provider": short, "create_ms": round(handle.create_ms, 2), "events": session_events,
                          "split_ms": creation_phases(events)}))


if __name__ == "__main__":
    main()
