"""Kernel tracers: what the GPU ran, as :class:`~pytest_aaco.tracers.base.KernelSpan` s.

One :class:`~pytest_aaco.tracers.base.Tracer` per vendor, chosen by the EP record
(:attr:`pytest_aaco.eps.Ep.tracer`, :func:`pytest_aaco.tracers.select.tracer_for`):

* :mod:`pytest_aaco.tracers.cupti`: NVIDIA's CUPTI, in this process, switched on around the runs it traces;
* :mod:`pytest_aaco.tracers.rocprof`: AMD's rocprofv3, which traces a whole process, around one child
  (``python -m pytest_aaco.measure.traced_child``), read by :mod:`pytest_aaco.tracers.rocprof_trace`.

Device-time blocks (:mod:`pytest_aaco.measure.device_time`) and the kernel pass
(:mod:`pytest_aaco.passes.kernels`) both come from these spans. Nothing here imports onnxruntime.
"""
