"""AMD GPU telemetry: the ``amdsmi`` Python API first, ``rocm-smi --json`` as the fallback.

Documented shapes this module parses (recorded examples live in ``tests/data/amd/``):

- amdsmi Python API, "AMD SMI Python API reference",
  https://rocm.docs.amd.com/projects/amdsmi/en/latest/reference/amdsmi-py-api.html
  (the same text as ``py-interface/README.md`` in https://github.com/ROCm/amdsmi):

  * ``amdsmi_get_gpu_activity(h)`` -> ``{"gfx_activity": %, "umc_activity": %, "mm_activity": %}``,
    ``"N/A"`` where unsupported;
  * ``amdsmi_get_power_info(h)`` -> ``{"socket_power", "current_socket_power" (MI300+),
    "average_socket_power" (Navi, MI200 and earlier), "gfx_voltage", "soc_voltage", "mem_voltage",
    "power_limit"}`` in W / mV, ``"N/A"`` where unsupported (older releases have only
    ``average_socket_power``);
  * ``amdsmi_get_temp_metric(h, AmdSmiTemperatureType.EDGE|HOTSPOT, AmdSmiTemperatureMetric.CURRENT)``
    -> int. The Python reference says "millidegrees Celsius"; the C struct docs and ``amd-smi``
    print it as °C. :func:`temperature_c` accepts both (values above 500 are taken as m°C);
  * ``amdsmi_get_clock_info(h, AmdSmiClkType.GFX|MEM)`` -> ``{"clk", "min_clk", "max_clk",
    "clk_locked", "clk_deep_sleep"}`` in MHz (``"cur_clk"`` instead of ``"clk"`` before ROCm 6.1);
  * ``amdsmi_get_gpu_vram_usage(h)`` -> ``{"vram_total", "vram_used"}`` in MB
    (``amdsmi_vram_usage_t``: "In MB");
  * ``amdsmi_get_gpu_perf_level(h)`` -> the enum name, e.g. ``"AMDSMI_DEV_PERF_LEVEL_AUTO"``.

- ``rocm-smi --showuse --showpower --showtemp --showclocks --showmemuse --showmeminfo vram
  --showperflevel --json`` (ROCm SMI CLI, https://rocm.docs.amd.com/projects/rocm_smi_lib/en/latest/;
  keys as printed by ``rocm_smi.py``): ``{"card0": {"GPU use (%)": "12",
  "Average Graphics Package Power (W)": "57.0" or "Current Socket Graphics Package Power (W)": ...,
  "Temperature (Sensor edge) (C)": "36.0", "Temperature (Sensor junction) (C)": "39.0",
  "sclk clock speed:": "(1700Mhz)", "mclk clock speed:": "(1600Mhz)",
  "GPU Memory Allocated (VRAM%)": "3", "VRAM Total Used Memory (B)": "...",
  "Performance Level": "auto", ...}}``; values are strings, ``"N/A"`` where unsupported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from pytest_aaco.jsonio import JSONDict, JSONValue
from pytest_aaco.samplers.base import Sampler, SamplerUnavailable, describe_exception
from pytest_aaco.samplers.rocm_install import rocm_version
from pytest_aaco.samplers.visibility import (
    AMD,
    PhysicalGpu,
    amd_bus_id,
    amd_handle,
    amd_physical,
    mask_text,
    normalize_bus_id,
)

BYTES_PER_MB = 1024 * 1024
#: amdsmi marks unsupported struct members with UINT32_MAX / UINT64_MAX / UINT16_MAX
_UNSUPPORTED_INTS = frozenset({0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})
#: amdsmi_dev_perf_level_t, in enum order (amdsmi.h), for bindings that return the integer
_PERF_LEVELS = (
    "auto",
    "low",
    "high",
    "manual",
    "stable_std",
    "stable_peak",
    "stable_min_mclk",
    "stable_min_sclk",
    "determinism",
)
#: the first ROCm major version without rocm-smi: "As of ROCm 10.0, ROCm SMI is no longer included in TheRock
#: builds" (https://rocm.docs.amd.com/projects/rocm_smi_lib/en/docs-10.1.0/index.html); amdsmi only from there on
ROCM_SMI_GONE_IN = 10
#: rocm-smi is a Python program that starts in 0.1-0.5 s: never call it more often than this
ROCM_SMI_MIN_INTERVAL_S = 1.0
ROCM_SMI_TIMEOUT_S = 5.0
ROCM_SMI_FLAGS = (
    "--showuse",
    "--showpower",
    "--showtemp",
    "--showclocks",
    "--showmemuse",
    "--showmeminfo",
    "vram",
    "--showperflevel",
    "--json",
)

FIELDS = (
    "gpu_util_percent",
    "power_w",
    "temp_edge_c",
    "temp_junction_c",
    "gfx_clock_mhz",
    "mem_clock_mhz",
    "vram_used_mb",
    "perf_level",
)


def _number(value: object) -> float | None:
    """A float from an int/float/numeric string (``"57.0"``, ``"(1700Mhz)"``, ``"12%"``); None for N/A."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, int) and value in _UNSUPPORTED_INTS:
            return None
        return float(value)
    if isinstance(value, Mapping) and "value" in value:  # amd-smi CLI style {"value": 12, "unit": "%"}
        return _number(value["value"])
    match = re.search(r"-?\d+(?:\.\d+)?", str(value))
    return float(match.group()) if match else None


def temperature_c(value: object) -> float | None:
    """°C from an amdsmi temperature that may be in °C or in millidegrees (> 500 means m°C)."""
    number = _number(value)
    if number is None:
        return None
    return number / 1000.0 if abs(number) > 500 else number


def normalize_perf_level(value: object) -> str | None:
    """``"AMDSMI_DEV_PERF_LEVEL_AUTO"``, ``"auto"``, ``0`` or an enum member -> ``"auto"``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return _PERF_LEVELS[value] if 0 <= value < len(_PERF_LEVELS) else "unknown"
    name = getattr(value, "name", value)
    text = str(name).strip()
    if not text or text.upper() == "N/A":
        return None
    for prefix in ("AMDSMI_DEV_PERF_LEVEL_", "RSMI_DEV_PERF_LEVEL_", "AmdSmiDevPerfLevel."):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text.lower()


def parse_amdsmi_readings(raw: Mapping[str, Any]) -> JSONDict:
    """Turn the return values of the amdsmi calls into sampler fields.

    *raw* maps call -> returned value (missing or None where the call failed):
    ``"activity"`` (``amdsmi_get_gpu_activity``), ``"power_info"`` (``amdsmi_get_power_info``),
    ``"temp_edge"`` / ``"temp_hotspot"`` (``amdsmi_get_temp_metric`` EDGE / HOTSPOT, CURRENT),
    ``"clock_gfx"`` / ``"clock_mem"`` (``amdsmi_get_clock_info`` GFX / MEM),
    ``"vram_usage"`` (``amdsmi_get_gpu_vram_usage``), ``"perf_level"`` (``amdsmi_get_gpu_perf_level``).

    Returns the :data:`FIELDS` with units %, W, °C, °C, MHz, MHz, MB and a lower-case level name;
    ``None`` for what is missing or ``"N/A"``.
    """
    activity = raw.get("activity") or {}
    power = raw.get("power_info") or {}
    clock_gfx = raw.get("clock_gfx") or {}
    clock_mem = raw.get("clock_mem") or {}
    vram = raw.get("vram_usage") or {}

    power_w = None
    for key in ("socket_power", "current_socket_power", "average_socket_power"):
        power_w = _number(power.get(key))
        if power_w is not None:
            break

    def clock(info: Mapping[str, object]) -> float | None:
        value = _number(info.get("clk"))
        return value if value is not None else _number(info.get("cur_clk"))

    return {
        "gpu_util_percent": _number(activity.get("gfx_activity")),
        "power_w": power_w,
        "temp_edge_c": temperature_c(raw.get("temp_edge")),
        "temp_junction_c": temperature_c(raw.get("temp_hotspot")),
        "gfx_clock_mhz": clock(clock_gfx),
        "mem_clock_mhz": clock(clock_mem),
        "vram_used_mb": _number(vram.get("vram_used")),
        "perf_level": normalize_perf_level(raw.get("perf_level")),
    }


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object in *text*; rocm-smi may print warnings before and after it."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("rocm-smi printed no JSON object")
    data = json.loads(text[start : end + 1])
    if not isinstance(data, dict):
        raise ValueError("rocm-smi JSON is not an object")
    return data


def _card_entry(data: Mapping[str, object], device_id: int) -> Mapping[str, JSONValue]:
    cards = {k: v for k, v in data.items() if re.fullmatch(r"card\d+", k) and isinstance(v, Mapping)}
    if not cards:
        raise ValueError("rocm-smi JSON has no 'cardN' entry")
    key = f"card{device_id}"
    if key in cards:
        return cards[key]
    if len(cards) == 1:  # `rocm-smi -d N` prints only the selected card
        return next(iter(cards.values()))
    ordered = sorted(cards, key=lambda k: int(k[4:]))
    if device_id < len(ordered):
        return cards[ordered[device_id]]
    raise ValueError(f"rocm-smi JSON has no card for device {device_id} (cards: {', '.join(ordered)})")


def parse_rocm_smi_json(text: str, device_id: int) -> JSONDict:
    """Sampler fields from ``rocm-smi ... --json`` output for GPU *device_id*.

    Picks ``"card<device_id>"``, or the only card when ``-d`` selected one, or the
    *device_id*-th card in index order. Power prefers the instantaneous
    ``"Current Socket Graphics Package Power (W)"`` (MI300) over
    ``"Average Graphics Package Power (W)"``. VRAM in MB comes from
    ``"VRAM Total Used Memory (B)"`` (``--showmeminfo vram``); ``vram_used_percent`` from
    ``"GPU Memory Allocated (VRAM%)"`` (``--showmemuse``) is added when present.

    Raises ValueError when *text* holds no JSON object or no matching card.
    """
    card = _card_entry(_json_object(text), device_id)

    def get(*keys: str) -> float | None:
        for key in keys:
            for candidate in card:
                if candidate.lower() == key.lower():
                    value = _number(card[candidate])
                    if value is not None:
                        return value
        return None

    used_bytes = get("VRAM Total Used Memory (B)")
    level = next((v for k, v in card.items() if k.lower() == "performance level"), None)
    fields: JSONDict = {
        "gpu_util_percent": get("GPU use (%)"),
        "power_w": get("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)"),
        "temp_edge_c": get("Temperature (Sensor edge) (C)"),
        "temp_junction_c": get("Temperature (Sensor junction) (C)"),
        "gfx_clock_mhz": get("sclk clock speed:"),
        "mem_clock_mhz": get("mclk clock speed:"),
        "vram_used_mb": None if used_bytes is None else used_bytes / BYTES_PER_MB,
        "perf_level": normalize_perf_level(level),
    }
    vram_percent = get("GPU Memory Allocated (VRAM%)", "GPU memory use (%)")
    if vram_percent is not None:
        fields["vram_used_percent"] = vram_percent
    return fields


def rocm_major(version_file: str | None = None, environ: Mapping[str, str] | None = None) -> int | None:
    """The installed ROCm major version (``10.1.0-...`` -> 10) from :func:`rocm_version` (*version_file*,
    else ``$ROCM_PATH/.info/version``, else :data:`pytest_aaco.samplers.rocm_install.ROCM_VERSION_FILE`);
    None when it cannot be read."""
    head = (rocm_version(version_file, environ) or "").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def rocm_smi_path(version_file: str | None = None) -> tuple[str | None, str]:
    """``(path of rocm-smi, "")``, or ``(None, why not)``: on ROCm >= :data:`ROCM_SMI_GONE_IN` (TheRock
    builds) rocm-smi is never called, even when an old copy is on PATH; elsewhere it is looked up on PATH."""
    major = rocm_major(version_file)
    if major is not None and major >= ROCM_SMI_GONE_IN:
        return None, f"rocm-smi not used on ROCm {major} (TheRock builds ship amd-smi only: install amdsmi)"
    path = shutil.which("rocm-smi")
    return path, ("" if path else "rocm-smi not found on PATH")


def rocm_smi_bus_ids(text: str) -> dict[int, str]:
    """rocm-smi device index -> PCI bus id (lower case) from ``rocm-smi --showbus --json``.

    ``rocm_smi.py`` (https://github.com/ROCm/rocm_smi_lib, ``python_smi_tools/rocm_smi.py``, ``showBus``
    and ``getBus``) prints ``{"card<index>": {"PCI Bus": "0000:C4:00.0"}}``, the index being the one
    ``-d`` takes, the id upper case (``'{:04X}:{:02X}:{:02X}.{:0X}'``). Raises ValueError when *text*
    holds no JSON object."""
    found = {}
    for key, card in _json_object(text).items():
        if re.fullmatch(r"card\d+", key) and isinstance(card, Mapping):
            bus = next((normalize_bus_id(v) for k, v in card.items() if k.lower() == "pci bus"), None)
            if bus:
                found[int(key[4:])] = bus
    return found


#: where the KFD topology and the DRM cards are read (tests point it at a fake tree)
SYSFS_ROOT = "/sys"


def rocm_smi_device(path: str, device_id: int, environ: Mapping[str, str] | None = None,
                    sysfs_root: str | None = None) -> int:
    """The rocm-smi index (what ``rocm-smi -d`` takes) of HIP device *device_id*.

    rocm-smi numbers every GPU of the host and ignores ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``,
    so the logical id is mapped to a PCI bus id through the KFD topology
    (:func:`pytest_aaco.samplers.visibility.amd_bus_id`) and looked up in ``rocm-smi --showbus --json``.
    Without the KFD topology and without a visibility variable the id is used as it is. Raises
    RuntimeError (one line, naming the variable) when the GPU cannot be told apart under a mask, or
    :class:`~pytest_aaco.samplers.visibility.GpuMappingError` when the id names no GPU."""
    env = os.environ if environ is None else environ
    mask = mask_text(AMD, env)
    sysfs_root = sysfs_root or SYSFS_ROOT
    bus = amd_bus_id(device_id, env, sysfs_root)
    if bus is None:
        if mask:
            raise RuntimeError(f"rocm-smi ignores {mask} and the KFD topology ({sysfs_root}/class/kfd) cannot be read"
                               f" to find device {device_id}'s PCI bus id: install amdsmi, or unset the variable")
        return int(device_id)
    completed = subprocess.run([path, "--showbus", "--json"], capture_output=True, text=True,
                               timeout=ROCM_SMI_TIMEOUT_S, check=False)
    buses = rocm_smi_bus_ids(completed.stdout)
    hits = [index for index, found in buses.items() if found == bus]
    if len(hits) != 1:
        raise RuntimeError(f"device {device_id} is PCI {bus} ({mask or 'no visibility variable set'}), which"
                           f" rocm-smi --showbus lists {len(hits)} times among {len(buses)} GPU(s)")
    return hits[0]


def rocm_version_text(environ: Mapping[str, str] | None = None) -> str | None:
    """The installed ROCm version without its build number (``6.2.4`` from ``6.2.4-120``), from
    :func:`rocm_version`; None when it cannot be read or is not dotted digits."""
    text = (rocm_version(environ=environ) or "").split("-", 1)[0]
    return text if re.fullmatch(r"\d+(\.\d+)*", text) else None


def _amdsmi_package_version() -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python >= 3.8 has it
        return None
    try:
        return version("amdsmi")
    except PackageNotFoundError:
        return None


#: where ROCm puts the amdsmi Python package that matches its libamd_smi.so
AMDSMI_ROCM_PACKAGE = "/opt/rocm/share/amd_smi"


def amdsmi_mismatch_message(exc: AttributeError, environ: Mapping[str, str] | None = None) -> str:
    """One line for ``import amdsmi`` failing with AttributeError: the package binds every
    ``libamd_smi.so`` symbol it knows at import (``amdsmi_wrapper.py``), so a package newer than the
    installed ROCm fails on the first symbol that ROCm's library lacks (ctypes: ``<library>: undefined
    symbol: <name>``). Names the package version, the library, the ROCm version and the fix."""
    text = str(exc)
    match = re.search(r"^(?P<lib>.*?):\s*undefined symbol:\s*(?P<sym>\w+)", text)
    package = _amdsmi_package_version()
    rocm = rocm_version_text(environ)
    what = f"amdsmi {package}" if package else "the amdsmi Python package"
    if match:
        lacks = f"{match['lib']} lacks {match['sym']}"
    else:
        lacks = f"libamd_smi.so lacks a symbol it binds ({text[:160]})"
    pin = f"pip install 'amdsmi=={'.'.join(rocm.split('.')[:2])}.*'" if rocm else "pip install amdsmi==<ROCm version>"
    return (f"{what} does not match the installed ROCm {rocm or '(version unknown)'}: {lacks}, which it binds at"
            f" import (the package is newer than the ROCm library). Install the amdsmi of this ROCm:"
            f" pip install {AMDSMI_ROCM_PACKAGE} (or {pin})")


#: the ImportError of this process's failed ``import amdsmi`` (:func:`import_amdsmi`), or None
_AMDSMI_FAILURE: list[ImportError] = []


def reset_amdsmi_import() -> None:
    """Forget a failed ``import amdsmi``, so the next :func:`import_amdsmi` tries again (for tests that
    put a stand-in package in ``sys.modules``, or after installing the package in a running process)."""
    _AMDSMI_FAILURE.clear()


def import_amdsmi() -> ModuleType:
    """Import ``amdsmi``, turning every way its import fails into ImportError with a one-line cause.

    Without ROCm the package raises KeyError (it prints why ``libamd_smi.so`` could not be loaded, then
    looks the library up in an empty dict) or OSError; a package newer than the installed ROCm raises
    AttributeError on the first library symbol that ROCm lacks (:func:`amdsmi_mismatch_message`). What
    the package prints while importing is kept off stdout and used in the message. A failed import is
    tried once per process: later calls raise the same ImportError at once (the package loads its
    library and binds every symbol at each try; :func:`reset_amdsmi_import` forgets it)."""
    if _AMDSMI_FAILURE:
        raise _AMDSMI_FAILURE[0]
    try:
        return _import_amdsmi()
    except ImportError as exc:
        _AMDSMI_FAILURE.append(exc)
        raise


def _import_amdsmi() -> ModuleType:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            import amdsmi
    except AttributeError as exc:
        raise ImportError(amdsmi_mismatch_message(exc)) from exc
    except (ImportError, KeyError, OSError) as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "amdsmi":
            raise ImportError("amdsmi not installed") from exc
        said = " ".join(line.strip() for line in printed.getvalue().splitlines() if line.strip())
        cause = describe_exception(exc) + (f": {said[:240]}" if said else "")
        raise ImportError(f"amdsmi unusable ({cause})") from exc
    return amdsmi


def amdsmi_problem() -> str | None:
    """Why amdsmi gives no AMD GPU here, in one line, or None when it imports and initialises: the import's
    cause (:func:`import_amdsmi`: not installed, ``libamd_smi.so`` not loadable with the loader's words, a package
    newer than the ROCm library) or ``amdsmi_init`` failing (no driver, no permission on ``/dev/kfd``). For
    ``aaco info``, which otherwise only says that no GPU was found. Never raises."""
    try:
        amdsmi = import_amdsmi()
    except ImportError as exc:
        return str(exc) or describe_exception(exc)
    try:
        amdsmi.amdsmi_init()
    except Exception as exc:  # noqa: BLE001 - amdsmi's own AmdSmiLibraryException, or anything of a broken install
        return f"amdsmi_init failed: {describe_exception(exc)}"
    try:
        amdsmi.amdsmi_shut_down()
    except Exception:  # noqa: BLE001, S110 - initialised and shut down is all this asks
        pass
    return None


class AMDGPUSampler(Sampler):
    """AMD GPU utilisation, power, temperatures, clocks, VRAM and performance level.

    Fields (see :data:`FIELDS`): ``gpu_util_percent`` (%), ``power_w`` (W), ``temp_edge_c`` and
    ``temp_junction_c`` (°C; edge is not reported on MI300), ``gfx_clock_mhz`` and
    ``mem_clock_mhz`` (MHz), ``vram_used_mb`` (MB), ``perf_level`` (``"auto"``, ``"high"`` ...).
    A field the device does not report is None.

    Backends, in order: the ``amdsmi`` Python API (in-process, ~1 ms a reading) and the
    ``rocm-smi --json`` CLI (a process start per reading, so its interval is raised to at least
    :data:`ROCM_SMI_MIN_INTERVAL_S`). With neither, :attr:`error` is
    ``"no AMD GPU telemetry (amdsmi ...; rocm-smi not found on PATH)"`` and nothing is sampled.
    :attr:`backend` says which one is used.
    """

    name = "amd_gpu"

    def __init__(self, device_id: int = 0, interval_s: float = 0.1) -> None:
        super().__init__(interval_s)
        self.device_id = int(device_id)
        self.backend: str | None = None
        self._amdsmi: ModuleType | None = None  # amdsmi, between setup and teardown
        self._handle: object = None
        self._rocm_smi: str | None = None
        #: rocm-smi's index of this GPU (:func:`rocm_smi_device`), found at setup
        self._smi_index = self.device_id

    def setup(self) -> None:
        """Open amdsmi, else check rocm-smi; raises SamplerUnavailable naming both causes when neither works."""
        reasons = []
        try:
            self._open_amdsmi()
            self.backend = "amdsmi"
            return
        except Exception as exc:  # noqa: BLE001
            reasons.append(str(exc) if isinstance(exc, ImportError) else f"amdsmi: {describe_exception(exc)}")
        path, why_not = rocm_smi_path()
        if path is None:
            reasons.append(why_not)
        else:
            try:
                self._smi_index = rocm_smi_device(path, self.device_id)
                parse_rocm_smi_json(self._run_rocm_smi(path), self._smi_index)
                self._rocm_smi = path
                self.backend = "rocm-smi"
                self.interval_s = max(self.interval_s, ROCM_SMI_MIN_INTERVAL_S)
                return
            except Exception as exc:  # noqa: BLE001
                reasons.append(f"rocm-smi failed: {describe_exception(exc)}")
        raise SamplerUnavailable(f"no AMD GPU telemetry ({'; '.join(reasons)})")

    def teardown(self) -> None:
        """Shut amdsmi down if it was opened."""
        if self._amdsmi is not None:
            amdsmi, self._amdsmi, self._handle = self._amdsmi, None, None
            amdsmi.amdsmi_shut_down()

    def _open_amdsmi(self) -> None:
        amdsmi = import_amdsmi()
        amdsmi.amdsmi_init()  # default flag: AmdSmiInitFlags.INIT_AMD_GPUS
        try:
            handle = amd_handle(amdsmi, self.device_id).handle
        except BaseException:
            amdsmi.amdsmi_shut_down()
            raise
        self._amdsmi, self._handle = amdsmi, handle

    def _run_rocm_smi(self, path: str) -> str:
        completed = subprocess.run(
            [path, "-d", str(self._smi_index), *ROCM_SMI_FLAGS],
            capture_output=True,
            text=True,
            timeout=ROCM_SMI_TIMEOUT_S,
            check=False,
        )
        if completed.returncode != 0 and "{" not in completed.stdout:
            raise RuntimeError(f"exit {completed.returncode}: {completed.stderr.strip()[:200]}")
        return completed.stdout

    def _read(self) -> JSONDict:
        if self.backend == "rocm-smi" and self._rocm_smi is not None:
            return parse_rocm_smi_json(self._run_rocm_smi(self._rocm_smi), self._smi_index)
        assert self._amdsmi is not None, "read before setup"
        return parse_amdsmi_readings(amdsmi_raw_readings(self._amdsmi, self._handle))


def amdsmi_raw_readings(amdsmi: ModuleType, handle: object) -> JSONDict:
    """Call each amdsmi query once; a call that raises gives None for its key (see
    :func:`parse_amdsmi_readings` for the keys)."""
    # enums a binding may lack: then the queries that need them raise and read as None
    temp_type: Any = getattr(amdsmi, "AmdSmiTemperatureType", None)
    temp_metric: Any = getattr(amdsmi, "AmdSmiTemperatureMetric", None)
    clk_type: Any = getattr(amdsmi, "AmdSmiClkType", None)
    hotspot = getattr(temp_type, "HOTSPOT", None) or getattr(temp_type, "JUNCTION", None)
    calls = {
        "activity": lambda: amdsmi.amdsmi_get_gpu_activity(handle),
        "power_info": lambda: amdsmi.amdsmi_get_power_info(handle),
        "temp_edge": lambda: amdsmi.amdsmi_get_temp_metric(handle, temp_type.EDGE, temp_metric.CURRENT),
        "temp_hotspot": lambda: amdsmi.amdsmi_get_temp_metric(handle, hotspot, temp_metric.CURRENT),
        "clock_gfx": lambda: amdsmi.amdsmi_get_clock_info(handle, clk_type.GFX),
        "clock_mem": lambda: amdsmi.amdsmi_get_clock_info(handle, clk_type.MEM),
        "vram_usage": lambda: amdsmi.amdsmi_get_gpu_vram_usage(handle),
        "perf_level": lambda: amdsmi.amdsmi_get_gpu_perf_level(handle),
    }
    raw: JSONDict = {}
    for key, call in calls.items():
        try:
            raw[key] = call()
        except Exception:  # noqa: BLE001 - one unsupported query must not drop the others
            raw[key] = None
    return raw


def amd_physical_gpu(device_id: int = 0) -> PhysicalGpu | None:
    """The physical GPU of HIP device *device_id* (:func:`pytest_aaco.samplers.visibility.amd_physical`,
    honouring ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` and a container's render nodes).
    Raises ImportError without amdsmi and
    :class:`~pytest_aaco.samplers.visibility.GpuMappingError` when the id names no usable GPU."""
    amdsmi = import_amdsmi()
    amdsmi.amdsmi_init()
    try:
        return amd_physical(amdsmi, device_id)
    finally:
        amdsmi.amdsmi_shut_down()


def amd_gpu_identity(device_id: int = 0) -> JSONDict:
    """``{"name", "driver", "runtime"}`` of AMD GPU *device_id*; None values when unknown.

    Name from ``amdsmi_get_gpu_asic_info()["market_name"]``, driver from
    ``amdsmi_get_gpu_driver_info()["driver_version"]``, falling back to
    ``rocm-smi --showproductname --showdriverversion --json``; runtime is ``"ROCm <version>"`` from
    ``/opt/rocm/.info/version``. Never raises.
    """
    identity: JSONDict = {"name": None, "driver": None, "runtime": None}
    try:
        amdsmi = import_amdsmi()
        amdsmi.amdsmi_init()
        try:
            handle = amd_handle(amdsmi, device_id).handle
            try:
                identity["name"] = amdsmi.amdsmi_get_gpu_asic_info(handle).get("market_name")
            except Exception:  # noqa: BLE001
                pass
            try:
                identity["driver"] = amdsmi.amdsmi_get_gpu_driver_info(handle).get("driver_version")
            except Exception:  # noqa: BLE001
                pass
        finally:
            amdsmi.amdsmi_shut_down()
    except Exception:  # noqa: BLE001
        pass
    if identity["name"] is None or identity["driver"] is None:
        path, _ = rocm_smi_path()
        if path is not None:
            try:
                index = rocm_smi_device(path, device_id)
                out = subprocess.run(
                    [path, "-d", str(index), "--showproductname", "--showdriverversion", "--json"],
                    capture_output=True,
                    text=True,
                    timeout=ROCM_SMI_TIMEOUT_S,
                    check=False,
                ).stdout
                data = _json_object(out)
                card = _card_entry(data, index)
                lowered = {k.lower(): v for k, v in card.items()}
                identity["name"] = identity["name"] or lowered.get("card series") or lowered.get("card model")
                system = {k.lower(): v for k, v in (data.get("system") or {}).items()}
                identity["driver"] = identity["driver"] or system.get("driver version")
            except Exception:  # noqa: BLE001
                pass
    try:
        with open("/opt/rocm/.info/version", encoding="ascii") as handle_file:
            version = handle_file.read().strip()
        if version:
            identity["runtime"] = f"ROCm {version}"
    except OSError:
        pass
    return identity


__all__ = [
    "AMDGPUSampler",
    "FIELDS",
    "amd_gpu_identity",
    "amdsmi_raw_readings",
    "import_amdsmi",
    "normalize_perf_level",
    "parse_amdsmi_readings",
    "parse_rocm_smi_json",
    "reset_amdsmi_import",
    "rocm_version",
    "temperature_c",
]
