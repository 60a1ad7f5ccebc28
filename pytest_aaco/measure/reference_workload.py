"""The reference workload measured alongside every item, so stored baselines survive machine drift.

A stored baseline compares runs minutes or days apart. Between them the machine changes speed:
2% between processes on a quiet CPU, 8 to 30% on busy days, 8 to 16% (and for minutes at a
time) on an H100 (studies/RESULTS.md). Each round of the item is therefore paired with a short
block of a fixed reference model on the same EP and device, in alternating order
(:func:`pytest_aaco.measure.interleave.run_cycles`), and the verdict can test the *normalized* round
log-means ``ln(item) - ln(reference)``, in which the machine's speed cancels. This is the
"duet" idea (Bulej et al., ICPE 2020) with a fixed partner instead of the baseline revision.

The reference must not change with what is under test, so it is a fixed model: by default the
generated :func:`pytest_aaco.measure.modelgen.reference_mix` (convolutions, a token MLP and elementwise
ops, cached like the BERT encoder); a model-zoo architecture can be chosen instead. Its identity
(name and content hash) is stored with every run, so a changed reference invalidates only the
normalized series, never the raw one. studies/RESULTS.md has the measurement behind the
default choice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_aaco.measure.device_time import DeviceRecorder, DeviceSeries, RecordedSide, TraceBudget
from pytest_aaco.measure.inference import SessionError, bind_run, build_session, check_placement, warmup
from pytest_aaco.measure.inputs import make_inputs
from pytest_aaco.measure.interleave import LocalSide, block_iterations, run_cycles
from pytest_aaco.measure.modelgen import GENERATORS, cache_dir, cache_key, cached_model
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.measure.registry import content_hash, zoo_model_path
from pytest_aaco.measure.results import ReferenceSeries, RoundResult
from pytest_aaco.options import REFERENCE_ZOO, default, reference_name
from pytest_aaco.tracers.base import InProcessTracer

#: ``lock(provider, device_id, label)``: a context holding the device's lock while a session is built on it
DeviceLock = Callable[[ProviderSpec, int, str], AbstractContextManager[object]]

if TYPE_CHECKING:
    import onnxruntime as ort


#: generated references: name -> (generator, parameters); names as in the option table
GENERATED = {
    "mix": ("reference-mix", {"channels": 32, "size": 56, "embed": 256, "hidden": 1024, "seed": 0}),
    # the first candidate measured: L2-resident (0.5 MB of weights), tracked ResNet-50 worst
    "mix-small": ("reference-mix", {"channels": 32, "size": 56, "embed": 64, "hidden": 256, "seed": 0}),
}
#: a reference block lasts this fraction of an item round: the reference costs share/(1+share)
#: of the measured time (0.2 -> 17%, within the 25% budget of issue 11)
REFERENCE_SHARE = 0.2
#: first iterations of every block, timed but not measured: the previous session's spinning
#: intra-op threads slow them (:func:`pytest_aaco.measure.interleave.spin_bleed`). At least one, and as
#: many as cover SPIN_GUARD_S: a tiny item (10 µs a run) after a reference block otherwise spent
#: its whole 5-iteration round beside the reference's spinning threads
REFERENCE_DISCARD, SPIN_GUARD_S = 1, 0.002


class ReferenceError(ValueError):
    """An unknown reference name; the message lists the valid ones."""


def check_reference(name: str) -> str | None:
    """*name* normalised (lower case, stripped), or None for ``none``; ReferenceError otherwise."""
    try:
        return reference_name(name)
    except ValueError as exc:
        raise ReferenceError(f"unknown reference workload {name!r}: {exc}") from None


def reference_path(name: str) -> Path:
    """The ONNX file of reference *name*: generated once and cached (``~/.cache/pytest-aaco/models``),
    or the zoo file of the installed onnx package. Raises ReferenceError for an unknown name."""
    value = check_reference(name)
    if value is None:
        raise ReferenceError("the reference workload is turned off (none): there is no file")
    if value in REFERENCE_ZOO:
        return zoo_model_path(value)
    generator, params = GENERATED[value]
    target = cache_dir() / "models" / f"{generator}-{cache_key(generator, params)}.onnx"
    return cached_model(target, lambda: GENERATORS[generator](**params), f"reference workload {value}")


def reference_id(name: str, path: Path) -> str:
    """``name:`` plus 16 hex digits of the file's SHA-256: stored with every run, so a run is only
    ever normalized by the very same reference."""
    return f"{name}:{content_hash(path)[:16]}"


def reference_feeds(session_inputs: list[ort.NodeArg]) -> dict[str, np.ndarray]:
    """Seeded inputs for the reference session (symbolic dimensions as 1)."""
    dims = {str(d): 1 for i in session_inputs for d in i.shape if not isinstance(d, int)}
    return make_inputs("reference", session_inputs, dims, {})


def discard_for(per_iteration_ms: float) -> int:
    """Iterations to discard at the start of a block of a side taking *per_iteration_ms*: enough to
    cover :data:`SPIN_GUARD_S`, at least :data:`REFERENCE_DISCARD`, at most 1000."""
    per_s = max(float(per_iteration_ms), 1e-6) / 1000
    return int(min(max(REFERENCE_DISCARD, math.ceil(SPIN_GUARD_S / per_s)), 1000))


@dataclass
class Reference:
    """A ready reference: its name, identity, and a zero-argument ``run`` callable on its session
    (built on the item's EP and device). ``per_iteration_ms`` is its warm median latency."""

    name: str
    id: str
    run: Callable[[], object]
    per_iteration_ms: float
    session: ort.InferenceSession = None

    def iterations_for(self, item_round_s: float, share: float = REFERENCE_SHARE) -> int:
        """Measured iterations of one reference block: about ``share * item_round_s`` seconds."""
        return block_iterations(self.per_iteration_ms, target_s=share * item_round_s)

    def measure_alongside(self, run: Callable[[], object], rounds: int, iterations: int, item_round_s: float,
                          tracer: InProcessTracer | None = None
                          ) -> tuple[list[RoundResult], ReferenceSeries, DeviceRecorder | None]:
        """*rounds* cycles of one item block (*iterations* measured runs of *run*) and one short
        block of this reference, in balanced AB/BA order (:func:`pytest_aaco.measure.interleave.run_cycles`),
        the first iterations of each block kept out (:func:`discard_for`).

        Returns the item's rounds (RoundResults in ms, one per cycle) and the reference series:
        per cycle the reference block's log-mean and ``ln(item) - ln(reference)``. *item_round_s*
        (s) sizes the reference block (:meth:`iterations_for`). With a *tracer*, every block of
        either side is followed by one traced block of that side (:class:`~pytest_aaco.measure.device_time.
        DeviceRecorder`), in the cycles their shared :class:`~pytest_aaco.measure.device_time.TraceBudget`
        allows: the reference's device time goes into the series (``device``), the item's
        recorder is the third element (None without a tracer). Raises whatever *run* raises.
        """
        ref_iterations = self.iterations_for(item_round_s)
        discard = {"item": discard_for(item_round_s * 1000 / max(iterations, 1)),
                   "reference": discard_for(self.per_iteration_ms)}
        sides: list[Any] = [LocalSide("item", run), LocalSide("reference", self.run)]
        recorders = None
        if tracer is not None:
            budget = TraceBudget()  # one for both: they trace the same cycles, so their blocks pair up
            recorders = (DeviceRecorder(tracer, run, budget=budget), DeviceRecorder(tracer, self.run, budget=budget))
            sides = [RecordedSide(side, rec) for side, rec in zip(sides, recorders, strict=True)]
        start = time.perf_counter_ns()
        cycles = run_cycles(sides, {"item": iterations, "reference": ref_iterations}, rounds, discard=discard)
        measure_ns = time.perf_counter_ns() - start
        ref_device: DeviceSeries | None = None
        if recorders is not None:
            ref_device = recorders[1].series()
            if ref_device is not None:  # the measuring phase is the item's; the reference's traced time is its own
                ref_device = replace(ref_device, measure_s=0.0)
            recorders[0].measure_ns = measure_ns
        items = [c.block("item") for c in cycles]
        refs = [c.block("reference") for c in cycles]
        results = [RoundResult(c.index, b.latencies_ms, b.start_ns, b.end_ns)
                   for c, b in zip(cycles, items, strict=True)]
        ref_log = np.array([b.log_mean for b in refs])
        ref_ms = np.concatenate([b.latencies_ms for b in refs])
        item_ns = sum(b.end_ns - b.start_ns for b in items)
        ref_ns = sum(b.end_ns - b.start_ns for b in refs)
        series = ReferenceSeries(
            name=self.name, id=self.id, log_means=ref_log,
            normalized=np.array([b.log_mean for b in items]) - ref_log,
            mean_ms=float(ref_ms.mean()),
            iterations=ref_iterations, share=ref_ns / max(item_ns + ref_ns, 1), device=ref_device,
            min_ms=float(ref_ms.min()),
        )
        return results, series, None if recorders is None else recorders[0]


def build_reference(name: str, provider: ProviderSpec, device_id: int, intra_op_threads: int, iobinding: str,
                    warmup_s: float = 0.25, lock: DeviceLock | None = None) -> Reference:
    """Build the reference session on *provider* (a :class:`~pytest_aaco.measure.providers.ProviderSpec`),
    bind its run callable like the item's (*iobinding*), warm it up for about *warmup_s* seconds and time
    it. On a GPU EP it is built and warmed up inside *lock(provider, device_id, label)* (the device lock,
    :func:`pytest_aaco.measure.gpulocks.gpu_locks`, which the session hands in). Raises ReferenceError for an
    unknown name and :class:`~pytest_aaco.measure.inference.SessionError` when ORT cannot build or run it."""
    value = check_reference(name)
    if value is None:
        raise ReferenceError("the reference workload is turned off (none)")
    path = reference_path(value)
    # the item's own session settings (threads, spinning): a reference whose threads slept between
    # runs slowed 60-160% under CPU contention while the spinning item slowed 10-90%, so it
    # tracked the load, not the item; the spin bleed between blocks is discarded instead
    # on a GPU, built and warmed under the device lock like an item's session: it would slow another
    # worker's rounds on the same GPU (--aaco-device-id 0,0)
    with lock(provider, device_id, f"reference {value}") if lock is not None and provider.is_gpu else nullcontext():
        handle = build_session(path, provider, device_id, intra_op_threads)
        check_placement(handle)  # a reference that fell back to the CPU would not track the device
        try:
            feeds = reference_feeds(list(handle.session.get_inputs()))
            run = bind_run(handle, feeds, iobinding, device_id)
            _, warm_ms = warmup(run, 5)
            spent_ms = float(warm_ms.sum())
            while spent_ms < warmup_s * 1000:  # warmup() extends fast models to its own minimum only
                more = warmup(run, 20)[1]
                warm_ms = np.concatenate([warm_ms, more])
                spent_ms += float(more.sum())
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
            raise SessionError(f"reference workload {value} on {provider.ep_name}: could not run: {exc}") from exc
    per_iteration = float(np.median(warm_ms[len(warm_ms) // 2:]))
    return Reference(value, reference_id(value, path), run, per_iteration, handle.session)


@dataclass
class ReferenceCache:
    """One reference per (EP, options, device, threads, IO binding) for the whole session: built on
    first use, reused by every later item (its session stays warm), released by :meth:`close`.

    ``get`` returns None when the reference is off (*name* None or ``none``); a reference that cannot be
    built raises once and is remembered as broken (:attr:`errors`), so later items go on raw
    without retrying.
    """

    name: str | None = field(default_factory=lambda: default("reference"))
    #: the device lock a GPU reference is built under (:func:`build_reference`)
    lock: DeviceLock | None = None
    built: dict[tuple[object, ...], Reference] = field(default_factory=dict)
    errors: dict[tuple[object, ...], str] = field(default_factory=dict)

    def get(self, provider: ProviderSpec, device_id: int, intra_op_threads: int, iobinding: str) -> Reference | None:
        """The reference for these settings; None when off or broken before. Raises
        :class:`~pytest_aaco.measure.inference.SessionError` the first time it cannot be built."""
        if self.name is None or check_reference(self.name) is None:
            return None
        key = (provider.short, tuple(sorted((str(k), str(v)) for k, v in provider.options.items())),
               device_id, intra_op_threads, iobinding)
        if key in self.errors:
            return None
        if key not in self.built:
            try:
                self.built[key] = build_reference(self.name, provider, device_id, intra_op_threads, iobinding,
                                                  lock=self.lock)
            except SessionError as exc:
                self.errors[key] = str(exc)
                raise
        return self.built[key]

    def close(self) -> None:
        """Release the reference sessions."""
        self.built.clear()
