"""Child process of tests/test_compile_cache.py's race tests: one runner building a MIGraphX session on the
simulated compiling EP (tests/fake_compiling_ep.py) and running it the way one of the plugin's passes does.

``python tests/compile_race_child.py '<json>'`` with ``mode`` (``benchmark``: :func:`build_session` then
:func:`run_benchmark`; ``coldstart``: :meth:`LocalSessions.fresh`; ``sidebyside``: :meth:`LocalFactory.open`;
``worker``: a side worker, :meth:`WorkerSessions.fresh`), ``root`` (``--aaco-compile-cache``), ``model``,
``log`` (the EP's JSON-lines log), ``compile_s``, ``start_at`` (a ``time.time()`` to wait for, so the
runners start together). Prints one JSON line: the session's compile-cache status.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # this checkout's pytest_aaco, and fake_compiling_ep

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from fake_compiling_ep import CompilingEP, worker_environment  # noqa: E402

from pytest_aaco.measure import compile_cache, inference, rounds  # noqa: E402
from pytest_aaco.measure.providers import parse_provider  # noqa: E402


def main() -> None:
    request = json.loads(sys.argv[1])
    model, log = Path(request["model"]), Path(request["log"])
    compile_cache.set_compile_cache(Path(request["root"]))
    provider = parse_provider("migraphx")
    feeds = {"X": np.ones((1, 4), np.float32)}
    ep = {"compile_s": request["compile_s"], "log": str(log), "compile_at": "first_run"}
    if request["mode"] != "worker":
        inference.SESSION_FACTORY = CompilingEP(**ep)
        real = ort.get_available_providers
        ort.get_available_providers = lambda: ["MIGraphXExecutionProvider", *real()]
    time.sleep(max(0.0, request["start_at"] - time.time()))
    if request["mode"] == "benchmark":
        handle = inference.build_session(model, provider)
        settings = inference.MeasureSettings(warmup=1, rounds=1, iterations=1, iobinding="none")
        status = rounds.run_benchmark(handle, feeds, settings, "race", 1).compile_cache
    elif request["mode"] == "coldstart":
        from pytest_aaco.passes.coldstart import LocalSessions

        status = LocalSessions(model, provider, feeds).fresh().compile_cache
    elif request["mode"] == "sidebyside":
        from pytest_aaco.measure.registry import ModelSpec
        from pytest_aaco.sidebyside.sides import LocalFactory

        spec = ModelSpec("race", f"path:{model}", model.parent, dims={"N": 1})
        opened = LocalFactory(model, spec, provider, warmup=1, footprint=False, min_warmup_s=0.0).open("candidate")
        status = opened.info.get("compile_cache")
    else:
        from pytest_aaco.sidebyside.worker_client import WorkerSessions, WorkerSide

        env = {**worker_environment(Path(request["root"]).parent / f"site-{time.time_ns()}"),
               "AACO_FAKE_EP": json.dumps(ep)}
        with WorkerSide(sys.executable, env=env) as side:
            status = WorkerSessions(side, model, provider, feeds).fresh().compile_cache
    print(json.dumps({"status": status}))


main()
