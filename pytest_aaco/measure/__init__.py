"""Measuring: InferenceSessions per execution provider, inputs, the timed loop, the reference workload,
interleaved blocks, placement, the device lock and the process's own memory; and what a run ran on:
the environment lockbox (:mod:`pytest_aaco.measure.environment`) and the project's commit
(:mod:`pytest_aaco.measure.commit`)."""
