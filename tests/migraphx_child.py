"""Child process of tests/migraphx_wheels.py: imports an unpacked onnxruntime-migraphx wheel and creates
InferenceSessions on the MIGraphX EP, printing one JSON line with what happened.

Reads a JSON request on stdin:

* ``{"mode": "raw", "model": path, "attempts": [{"options": {...}, "env": {...}}, ...]}``: each attempt
  creates ``InferenceSession(model, providers=[("MIGraphXExecutionProvider", options)])`` directly, with
  *env* set around it;
* ``{"mode": "plugin", "model": path, "attempts": [{"options": {...}, "compile_cache": "auto"|"off"|folder,
  "graph": "on"|"off"}, ...]}``: each attempt goes through the plugin's own code path
  (:func:`pytest_aaco.measure.inference.build_session`, and :func:`pytest_aaco.measure.graph.graph_request`
  for ``--aaco-graph``).

``AACO_WHEEL_SITE`` (the unpacked wheel) and ``AACO_EXTRA_PATH`` (the worktree, for ``pytest_aaco``) go
first on ``sys.path``; the child checks that the wheel's onnxruntime is the one imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

site = os.environ["AACO_WHEEL_SITE"]
extra = [p for p in os.environ.get("AACO_EXTRA_PATH", "").split(os.pathsep) if p]
sys.path[:0] = [site, *extra]

import onnxruntime as ort  # noqa: E402

if not str(Path(ort.__file__).resolve()).startswith(str(Path(site).resolve())):
    print(json.dumps({"error": f"imported {ort.__file__}, not the wheel at {site}"}))
    sys.exit(0)

EP = "MIGraphXExecutionProvider"


@contextlib.contextmanager
def standin_log():
    """Point the stand-ins' call log (``AACO_STANDIN_LOG``) at a fresh file; yields the list it fills."""
    calls: list[str] = []
    with tempfile.NamedTemporaryFile("r", suffix=".log", delete=False) as handle:
        path = handle.name
    os.environ["AACO_STANDIN_LOG"] = path
    try:
        yield calls
    finally:
        os.environ.pop("AACO_STANDIN_LOG", None)
        with open(path, encoding="utf-8") as handle:
            calls.extend(line.strip() for line in handle if line.strip())
        os.unlink(path)


def raw(model: str, attempt: dict) -> dict:
    saved = {k: os.environ.get(k) for k in attempt.get("env", {})}
    os.environ.update(attempt.get("env", {}))
    printed = io.StringIO()
    result: dict = {"options": attempt["options"], "env": attempt.get("env", {})}
    with standin_log() as calls:
        try:
            with contextlib.redirect_stdout(printed):
                session = ort.InferenceSession(model, providers=[(EP, attempt["options"])])
            result.update(created=True, providers=session.get_providers(),
                          reported=session.get_provider_options().get(EP), message=printed.getvalue())
        except Exception as exc:  # noqa: BLE001 - ORT's own error types
            result.update(created=False, providers=[], message=f"{type(exc).__name__}: {exc}\n{printed.getvalue()}")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    result["calls"] = calls
    result["on_ep"] = EP in result["providers"]
    return result


def plugin(model: str, attempt: dict) -> dict:
    """One session built as the plugin builds it: ``--aaco-compile-cache`` (:func:`set_compile_cache`),
    ``--aaco-graph`` (:func:`choose_graph` then :func:`with_graph`, as ``AacoSession.graph_for`` does) and
    :func:`build_session` (which asks the EP, :mod:`pytest_aaco.measure.migraphx_probe`)."""
    with tempfile.TemporaryDirectory(prefix="aaco-user-cache-") as scratch:  # removed after: none left in /tmp
        return _plugin(model, attempt, Path(attempt.get("user_cache", scratch)))


def _plugin(model: str, attempt: dict, user_cache: Path) -> dict:
    from pytest_aaco.measure import compile_cache, migraphx_probe, providers
    from pytest_aaco.measure.graph import GraphRefused, choose_graph, with_graph
    from pytest_aaco.measure.inference import SessionError, build_session

    result: dict = {"attempt": attempt}
    compile_cache.set_compile_cache(attempt.get("compile_cache", "off"), user_cache=lambda: user_cache)
    spec = providers.parse_provider("migraphx").with_options(attempt.get("options", {}))
    printed = io.StringIO()
    with standin_log() as calls:
        try:
            with contextlib.redirect_stdout(printed):
                choice = choose_graph(attempt.get("graph", "off"), spec.short, "tiny[migraphx]", iobinding="all",
                                      symbolic=list, cpu_nodes=lambda: (0, ""))
                spec = with_graph(spec, choice)
                handle = build_session(Path(model), spec)
            result.update(created=True, on_ep=EP in handle.session.get_providers(), options=handle.options,
                          message=printed.getvalue())
        except GraphRefused as exc:
            result.update(created=False, on_ep=False, graph_refused=True, message=str(exc))
        except SessionError as exc:
            result.update(created=False, on_ep=False, message=str(exc))
    result["calls"] = calls
    result["probe"] = migraphx_probe.summary()
    result["env_after"] = {k: v for k, v in os.environ.items() if k.startswith("ORT_MIGRAPHX_")}
    return result


def main() -> None:
    request = json.loads(sys.stdin.read())
    run = raw if request.get("mode", "raw") == "raw" else plugin
    out = {"ort_version": ort.__version__, "ort_file": ort.__file__,
           "available": ort.get_available_providers(),
           "results": [run(request["model"], attempt) for attempt in request["attempts"]]}
    print(json.dumps(out, default=str))


main()
