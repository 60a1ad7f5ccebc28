"""A stand-in ``libamd_smi.so`` for the real ``amdsmi`` Python package from PyPI, so the plugin's AMD
code runs against AMD's own Python layer without an AMD GPU.

The ``amdsmi`` package (https://pypi.org/project/amdsmi/, built from https://github.com/ROCm/amdsmi,
``py-interface/``) is two layers: ``amdsmi_wrapper.py`` loads ``libamd_smi.so`` with ctypes (first
``$ROCM_HOME/lib`` or ``$ROCM_PATH/lib``, then the linker's path, see its ``find_smi_library``) and binds
every C symbol at import; ``amdsmi_interface.py`` calls them with ctypes structs and turns the result
into dicts, writing ``"N/A"`` for the sentinel values (``0xFFFF`` in ``amdsmi_get_gpu_activity`` and
``amdsmi_get_power_info``, ``UINT32_MAX`` through ``_validate_if_max_uint`` in
``amdsmi_get_clock_info``) and raising ``AmdSmiLibraryException`` for a status other than
``AMDSMI_STATUS_SUCCESS``.

:func:`build_library` builds, with the C compiler, a library that exports every symbol the downloaded
package's wrapper binds. The functions the plugin calls answer for the GPUs of a
:class:`Gpu` list: their answers are ctypes structs of the downloaded wrapper's own classes (so the
layout is that release's), filled with the values below, serialised to bytes and copied out by the C
function. Every other symbol returns ``AMDSMI_STATUS_NOT_SUPPORTED``. The struct bytes are made by
importing the package over a first, all-stub build of the library, in a child process.

Only the values are invented (plausible MI300X readings); the symbol list, the struct layouts, the
enum values and the Python layer are the package's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: statuses and sentinels, as amdsmi.h / amdsmi_wrapper.py define them
STATUS_SUCCESS, STATUS_INVAL, STATUS_NOT_SUPPORTED = 0, 1, 2
NA16, NA32 = 0xFFFF, 0xFFFFFFFF
SOCKET_BASE, HANDLE_BASE = 0x5000, 0x1000


class Unavailable(Exception):
    """The package could not be downloaded or the library not built; the message says why."""


@dataclass
class Gpu:
    """One GPU as the stand-in reports it. None means the call returns AMDSMI_STATUS_NOT_SUPPORTED;
    :data:`NA16` / :data:`NA32` are the sentinels the Python layer turns into ``"N/A"``."""

    bdf: tuple[int, int, int, int]  # domain, bus, device, function
    hip_id: int
    hsa_id: int
    drm_card: int
    drm_render: int
    hip_uuid: str  # ROCr's UUID, as ROCR_VISIBLE_DEVICES takes it
    uuid: str  # amdsmi_get_gpu_device_uuid
    market_name: str = "AMD Instinct MI300X"
    gfx_version: int = 0x942  # target_graphics_version: hex digits after "gfx"
    device_id: int = 0x74A1
    driver_version: str = "6.10.5"
    activity: tuple[int, int, int] = (37, 12, 0)  # gfx, umc, mm %
    #: socket_power (7.x), current_socket_power, average_socket_power (W); power_limit W
    power: tuple[int, int, int] = (412, 412, NA16)
    power_limit: int = 750
    temps_c: dict[int, int | None] = field(default_factory=lambda: {0: None, 1: 52, 2: 48})  # EDGE, HOTSPOT, VRAM
    #: clock type -> (current, min, max) MHz
    clocks: dict[str, tuple[int, int, int]] = field(
        default_factory=lambda: {"GFX": (2100, 500, 2100), "MEM": (1300, 900, 1300)})
    vram_mb: tuple[int, int] = (196592, 10240)  # total, used
    perf_level: str | None = "AMDSMI_DEV_PERF_LEVEL_MANUAL"
    #: (name, pid or None for the calling process, VRAM bytes)
    processes: list[tuple[str, int | None, int]] = field(default_factory=list)


# ---------------------------------------------------------------- package


def fetch_package(version: str, cache: Path) -> Path:
    """The ``amdsmi==<version>`` wheel from the package index, unpacked under *cache* (reused when
    already there). Raises :class:`Unavailable` when pip cannot download it."""
    target = cache / f"amdsmi-{version}"
    if (target / "amdsmi" / "amdsmi_wrapper.py").is_file():
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                           "--disable-pip-version-check", "-q", "-d", str(wheels), f"amdsmi=={version}"],
                          capture_output=True, text=True, timeout=300, check=False)
    found = sorted(wheels.glob(f"amdsmi-{version}-*.whl"))
    if done.returncode != 0 or not found:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(f"pip download amdsmi=={version} failed: {tail}")
    partial = cache / f".amdsmi-{version}-{os.getpid()}"
    with zipfile.ZipFile(found[0]) as archive:
        archive.extractall(partial)
    try:
        partial.rename(target)
    except OSError:  # another worker unpacked it first
        shutil.rmtree(partial, ignore_errors=True)
    return target


def bound_symbols(package: Path) -> list[str]:
    """The C symbols ``amdsmi_wrapper.py`` binds at import, in file order."""
    text = (package / "amdsmi" / "amdsmi_wrapper.py").read_text()
    return list(dict.fromkeys(re.findall(r"_libraries\['libamd_smi\.so'\]\.([A-Za-z_]\w*)", text)))


# ---------------------------------------------------------------- struct bytes (run in a child process)

_BLOB_SCRIPT = r"""
import ctypes, json, sys
from amdsmi import AmdSmiClkType, amdsmi_wrapper as w
gpus = json.loads(sys.stdin.read())

def struct(cls, **values):
    obj = cls()
    names = {f[0] for f in cls._fields_}
    for key, value in values.items():
        for name in key.split("|"):  # first field this release's layout has
            if name in names:
                setattr(obj, name, value.encode() if isinstance(value, str) else value)
                break
    return bytes(obj).hex()

out = {"gpus": [], "consts": {}}
for g in gpus:
    d, b, dev, fn = g["bdf"]
    bdf = w.amdsmi_bdf_t()
    parts = getattr(bdf, "struct_amdsmi_bdf_t", None) or bdf.fields  # the bit fields' name before ROCm 6.2
    parts.domain_number, parts.bus_number, parts.device_number, parts.function_number = d, b, dev, fn
    blobs = {"amdsmi_get_gpu_device_bdf": bytes(bdf).hex()}
    if hasattr(w, "amdsmi_enumeration_info_t"):
        blobs["amdsmi_get_gpu_enumeration_info"] = struct(
            w.amdsmi_enumeration_info_t, drm_render=g["drm_render"], drm_card=g["drm_card"],
            hsa_id=g["hsa_id"], hip_id=g["hip_id"], hip_uuid=g["hip_uuid"])
    blobs["amdsmi_get_gpu_asic_info"] = struct(
        w.amdsmi_asic_info_t, market_name=g["market_name"], vendor_id=0x1002, vendor_name="Advanced Micro Devices Inc.",
        subvendor_id=0x1002, device_id=g["device_id"], rev_id=0, asic_serial="5C3AF2B5A3B3F2FF",
        oam_id=g["hip_id"], num_of_compute_units=304, target_graphics_version=g["gfx_version"], subsystem_id=0x74A1)
    blobs["amdsmi_get_gpu_driver_info"] = struct(
        w.amdsmi_driver_info_t, driver_name="amdgpu", driver_version=g["driver_version"],
        driver_date="2015/01/01 00:00")
    gfx, umc, mm = g["activity"]
    blobs["amdsmi_get_gpu_activity"] = struct(w.amdsmi_engine_usage_t, gfx_activity=gfx, umc_activity=umc,
                                              mm_activity=mm)
    socket, current, average = g["power"]
    blobs["amdsmi_get_power_info"] = struct(
        w.amdsmi_power_info_t, socket_power=socket, current_socket_power=current, average_socket_power=average,
        gfx_voltage=NA16, soc_voltage=NA16, mem_voltage=NA16, power_limit=g["power_limit"])
    total, used = g["vram_mb"]
    blobs["amdsmi_get_gpu_vram_usage"] = struct(w.amdsmi_vram_usage_t, vram_total=total, vram_used=used)
    clocks = {}
    for kind, (cur, lo, hi) in g["clocks"].items():
        clocks[str(AmdSmiClkType[kind].value)] = struct(
            w.amdsmi_clk_info_t, **{"clk|cur_clk": cur, "min_clk": lo, "max_clk": hi, "clk_locked": 0,
                                    "clk_deep_sleep|sleep_clk": 0})
    procs, self_slots = [], []
    for i, (name, pid, vram) in enumerate(g["processes"]):
        p = w.amdsmi_proc_info_t()
        p.name, p.pid, p.mem = name.encode(), pid or 0, vram
        p.memory_usage.vram_mem, p.memory_usage.gtt_mem, p.memory_usage.cpu_mem = vram, 2 << 20, 0
        procs.append(bytes(p).hex())
        if pid is None:
            self_slots.append(i)
    perf = g["perf_level"]
    out["gpus"].append({"blobs": blobs, "clocks": clocks, "procs": procs, "self_slots": self_slots,
                        "perf": None if perf is None else getattr(w, perf),
                        "temps": {str(k): v for k, v in g["temps_c"].items()}})
out["consts"] = {"proc_size": ctypes.sizeof(w.amdsmi_proc_info_t), "pid_offset": w.amdsmi_proc_info_t.pid.offset}
print(json.dumps(out))
""".replace("NA16", str(NA16))


def _compile(source: str, library: Path) -> None:
    library.parent.mkdir(parents=True, exist_ok=True)
    c_file = library.with_suffix(".c")
    c_file.write_text(source)
    done = subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-std=gnu11", "-w", "-o", str(library), str(c_file)],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"gcc failed on {c_file}: {done.stderr.strip()[:500]}")


def _bytes(hex_text: str) -> str:
    return ",".join(f"0x{hex_text[i:i + 2]}" for i in range(0, len(hex_text), 2)) or "0"


_INCLUDES = "#include <stdint.h>\n#include <string.h>\n#include <unistd.h>"
_FIXED = """
static int gpu_of(void *handle) {
    uintptr_t v = (uintptr_t)handle;
    return (v > HANDLE_BASE && v <= HANDLE_BASE + NGPU) ? (int)(v - HANDLE_BASE - 1) : -1;
}
static int copy_out(const unsigned char *const *table, const unsigned *sizes, void *handle, void *out) {
    int g = gpu_of(handle);
    if (g < 0 || out == 0) return STATUS_INVAL;
    if (table[g] == 0) return STATUS_NOT_SUPPORTED;
    memcpy(out, table[g], sizes[g]);
    return STATUS_SUCCESS;
}
int amdsmi_init(uint64_t flags) { return STATUS_SUCCESS; }
int amdsmi_shut_down(void) { return STATUS_SUCCESS; }
int amdsmi_get_socket_handles(uint32_t *count, void **sockets) {
    if (count == 0) return STATUS_INVAL;
    if (sockets == 0) { *count = NGPU; return STATUS_SUCCESS; }
    uint32_t n = *count < NGPU ? *count : NGPU;
    for (uint32_t i = 0; i < n; i++) sockets[i] = (void *)(uintptr_t)(SOCKET_BASE + i + 1);
    *count = n;
    return STATUS_SUCCESS;
}
int amdsmi_get_processor_handles(void *socket, uint32_t *count, void **handles) {
    /* one GPU per socket, as amd-smi lists MI300X; a NULL socket means all GPUs */
    uintptr_t s = (uintptr_t)socket;
    uint32_t first = 0, total = NGPU;
    if (count == 0) return STATUS_INVAL;
    if (s != 0) {
        if (s <= SOCKET_BASE || s > SOCKET_BASE + NGPU) return STATUS_INVAL;
        first = (uint32_t)(s - SOCKET_BASE - 1); total = 1;
    }
    if (handles == 0) { *count = total; return STATUS_SUCCESS; }
    uint32_t n = *count < total ? *count : total;
    for (uint32_t i = 0; i < n; i++) handles[i] = (void *)(uintptr_t)(HANDLE_BASE + first + i + 1);
    *count = n;
    return STATUS_SUCCESS;
}
int amdsmi_get_gpu_device_uuid(void *handle, uint32_t *length, char *uuid) {
    int g = gpu_of(handle);
    if (g < 0 || length == 0 || uuid == 0) return STATUS_INVAL;
    size_t n = strlen(UUIDS[g]);
    if (*length <= n) return STATUS_INVAL;
    memcpy(uuid, UUIDS[g], n + 1);
    *length = (uint32_t)n;
    return STATUS_SUCCESS;
}
int amdsmi_get_clock_info(void *handle, uint32_t type, void *out) {
    int g = gpu_of(handle);
    if (g < 0 || out == 0) return STATUS_INVAL;
    for (unsigned i = 0; i < NCLOCK; i++)
        if (CLOCK_GPU[i] == g && CLOCK_TYPE[i] == type) {
            memcpy(out, CLOCK_BLOB[i], CLOCK_SIZE);
            return STATUS_SUCCESS;
        }
    return STATUS_NOT_SUPPORTED;
}
int amdsmi_get_temp_metric(void *handle, uint32_t sensor, uint32_t metric, int64_t *out) {
    int g = gpu_of(handle);
    if (g < 0 || out == 0) return STATUS_INVAL;
    if (metric != 0) return STATUS_NOT_SUPPORTED; /* AMDSMI_TEMP_CURRENT only */
    for (unsigned i = 0; i < NTEMP; i++)
        if (TEMP_GPU[i] == g && TEMP_SENSOR[i] == sensor) { *out = TEMP_C[i]; return STATUS_SUCCESS; }
    return STATUS_NOT_SUPPORTED;
}
int amdsmi_get_gpu_perf_level(void *handle, uint32_t *out) {
    int g = gpu_of(handle);
    if (g < 0 || out == 0) return STATUS_INVAL;
    if (PERF[g] < 0) return STATUS_NOT_SUPPORTED;
    *out = (uint32_t)PERF[g];
    return STATUS_SUCCESS;
}
int amdsmi_get_gpu_process_list(void *handle, uint32_t *max, unsigned char *list) {
    int g = gpu_of(handle);
    if (g < 0 || max == 0) return STATUS_INVAL;
    uint32_t n = PROC_COUNT[g];
    if (list == 0) { *max = n; return STATUS_SUCCESS; }
    if (*max < n) n = *max;
    memcpy(list, PROCS[g], (size_t)n * PROC_SIZE);
    for (uint32_t i = 0; i < n; i++)
        if (PROC_SELF[g] & (1u << i)) {
            uint32_t pid = (uint32_t)getpid();
            memcpy(list + i * PROC_SIZE + PID_OFFSET, &pid, 4);
        }
    *max = n;
    return STATUS_SUCCESS;
}
"""

_STRUCT_OUT = ("amdsmi_get_gpu_device_bdf", "amdsmi_get_gpu_enumeration_info", "amdsmi_get_gpu_asic_info",
               "amdsmi_get_gpu_driver_info", "amdsmi_get_gpu_activity", "amdsmi_get_power_info",
               "amdsmi_get_gpu_vram_usage")


def _source(symbols: list[str], gpus: list[Gpu], facts: dict | None) -> str:
    """C source: every symbol in *symbols*; with *facts* (the child's struct bytes) the plugin's calls
    answer for *gpus*, without it every symbol returns AMDSMI_STATUS_NOT_SUPPORTED."""
    head = [f"#define {k} {v}" for k, v in (
        ("STATUS_SUCCESS", STATUS_SUCCESS), ("STATUS_INVAL", STATUS_INVAL),
        ("STATUS_NOT_SUPPORTED", STATUS_NOT_SUPPORTED), ("NGPU", len(gpus)), ("HANDLE_BASE", HANDLE_BASE),
        ("SOCKET_BASE", SOCKET_BASE))]
    if facts is None:
        return "\n".join(f"int {s}() {{ return {STATUS_NOT_SUPPORTED}; }}" for s in symbols) + "\n"
    per_gpu = facts["gpus"]
    lines = [_INCLUDES, *head]
    lines.append("static const char *const UUIDS[NGPU] = {" + ",".join(json.dumps(g.uuid) for g in gpus) + "};")
    defined = {"amdsmi_init", "amdsmi_shut_down", "amdsmi_get_socket_handles", "amdsmi_get_processor_handles",
               "amdsmi_get_gpu_device_uuid", "amdsmi_get_clock_info", "amdsmi_get_temp_metric",
               "amdsmi_get_gpu_perf_level", "amdsmi_get_gpu_process_list"}
    bodies = []
    for name in _STRUCT_OUT:
        if name not in symbols:
            continue
        refs, sizes = [], []
        for i, g in enumerate(per_gpu):
            blob = g["blobs"].get(name)
            if blob is None:
                refs.append("0")
                sizes.append("0")
                continue
            lines.append(f"static const unsigned char {name}_{i}[] = {{{_bytes(blob)}}};")
            refs.append(f"{name}_{i}")
            sizes.append(str(len(blob) // 2))
        lines.append(f"static const unsigned char *const {name}_T[NGPU] = {{{','.join(refs)}}};")
        lines.append(f"static const unsigned {name}_S[NGPU] = {{{','.join(sizes)}}};")
        bodies.append(f"int {name}(void *h, void *out) {{ return copy_out({name}_T, {name}_S, h, out); }}")
        defined.add(name)
    clock_rows = [(i, int(kind), blob) for i, g in enumerate(per_gpu) for kind, blob in g["clocks"].items()]
    for n, (_, _, blob) in enumerate(clock_rows):
        lines.append(f"static const unsigned char CLOCK_{n}[] = {{{_bytes(blob)}}};")
    lines.append(f"#define NCLOCK {len(clock_rows)}")
    lines.append(f"#define CLOCK_SIZE {len(clock_rows[0][2]) // 2 if clock_rows else 0}")
    lines.append("static const int CLOCK_GPU[] = {" + (",".join(str(r[0]) for r in clock_rows) or "0") + "};")
    lines.append("static const unsigned CLOCK_TYPE[] = {" + (",".join(str(r[1]) for r in clock_rows) or "0") + "};")
    lines.append("static const unsigned char *const CLOCK_BLOB[] = {"
                 + (",".join(f"CLOCK_{n}" for n in range(len(clock_rows))) or "0") + "};")
    temp_rows = [(i, int(s), v) for i, g in enumerate(per_gpu) for s, v in g["temps"].items() if v is not None]
    lines.append(f"#define NTEMP {len(temp_rows)}")
    lines.append("static const int TEMP_GPU[] = {" + (",".join(str(r[0]) for r in temp_rows) or "0") + "};")
    lines.append("static const unsigned TEMP_SENSOR[] = {" + (",".join(str(r[1]) for r in temp_rows) or "0") + "};")
    lines.append("static const int64_t TEMP_C[] = {" + (",".join(str(r[2]) for r in temp_rows) or "0") + "};")
    lines.append("static const int PERF[NGPU] = {"
                 + ",".join("-1" if g["perf"] is None else str(g["perf"]) for g in per_gpu) + "};")
    lines.append(f"#define PROC_SIZE {facts['consts']['proc_size']}")
    lines.append(f"#define PID_OFFSET {facts['consts']['pid_offset']}")
    for i, g in enumerate(per_gpu):
        lines.append(f"static const unsigned char PROCS_{i}[] = {{{_bytes(''.join(g['procs']))}}};")
    lines.append("static const unsigned char *const PROCS[NGPU] = {"
                 + ",".join(f"PROCS_{i}" for i in range(len(per_gpu))) + "};")
    lines.append("static const uint32_t PROC_COUNT[NGPU] = {" + ",".join(str(len(g["procs"])) for g in per_gpu) + "};")
    lines.append("static const uint32_t PROC_SELF[NGPU] = {"
                 + ",".join(str(sum(1 << s for s in g["self_slots"])) for g in per_gpu) + "};")
    stubs = [f"int {s}() {{ return STATUS_NOT_SUPPORTED; }}" for s in symbols if s not in defined]
    return "\n".join([*lines, _FIXED, *bodies, *stubs]) + "\n"


def build_library(package: Path, gpus: list[Gpu], root: Path, symbols: list[str] | None = None,
                  rocm_version: str = "7.0.2") -> Path:
    """Build ``<root>/lib/libamd_smi.so`` answering for *gpus* with *package*'s struct layouts, and
    ``<root>/.info/version`` (*rocm_version*); returns *root*, to be passed as ``ROCM_PATH``.

    *symbols* (default: every symbol *package* binds) is what the library exports: pass an older
    package's list to make an older ROCm's library. Raises :class:`Unavailable` without gcc."""
    if shutil.which("gcc") is None:
        raise Unavailable("gcc not found: cannot build the stand-in libamd_smi.so")
    exported = bound_symbols(package) if symbols is None else symbols
    stage = root / "stage1"
    # the struct bytes come from the package's own classes, imported over an all-stub build of its symbols
    _compile(_source(bound_symbols(package), gpus, None), stage / "lib" / "libamd_smi.so")
    env = {**os.environ, "PYTHONPATH": str(package), "ROCM_PATH": str(stage)}
    env.pop("ROCM_HOME", None)
    done = subprocess.run([sys.executable, "-c", _BLOB_SCRIPT], input=json.dumps([asdict(g) for g in gpus]),
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"struct bytes from {package.name} failed: {done.stderr.strip()[-2000:]}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    _compile(_source(exported, gpus, facts), root / "lib" / "libamd_smi.so")
    (root / ".info").mkdir(parents=True, exist_ok=True)
    (root / ".info" / "version").write_text(f"{rocm_version}-56\n")
    return root


def child_env(package: Path, rocm_root: Path, **extra: str) -> dict[str, str]:
    """Environment for a child process that imports *package*'s amdsmi over the stand-in at *rocm_root*
    and this checkout's pytest_aaco; the visibility variables are cleared unless given in *extra*."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                        "ROCM_HOME", "PYTHONPATH")}
    checkout = Path(__file__).resolve().parent.parent
    env.update(PYTHONPATH=os.pathsep.join([str(package), str(checkout)]), ROCM_PATH=str(rocm_root), **extra)
    return env
