"""CPU and GPU clock settings: what they are, what to warn about, what belongs in the fingerprint.

Sources (Linux sysfs):

- CPU: ``/sys/devices/system/cpu/cpufreq/policy*/scaling_{governor,driver,cur_freq,min_freq,max_freq}``
  (frequencies in kHz) and ``cpufreq/boost``; see the kernel's cpufreq user guide,
  https://docs.kernel.org/admin-guide/pm/cpufreq.html
- AMD GPU: ``/sys/class/drm/card*/device/power_dpm_force_performance_level`` (``auto``, ``low``,
  ``high``, ``manual``, ``profile_standard``, ``profile_min_sclk``, ``profile_min_mclk``,
  ``profile_peak``, ``perf_determinism``); see the amdgpu driver docs,
  https://docs.kernel.org/gpu/amdgpu/thermal.html and AMD SMI's "Performance levels and
  performance determinism", https://rocm.docs.amd.com/projects/amdsmi/en/develop/conceptual/perf-determinism.html
- NVIDIA GPU: NVML (P-state, persistence mode) when ``pynvml`` and a driver are present.

Containers and VMs often have no ``cpufreq`` folder: every field is then ``None`` and nothing
is warned about, since nothing can be said.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.samplers.base import Sampler, SamplerUnavailable
from pytest_aaco.samplers.visibility import DriRoots, amd_bus_id, drm_card_of, nvidia_handle

FIX_CPU_GOVERNOR = "sudo cpupower frequency-set -g performance"
FIX_AMD_PERF_LEVEL = (
    "rocm-smi --setperfdeterminism <SCLK_MHz> (or: amd-smi set --perf-determinism <SCLK_MHz>; "
    "rocm-smi --setperflevel high also pins the clocks)"
)


def _read_text(path: Path) -> str | None:
    """The stripped content of *path*, or None when it is missing or unreadable."""
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _khz_to_mhz(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return int(text) / 1000.0
    except ValueError:
        return None


def _cpufreq_policies(sysfs_root: Path) -> list[Path]:
    """Policy folders (one per frequency domain), falling back to per-CPU ``cpuN/cpufreq`` folders."""
    base = sysfs_root / "devices" / "system" / "cpu"
    policies = sorted((base / "cpufreq").glob("policy*"), key=lambda p: _natural_key(p.name))
    if policies:
        return policies
    return sorted(
        (p / "cpufreq" for p in base.glob("cpu[0-9]*") if (p / "cpufreq").is_dir()),
        key=lambda p: _natural_key(p.parent.name),
    )


def _natural_key(name: str) -> tuple[str, int]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1)


def _policy_name(path: Path) -> str:
    return path.name if path.name.startswith("policy") else path.parent.name


def read_cpu_frequencies_mhz(sysfs_root: str | Path = "/sys") -> list[float]:
    """Current frequency (MHz) of each cpufreq policy under *sysfs_root*; ``[]`` when there is none."""
    values = []
    for policy in _cpufreq_policies(Path(sysfs_root)):
        mhz = _khz_to_mhz(_read_text(policy / "scaling_cur_freq"))
        if mhz is not None:
            values.append(mhz)
    return values


def _amd_perf_levels(sysfs_root: Path) -> dict[str, str]:
    levels = {}
    for card in sorted((sysfs_root / "class" / "drm").glob("card*"), key=lambda p: _natural_key(p.name)):
        if "-" in card.name:  # connectors such as card0-DP-1
            continue
        level = _read_text(card / "device" / "power_dpm_force_performance_level")
        if level:
            levels[card.name] = level.lower()
    return levels


def _amd_runner_card(sysfs_root: Path, device_id: int, environ: Mapping[str, str] | None) -> str | None:
    """The DRM card (``card3``) of HIP device *device_id*: its PCI bus id from the KFD topology under
    the visibility variables (:func:`pytest_aaco.samplers.visibility.amd_bus_id`), then the
    ``class/drm/card<N>`` whose ``device`` is that PCI device. None when it cannot be told."""
    try:
        bus = amd_bus_id(device_id, environ, sysfs_root, DriRoots(sys=sysfs_root / "class" / "drm"))
    except ValueError:  # GpuMappingError: the id names no GPU here
        return None
    card = drm_card_of(bus, sysfs_root) if bus else None
    return card.name if card is not None else None


def _nvidia_state(device_id: int = 0) -> JSONDict:
    """P-state and persistence mode through NVML; ``{}`` when NVML is unavailable. Never raises."""
    try:
        import pynvml
    except Exception:  # noqa: BLE001 - ImportError, or a broken install
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return {}
    state: JSONDict = {}
    try:
        handle = nvidia_handle(pynvml, device_id).handle
        try:
            state["nvidia_perf_state"] = f"P{int(pynvml.nvmlDeviceGetPerformanceState(handle))}"
        except Exception:  # noqa: BLE001
            pass
        try:
            state["nvidia_persistence_mode"] = bool(pynvml.nvmlDeviceGetPersistenceMode(handle))
        except Exception:  # noqa: BLE001
            pass
    except Exception:  # noqa: BLE001
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return state


def read_clock_state(sysfs_root: str | Path = "/sys", query_nvml: bool = True, device_id: int = 0,
                     environ: Mapping[str, str] | None = None) -> JSONDict:
    """Clock settings of this host. Missing files give ``None`` fields; never raises.

    Returns a dict with:

    - ``cpu_governors``: ``{policy name: governor}``; ``cpu_governor``: the governor when all
      policies agree, ``"mixed"`` when they differ, None when there is no cpufreq.
    - ``cpu_driver``: scaling driver (``intel_pstate``, ``amd-pstate``, ``acpi-cpufreq``) or None.
    - ``cpu_boost``: True/False from ``cpufreq/boost`` or ``intel_pstate/no_turbo``, else None.
    - ``cpu_cur_mhz`` (mean over policies), ``cpu_min_mhz`` (lowest ``scaling_min_freq``),
      ``cpu_max_mhz`` (highest ``scaling_max_freq``), in MHz, or None.
    - ``gpu_perf_levels``: ``{card: level}`` from amdgpu sysfs; ``gpu_perf_card``: the card of HIP
      device *device_id* (the runner's GPU under ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``,
      mapped through its PCI bus id from the KFD topology), or None when that cannot be told;
      ``gpu_perf_level``: that card's level, else (no KFD topology) the first card's, or None.
    - ``nvidia_perf_state`` (``"P0"`` .. ``"P12"``, a current state, not a setting) and
      ``nvidia_persistence_mode`` when *query_nvml* and NVML answers, else None.
    """
    root = Path(sysfs_root)
    state: JSONDict = {
        "cpu_governors": {},
        "cpu_governor": None,
        "cpu_driver": None,
        "cpu_boost": None,
        "cpu_cur_mhz": None,
        "cpu_min_mhz": None,
        "cpu_max_mhz": None,
        "gpu_perf_levels": {},
        "gpu_perf_level": None,
        "gpu_perf_card": None,
        "nvidia_perf_state": None,
        "nvidia_persistence_mode": None,
    }
    try:
        policies = _cpufreq_policies(root)
        governors = {}
        drivers = set()
        cur: list[float] = []
        mins: list[float] = []
        maxs: list[float] = []
        for policy in policies:
            name = _policy_name(policy)
            governor = _read_text(policy / "scaling_governor")
            if governor:
                governors[name] = governor
            driver = _read_text(policy / "scaling_driver")
            if driver:
                drivers.add(driver)
            for values, fname in ((cur, "scaling_cur_freq"), (mins, "scaling_min_freq"), (maxs, "scaling_max_freq")):
                mhz = _khz_to_mhz(_read_text(policy / fname))
                if mhz is not None:
                    values.append(mhz)
        state["cpu_governors"] = governors
        distinct = set(governors.values())
        if len(distinct) == 1:
            state["cpu_governor"] = distinct.pop()
        elif distinct:
            state["cpu_governor"] = "mixed"
        if drivers:
            state["cpu_driver"] = ",".join(sorted(drivers))
        state["cpu_cur_mhz"] = math.fsum(cur) / len(cur) if cur else None
        state["cpu_min_mhz"] = min(mins) if mins else None
        state["cpu_max_mhz"] = max(maxs) if maxs else None

        boost = _read_text(root / "devices" / "system" / "cpu" / "cpufreq" / "boost")
        no_turbo = _read_text(root / "devices" / "system" / "cpu" / "intel_pstate" / "no_turbo")
        if boost in ("0", "1"):
            state["cpu_boost"] = boost == "1"
        elif no_turbo in ("0", "1"):
            state["cpu_boost"] = no_turbo == "0"

        levels = _amd_perf_levels(root)
        state["gpu_perf_levels"] = levels
        card = _amd_runner_card(root, device_id, environ) if levels else None
        if card is not None and card in levels:
            state["gpu_perf_card"], state["gpu_perf_level"] = card, levels[card]
        elif levels:
            state["gpu_perf_level"] = next(iter(levels.values()))
    except Exception:  # noqa: BLE001 - a lockbox reader must never fail the run
        pass
    if query_nvml:
        state.update(_nvidia_state(device_id))
    return state


def clock_warnings(state: Mapping[str, Any]) -> list[str]:
    """Human-readable warnings for clock settings that make timings unstable; ``[]`` when fine.

    *state* is :func:`read_clock_state`'s result. Each message names the setting, its value and
    the command that fixes it. Missing information (no cpufreq in a container) warns about nothing.
    """
    messages = []
    governors: dict[str, str] = state.get("cpu_governors") or {}
    off = {name: gov for name, gov in governors.items() if gov != "performance"}
    if off:
        found = sorted(set(off.values()))
        where = ", ".join(sorted(off, key=_natural_key)[:4]) + (" ..." if len(off) > 4 else "")
        messages.append(
            f"CPU frequency governor is {'/'.join(repr(g) for g in found)} on {len(off)} of "
            f"{len(governors)} cpufreq policies ({where}), not 'performance': CPU clocks follow the load, "
            f"so latencies drift between runs. Fix: {FIX_CPU_GOVERNOR}"
        )
    levels: dict[str, str] = state.get("gpu_perf_levels") or {}
    runner_card = state.get("gpu_perf_card")
    if runner_card in levels:  # the other GPUs of the host are other runners'
        levels = {runner_card: levels[runner_card]}
    auto = sorted((card for card, level in levels.items() if level == "auto"), key=_natural_key)
    if auto:
        messages.append(
            f"AMD GPU performance level is 'auto' on {', '.join(auto)}: GPU clocks follow the load, "
            f"so latencies vary. Fix: {FIX_AMD_PERF_LEVEL}"
        )
    return messages


def fingerprint_fields(state: JSONDict) -> JSONDict:
    """The stable clock *settings* from *state*, for the baseline fingerprint.

    ``{"cpu_governor", "cpu_driver", "cpu_boost", "gpu_perf_level"}``. Frequencies and the NVIDIA
    P-state are readings that change from second to second, so they are left out.
    """
    return {
        "cpu_governor": state.get("cpu_governor"),
        "cpu_driver": state.get("cpu_driver"),
        "cpu_boost": state.get("cpu_boost"),
        "gpu_perf_level": state.get("gpu_perf_level"),
    }


class ClockMonitor(Sampler):
    """Samples the CPU frequency (MHz) during the measured phase.

    Fields: ``cpu_freq_mhz`` (mean over cpufreq policies), ``cpu_freq_lowest_mhz`` and
    ``cpu_freq_highest_mhz`` (the slowest and fastest policy at that moment). The source is
    ``scaling_cur_freq`` under *sysfs_root*; where there is none (VMs, containers) it falls back
    to ``psutil.cpu_freq(percpu=True)``, which reads ``/proc/cpuinfo``. If neither gives a
    number, :meth:`setup` fails and :attr:`error` says so.
    """

    name = "clocks"

    def __init__(self, interval_s: float = 0.1, sysfs_root: str | Path = "/sys") -> None:
        super().__init__(interval_s)
        self.sysfs_root = Path(sysfs_root)
        self._use_psutil = False

    def setup(self) -> None:
        """Choose the source; raises SamplerUnavailable when no CPU frequency can be read."""
        if read_cpu_frequencies_mhz(self.sysfs_root):
            self._use_psutil = False
            return
        if self.sysfs_root == Path("/sys"):
            import psutil

            freqs = psutil.cpu_freq(percpu=True) or []
            if any(f.current > 0 for f in freqs):
                self._use_psutil = True
                return
        raise SamplerUnavailable(
            f"no CPU frequency source (no {self.sysfs_root}/devices/system/cpu/cpufreq, no psutil.cpu_freq)"
        )

    def _read(self) -> JSONDict:
        if self._use_psutil:
            import psutil

            values = [f.current for f in (psutil.cpu_freq(percpu=True) or []) if f.current > 0]
        else:
            values = read_cpu_frequencies_mhz(self.sysfs_root)
        if not values:
            return {"cpu_freq_mhz": None, "cpu_freq_lowest_mhz": None, "cpu_freq_highest_mhz": None}
        return {
            "cpu_freq_mhz": math.fsum(values) / len(values),
            "cpu_freq_lowest_mhz": min(values),
            "cpu_freq_highest_mhz": max(values),
        }
