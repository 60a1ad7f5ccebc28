"""The reference workload's and the placement check's session builds take the device lock, and the
lock name of an older pytest-aaco (gpu<N>.lock) is honoured (pytest_aaco/measure/gpulocks.py)."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path

import filelock
import pytest

from pytest_aaco.measure.inference import SessionError
from pytest_aaco.measure.providers import parse_provider
from pytest_aaco.samplers.visibility import PhysicalGpu


def _held(root: Path, name: str) -> bool:
    try:
        filelock.FileLock(str(root / name)).acquire(timeout=0).lock.release()
        return False
    except filelock.Timeout:
        return True


@pytest.fixture
def locks(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Lock files in *tmp_path*; GPU 1 of the CUDA EP is physical GPU ``GPU-x`` at NVML index 3."""
    from pytest_aaco.samplers import gpus

    monkeypatch.setattr("pytest_aaco.measure.devicelock.LOCK_ROOT", tmp_path)
    monkeypatch.setattr(gpus, "gpu_lock_name", lambda short, device: "gpu-GPU-x.lock")
    monkeypatch.setattr(gpus, "physical_gpu",
                        lambda short, device: PhysicalGpu("nvidia", logical_id=device, index=3, uuid="GPU-x"))
    return tmp_path


def test_the_reference_workload_is_built_under_the_device_lock(locks, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pytest_aaco.measure import reference_workload
    from pytest_aaco.measure.gpulocks import gpu_locks

    seen = {}

    def build(path, provider, device_id, threads):  # type: ignore[no-untyped-def]
        seen.update({name: _held(locks, name) for name in ("gpu-GPU-x.lock", "gpu3.lock", "host.lock")})
        raise SessionError("stop here")

    monkeypatch.setattr(reference_workload, "build_session", build)
    monkeypatch.setattr(reference_workload, "reference_path", lambda name: Path("ref.onnx"))
    with pytest.raises(SessionError):
        reference_workload.build_reference("mix", parse_provider("cuda"), 1, 0, "none", lock=gpu_locks)
    assert seen == {"gpu-GPU-x.lock": True, "gpu3.lock": True, "host.lock": False}
    assert not _held(locks, "gpu-GPU-x.lock") and not _held(locks, "gpu3.lock")  # released after


def test_the_placement_check_profiles_under_the_device_lock(locks, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pytest_aaco.measure import placement

    seen = {}

    def profiled(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.update({name: _held(locks, name) for name in ("gpu-GPU-x.lock", "gpu3.lock")})
        return []

    monkeypatch.setattr(placement, "profiled_events", profiled)
    assert placement.placement_report("m.onnx", parse_provider("cuda"), 1).total_nodes == 0
    assert seen == {"gpu-GPU-x.lock": True, "gpu3.lock": True}
    seen.clear()
    placement.placement_report("m.onnx", parse_provider("cpu"), 1)  # CPU EP: no device lock around it
    assert seen == {"gpu-GPU-x.lock": False, "gpu3.lock": False}


def test_an_older_versions_lock_is_waited_for(locks) -> None:  # type: ignore[no-untyped-def]
    """A process of an older pytest-aaco holds gpu3.lock (its name for the same GPU): a newer one waits."""
    from pytest_aaco.measure.gpulocks import gpu_locks, legacy_lock_name

    assert legacy_lock_name("cuda", 1, "gpu-GPU-x.lock") == "gpu3.lock"
    assert legacy_lock_name("cuda", 1, "gpu1.lock") is None  # no physical GPU known: already the old name
    taken = threading.Event()

    def older_version() -> None:  # another thread: filelock refuses a second instance in one thread
        with filelock.FileLock(str(locks / "gpu3.lock")):
            taken.set()
            time.sleep(0.5)

    thread = threading.Thread(target=older_version)
    thread.start()
    taken.wait(5)
    start = time.monotonic()
    with gpu_locks(parse_provider("cuda"), 1, "m[cuda]") as held:
        waited = time.monotonic() - start
        assert held and _held(locks, "gpu-GPU-x.lock")
    thread.join()
    assert waited >= 0.3


def test_a_gpu_without_an_index_takes_one_lock(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pytest_aaco.measure.gpulocks import gpu_locks
    from pytest_aaco.samplers import gpus

    monkeypatch.setattr("pytest_aaco.measure.devicelock.LOCK_ROOT", tmp_path)
    monkeypatch.setattr(gpus, "physical_gpu", lambda short, device: types.SimpleNamespace(index=None))
    with gpu_locks(parse_provider("cuda"), 0, "m[cuda]", name="gpu-GPU-y.lock"):
        assert sorted(p.name for p in tmp_path.glob("*.lock")) == ["gpu-GPU-y.lock"]
