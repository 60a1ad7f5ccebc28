"""Measuring: InferenceSessions per execution provider, inputs, the timed loop, the reference workload,
interleaved blocks, placement, the device lock and the process's own memory."""
