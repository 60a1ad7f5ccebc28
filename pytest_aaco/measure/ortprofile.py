"""ONNX Runtime's own profiler: one profiled pass in a separate InferenceSession, and its events.

With ``SessionOptions.enable_profiling`` ORT writes a Chrome-trace JSON list of events: one
``{"cat": "Node", "name": "<node>_kernel_time", "ts": µs, "dur": µs, "args": {"op_name": ...,
"provider": ...}}`` per node per run, beside one ``{"cat": "Session", "name": "model_run"}`` per
run (https://onnxruntime.ai/docs/performance/tune-performance/profiling-tools.html).

This module owns running such a pass and cutting its events into runs; what is read from them
lives with its user: node placement in :mod:`pytest_aaco.measure.placement`, time per operator in
:mod:`pytest_aaco.passes.opprofile`. The profiling session is separate from the benchmark session, so
the measured session carries no profiling overhead; ORT partitions a graph deterministically for
the same model, EP and options, so both sessions place nodes alike.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_aaco.measure.inference import SessionError, build_session
from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.providers import ProviderSpec

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort


#: suffix of the name of a node's kernel event
KERNEL_SUFFIX = "_kernel_time"


class ProfileError(RuntimeError):
    """The profiled run could not be made or its profile could not be read."""


def event_list(events: object) -> list[Mapping[str, object]]:
    """The events of a parsed profile: the JSON list itself, or ``{"traceEvents": [...]}``'s list.

    Entries that are not JSON objects are dropped. Raises :class:`ProfileError` for anything else.
    """
    if isinstance(events, Mapping):
        events = events.get("traceEvents")
    if not isinstance(events, list):
        raise ProfileError(f"an ORT profile is a JSON list of events, got {type(events).__name__}")
    return [e for e in events if isinstance(e, Mapping)]


def run_windows(events: list[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """``(start, end)`` in µs of every ``model_run`` event, in time order."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    windows = [(float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur", 0))) for e in runs]
    return sorted(windows)


def kernel_events(events: list[Mapping[str, Any]], window: tuple[float, float] | None) -> list[Mapping[str, Any]]:
    """Kernel events (one per node and run) that carry ``args.provider``, inside *window* (µs) when given."""
    found = []
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith(KERNEL_SUFFIX):
            continue
        args = event.get("args") or {}
        if not isinstance(args, Mapping) or not args.get("provider"):
            continue
        if window is not None and not window[0] <= float(event.get("ts", 0)) <= window[1]:
            continue
        found.append(event)
    return found


def node_name(event: Mapping[str, object]) -> str:
    """The node name of a kernel event: its name without :data:`KERNEL_SUFFIX`."""
    return str(event.get("name", "")).removesuffix(KERNEL_SUFFIX)


def read_events(path: str | Path) -> list[Mapping[str, object]]:
    """Read an ORT profile file. Raises :class:`ProfileError` naming the file when unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ProfileError(f"cannot read the ORT profile {path}: {exc}") from exc
    return event_list(data)


def _feeds_for(session: ort.InferenceSession, model_name: str, dims: Mapping[str, int] | None) -> dict[str, np.ndarray]:
    return make_inputs(model_name, session.get_inputs(), dict(dims or {}), {})


def profiled_events(model_path: str | Path, provider_spec: ProviderSpec, device_id: int = 0, *,
                    feeds: Mapping[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
                    keep_profile: str | Path | None = None, runs: int = 3) -> list[Mapping[str, object]]:
    """Run *model_path* *runs* times in a new profiling InferenceSession and return the profile's events.

    The session is built by :func:`pytest_aaco.measure.inference.build_session` (so options and the CPU
    fallback EP are the benchmark's) on *provider_spec* (a :class:`~pytest_aaco.measure.providers.ProviderSpec`),
    fed *feeds* (generated from the model's inputs and *dims* when None). The profile file is
    deleted unless *keep_profile* names where to copy it. Raises
    :class:`~pytest_aaco.measure.inference.SessionError` when the session cannot be built or run,
    :class:`ProfileError` when the profile cannot be read.
    """
    path = Path(model_path)
    with tempfile.TemporaryDirectory(prefix="aaco-profile-") as tmp:
        prefix = os.path.join(tmp, "ort_profile")
        handle = build_session(path, provider_spec, device_id, profile_prefix=prefix)
        session = handle.session
        try:
            run_feeds = dict(feeds) if feeds is not None else _feeds_for(session, path.stem, dims)
            for _ in range(max(1, runs)):
                session.run(None, run_feeds)
        except Exception as exc:
            raise SessionError(f"profiling run of {path.name} on {provider_spec.ep_name} failed: {exc}") from exc
        finally:
            profile_file = session.end_profiling()
        if keep_profile is not None:
            Path(keep_profile).write_bytes(Path(profile_file).read_bytes())
        return read_events(profile_file)
