"""Both sides of ``--aaco-compare-python`` on the same CPUs (pytest_aaco/sidebyside/workers.py, ``shared_cpus``).

A process pair whose two processes the OS placed differently read as a change: on the 2-core VM, an A/A of a
5 us model with one intra-op thread read ``no regression`` in 5 or 6 of 10 runs unpinned and 9 or 10 of 10
with the workers and the coordinating thread on one CPU (docs/compare-python.md). These tests check the mechanism: which
CPUs, that the worker pins itself before it imports numpy, that the coordinating thread gets its CPUs back, and
that the bundle records it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.sidebyside.worker_client import WorkerSide
from pytest_aaco.sidebyside.workers import CPUS_VAR, WorkerFactory, pin_coordinator, shared_cpus, unpin_coordinator

affinity = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="the OS has no CPU affinity")


@pytest.mark.parametrize(("threads", "allowed", "expected"), [
    (1, {0, 1}, (1,)),  # the last allowed CPU
    (2, {0, 1, 2, 3}, (2, 3)),
    (1, {3, 5, 9}, (9,)),  # not 0..n-1: a container's cpuset
    (0, {0, 1}, None),  # ORT's default count uses every core: not pinned
    (2, {0, 1}, None),  # as many threads as CPUs: nothing to choose
    (1, {7}, None),
])
def test_the_shared_cpus_are_the_last_threads_of_the_allowed_ones(threads, allowed, expected):
    assert shared_cpus(threads, allowed) == expected


def _factory(threads: int, env: dict[str, str] | None = None) -> WorkerFactory:
    return WorkerFactory(sys.executable, Path("m.onnx"), parse_provider("cpu"), dict, intra_op_threads=threads,
                         env=env or {})


@affinity
def test_both_sides_get_the_same_cpus_in_their_environment():
    allowed = os.sched_getaffinity(0)
    a, b = _factory(1), _factory(1)
    if len(allowed) < 2:
        assert a.cpus is None and CPUS_VAR not in a.env
        return
    assert a.cpus == b.cpus == (max(allowed),)
    assert a.env[CPUS_VAR] == b.env[CPUS_VAR] == str(max(allowed))
    assert _factory(0).cpus is None and CPUS_VAR not in _factory(0).env
    assert _factory(1, {CPUS_VAR: "0"}).env[CPUS_VAR] == "0"  # the user's own choice is kept


@affinity
def test_the_worker_pins_itself_before_numpy_and_says_so():
    cpu = max(os.sched_getaffinity(0))
    with WorkerSide(sys.executable, env={CPUS_VAR: str(cpu)}) as worker:
        assert worker.info is not None and worker.info.cpus == (cpu,)
    with WorkerSide(sys.executable, env={CPUS_VAR: "100000"}) as worker:  # a CPU this machine lacks
        assert worker.info is not None and worker.info.cpus is None  # runs where the OS puts it
    with WorkerSide(sys.executable) as worker:
        assert worker.info is not None and worker.info.cpus is None


@affinity
def test_the_coordinating_thread_is_pinned_for_the_measurement_and_given_back():
    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("one CPU: nothing is pinned")
    factories = [_factory(1), _factory(1)]
    pin_coordinator(factories)
    try:
        assert os.sched_getaffinity(0) == {max(before)}
    finally:
        unpin_coordinator(factories)
    assert os.sched_getaffinity(0) == before
    unpin_coordinator(factories)  # twice: nothing more to give back
    assert os.sched_getaffinity(0) == before
    pin_coordinator([_factory(0)])  # not pinned: the thread keeps its CPUs
    assert os.sched_getaffinity(0) == before


@affinity
def test_the_bundle_records_the_cpus_of_both_sides_and_the_message_names_process_pairs(aaco_project):
    fast = [a for a in aaco_project.args() if a != "--aaco-no-bundle"]
    result = aaco_project.pytester.runpytest_subprocess(
        *fast, f"--aaco-compare-python={sys.executable}", "--aaco-compare-processes=2", "--aaco-threshold=90%",
        "--aaco-intra-op-threads=1", "--aaco-cold-start=0", timeout=300)
    assert result.ret == 0, result.stdout.str()
    record = json.loads(next(aaco_project.pytester.path.glob(".aaco/sessions/*/items/*.json")).read_text())
    sides = record["verdict"]["side_by_side"]["sides"]
    allowed = os.sched_getaffinity(0)
    expected = [max(allowed)] if len(allowed) > 1 else None
    assert sides["baseline"]["cpus"] == sides["candidate"]["cpus"] == expected
    # each session pair was a pair of worker processes, and the message says so
    assert re.search(r"on \d+ fresh process pairs", record["verdict"]["message"]), record["verdict"]["message"]
