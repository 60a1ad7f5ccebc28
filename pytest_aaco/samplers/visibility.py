"""Which physical GPU an execution provider's device id names, under the visibility variables.

An EP's ``device_id`` is a *logical* id: a position among the GPUs the CUDA or HIP runtime lets this
process see. NVML and amdsmi enumerate *physical* GPUs and ignore those variables, so
``nvmlDeviceGetHandleByIndex(device_id)`` or ``amdsmi_get_processor_handles()[device_id]`` may read
another GPU. This module maps a logical id to the library's handle; it takes the library module as
an argument (never imports one), so tests pass fakes.

Sources:

* ``CUDA_VISIBLE_DEVICES``: a comma-separated list of indices, ``GPU-<uuid>`` (a unique prefix is
  enough) or ``MIG-<uuid>`` entries; the logical id is a position in the list, and CUDA ignores
  the list from its first entry that names no device (CUDA C Programming Guide, "CUDA Environment
  Variables", https://docs.nvidia.com/cuda/cuda-c-programming-guide/#cuda-environment-variables).
  CUDA numbers devices fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; NVML numbers them in
  PCI bus order (NVML API, ``nvmlDeviceGetHandleByIndex``: "the order in which NVML enumerates
  devices has no guarantees of consistency between reboots", in practice PCI order), so an index is
  trusted only with ``PCI_BUS_ID`` or when every GPU is the same model (CUDA breaks ties by PCI bus
  id). ``nvmlDeviceGetHandleByUUID`` takes both ``GPU-`` and ``MIG-`` UUIDs;
  ``nvmlDeviceGetDeviceHandleFromMigDeviceHandle`` gives a MIG instance's parent GPU.
* ``ROCR_VISIBLE_DEVICES`` (indices or ``GPU-<uuid>``, applied by the ROCr runtime first) and
  ``HIP_VISIBLE_DEVICES`` (indices into what ROCr left) (ROCm docs, "GPU isolation techniques",
  https://rocm.docs.amd.com/en/latest/conceptual/gpu-isolation.html).
  ``amdsmi_get_gpu_enumeration_info(handle)`` (ROCm >= 6.4) gives ``drm_card``, ``drm_render``,
  ``hsa_id``, ``hip_id`` and ``hip_uuid``; older amdsmi has ``amdsmi_get_gpu_device_bdf`` and
  ``amdsmi_get_gpu_device_uuid`` only (amdsmi Python API reference,
  https://rocm.docs.amd.com/projects/amdsmi/en/latest/reference/amdsmi-py-api.html).
* A container given one GPU (``--device=/dev/dri/renderD130``) sees that GPU's render node only,
  while amdsmi, reading sysfs, may list every GPU of the host: the GPUs the runtime can use are the
  ones whose ``/dev/dri/renderD<N>`` exists here (``/sys/class/drm/renderD<N>/device`` names its PCI
  bus id).

A mapping that may be wrong (indices in another order, no enumeration info with several GPUs) is
made anyway and its :attr:`GpuMapping.ambiguous` says why, for a warning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

_T = TypeVar("_T")

NVIDIA, AMD = "nvidia", "amd"
#: the variables that pick the visible GPUs, per vendor: layers in the order the runtimes apply them,
#: each layer the first of its variables that is set. On AMD the ROCr layer comes first, then HIP's,
#: which also honours ``CUDA_VISIBLE_DEVICES`` and ``GPU_DEVICE_ORDINAL`` (ROCm "GPU isolation
#: techniques"); their precedence among themselves is not documented: set only one of them.
MASK_VARIABLES: dict[str, tuple[tuple[str, ...], ...]] = {
    NVIDIA: (("CUDA_VISIBLE_DEVICES",),),
    AMD: (("ROCR_VISIBLE_DEVICES",), ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")),
}
_INDEX = re.compile(r"^\d+$")


class GpuMappingError(ValueError):
    """A logical device id names no visible GPU; the message names the variable and its value."""


@dataclass(frozen=True)
class GpuMapping:
    """A logical device id's physical GPU: the library's *handle*, its *index* among the library's
    handles, how it was found (*mapped_by*: ``uuid``, ``mig``, ``index``, ``enumeration``,
    ``pci-order``, ``only-gpu``) and, when the mapping may be wrong, why (*ambiguous*)."""

    handle: object
    index: int | None
    mapped_by: str
    ambiguous: str | None = None
    #: a MIG instance's own UUID (its parent GPU is :attr:`handle`)
    mig_uuid: str | None = None


@dataclass(frozen=True)
class PhysicalGpu:
    """The physical GPU an item ran on, as recorded in its record and bundle.

    ``uuid`` (``GPU-...``/``MIG-...`` on NVIDIA, ROCr's ``GPU-...`` on AMD), ``pci_bus_id``
    (``0000:3b:00.0``), ``name`` (``NVIDIA H100 80GB HBM3``), ``clocks`` (``gfx_clock_mhz``,
    ``mem_clock_mhz``, ``max_gfx_clock_mhz``: MHz when read), ``logical_id`` (the EP's device id),
    ``index`` (NVML index / amdsmi handle position), ``mapped_by`` and ``ambiguous`` as in
    :class:`GpuMapping`.
    """

    vendor: str
    logical_id: int
    index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    mapped_by: str | None = None
    ambiguous: str | None = None
    clocks: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What names this GPU on the host: the UUID, else the PCI bus id, else ``index<N>``, else
        ``logical<N>`` (nothing could be read)."""
        if self.uuid:
            return self.uuid
        if self.pci_bus_id:
            return self.pci_bus_id
        return f"index{self.index}" if self.index is not None else f"logical{self.logical_id}"

    @property
    def short(self) -> str:
        """A short label for tables: ``0:GPU-8a1b2c3d`` (logical id, then the key's first 12 characters)."""
        return f"{self.logical_id}:{self.key[:12]}"

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"vendor": self.vendor, "logical_id": self.logical_id, "index": self.index,
                          "uuid": self.uuid, "pci_bus_id": self.pci_bus_id, "name": self.name,
                          "mapped_by": self.mapped_by, "clocks": dict(self.clocks)}
        if self.ambiguous:
            data["ambiguous"] = self.ambiguous
        return data


# ---------------------------------------------------------------- masks


def parse_mask(text: str | None) -> list[str] | None:
    """The entries of a visibility variable: None when unset, ``[]`` for an empty value (no GPU),
    else the stripped comma-separated entries up to the first empty one (CUDA ignores the rest)."""
    if text is None:
        return None
    entries = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            break
        entries.append(part)
    return entries


def _pick(name: str, mask: list[str], position: int) -> str:
    if position >= len(mask):
        listed = ",".join(mask) or "(empty)"
        raise GpuMappingError(f"{name}={listed} makes {len(mask)} GPU(s) visible, so device id {position}"
                              f" names none; pass --aaco-device-id below {len(mask)} or widen {name}")
    return mask[position]


def _layers(vendor: str, env: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """``(variable, entries)`` of each layer of :data:`MASK_VARIABLES` that has a variable set, in the
    order the runtime applies them."""
    found = []
    for layer in MASK_VARIABLES.get(vendor, ()):
        name = next((n for n in layer if n in env), None)
        mask = parse_mask(env.get(name)) if name is not None else None
        if name is not None and mask is not None:
            found.append((name, mask))
    return found


def mask_entry(vendor: str, logical_id: int, environ: Mapping[str, str] | None = None) -> int | str:
    """What logical device *logical_id* is, after the vendor's visibility variables: an index among
    all the GPUs the runtime could see without them (int), or a UUID (``GPU-...``, ``MIG-...``).

    AMD applies ``HIP_VISIBLE_DEVICES`` (or ``CUDA_VISIBLE_DEVICES``, ``GPU_DEVICE_ORDINAL``) over what
    ``ROCR_VISIBLE_DEVICES`` left. Raises
    :class:`GpuMappingError` when a variable lists fewer GPUs than the id needs.
    """
    env = os.environ if environ is None else environ
    entry: int | str = int(logical_id)
    for name, mask in reversed(_layers(vendor, env)):  # the last applied is read first
        if isinstance(entry, str):  # a UUID already names the GPU
            break
        picked = _pick(name, mask, entry)
        entry = int(picked) if _INDEX.match(picked) else picked
    return entry


def visible_count(vendor: str, environ: Mapping[str, str] | None = None) -> int | None:
    """GPUs the visibility variables leave (the innermost one's length), or None when none is set."""
    env = os.environ if environ is None else environ
    layers = _layers(vendor, env)
    return len(layers[-1][1]) if layers else None


def mask_text(vendor: str, environ: Mapping[str, str] | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES=2,3`` style text of the vendor's variables that are set (``""`` if none)."""
    env = os.environ if environ is None else environ
    return " ".join(f"{name}={env[name]}" for name, _ in _layers(vendor, env))


# ---------------------------------------------------------------- NVIDIA


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_uuid(nvml: ModuleType, handle: object) -> str | None:
    try:
        return _text(nvml.nvmlDeviceGetUUID(handle))
    except Exception:  # noqa: BLE001
        return None


def nvidia_handle(nvml: ModuleType, logical_id: int, environ: Mapping[str, str] | None = None) -> GpuMapping:
    """The NVML handle of CUDA device *logical_id* (NVML initialised by the caller).

    ``CUDA_VISIBLE_DEVICES`` entries that are UUIDs are looked up by UUID (a unique prefix is
    enough, as CUDA takes); ``MIG-`` ones give the parent GPU's handle and keep the MIG UUID.
    Indices are NVML indices; the mapping is marked ambiguous when CUDA may order the GPUs
    differently (``CUDA_DEVICE_ORDER`` not ``PCI_BUS_ID`` and GPUs of several models). Raises
    :class:`GpuMappingError` when the id names no GPU.
    """
    env = os.environ if environ is None else environ
    entry = mask_entry(NVIDIA, logical_id, env)
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001 - a binding without the call: trust the index
        count = entry + 1 if isinstance(entry, int) else 0
    if isinstance(entry, str):
        if entry.upper().startswith("MIG-"):
            mig = nvml.nvmlDeviceGetHandleByUUID(entry)
            parent = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
            return GpuMapping(parent, _nvml_index(nvml, parent), "mig", mig_uuid=entry)
        matches = [i for i in range(count)
                   if (_nvml_uuid(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) or "").lower().startswith(entry.lower())]
        if len(matches) != 1:
            raise GpuMappingError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches {len(matches)} of the {count}"
                                  " GPU(s) NVML lists (nvidia-smi -L shows their UUIDs)")
        return GpuMapping(nvml.nvmlDeviceGetHandleByIndex(matches[0]), matches[0], "uuid")
    if entry >= count:
        if count == 1:  # a container given one GPU: NVML sees only it
            return GpuMapping(nvml.nvmlDeviceGetHandleByIndex(0), 0, "only-gpu",
                              f"CUDA device {entry} but NVML sees one GPU: took that one")
        raise GpuMappingError(f"device id {logical_id} is NVML index {entry}, but NVML lists {count} GPU(s)")
    ambiguous = None
    if env.get("CUDA_DEVICE_ORDER", "").strip().upper() != "PCI_BUS_ID" and count > 1:
        names = {_text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)}
        if len(names) > 1:
            ambiguous = (f"GPUs of {len(names)} models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers the"
                         " fastest first, NVML in PCI order, so device ids may name other GPUs here;"
                         " set CUDA_DEVICE_ORDER=PCI_BUS_ID")
    return GpuMapping(nvml.nvmlDeviceGetHandleByIndex(entry), entry, "index", ambiguous)


def _nvml_index(nvml: ModuleType, handle: object) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetIndex(handle))
    except Exception:  # noqa: BLE001
        return None


def nvidia_physical(nvml: ModuleType, logical_id: int, environ: Mapping[str, str] | None = None) -> PhysicalGpu:
    """:class:`PhysicalGpu` of CUDA device *logical_id*: UUID (the MIG UUID for a MIG instance), PCI
    bus id, name and the current SM / memory and maximum SM clocks (MHz). Raises
    :class:`GpuMappingError` as :func:`nvidia_handle`; a fact NVML does not give is None."""
    mapping = nvidia_handle(nvml, logical_id, environ)
    h = mapping.handle

    def read(call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        except Exception:  # noqa: BLE001 - NotSupported on some GPUs: that fact stays None
            return None

    pci = read(lambda: nvml.nvmlDeviceGetPciInfo(h))
    bus = getattr(pci, "busId", None) if pci is not None else None
    clocks = {"gfx_clock_mhz": read(lambda: float(nvml.nvmlDeviceGetClockInfo(h, 1))),
              "mem_clock_mhz": read(lambda: float(nvml.nvmlDeviceGetClockInfo(h, 2))),
              "max_gfx_clock_mhz": read(lambda: float(nvml.nvmlDeviceGetMaxClockInfo(h, 1)))}
    name = read(lambda: _text(nvml.nvmlDeviceGetName(h)))
    return PhysicalGpu(NVIDIA, int(logical_id), mapping.index, mapping.mig_uuid or _nvml_uuid(nvml, h),
                       _text(bus).lower() if bus else None, name, mapping.mapped_by, mapping.ambiguous,
                       {k: v for k, v in clocks.items() if v is not None})


# ---------------------------------------------------------------- AMD


@dataclass(frozen=True)
class DriRoots:
    """Where render nodes are looked up: ``/dev/dri`` (the ones this container may open) and
    ``/sys/class/drm`` (every render node's PCI device). Tests point both at temporary folders."""

    dev: Path = Path("/dev/dri")
    sys: Path = Path("/sys/class/drm")

    def open_render_minors(self) -> set[int] | None:
        """Minor numbers of ``renderD<N>`` nodes in :attr:`dev`, or None when it cannot be listed."""
        try:
            names = [p.name for p in self.dev.iterdir()]
        except OSError:
            return None
        return {int(n[7:]) for n in names if re.fullmatch(r"renderD\d+", n)}

    def render_bdfs(self, minors: set[int]) -> set[str]:
        """PCI bus ids (lower case) of the render nodes *minors*, from sysfs; the unreadable ones left out."""
        found = set()
        for minor in minors:
            try:
                found.add(os.path.basename(os.path.realpath(self.sys / f"renderD{minor}" / "device")).lower())
            except OSError:
                continue
        return {b for b in found if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]", b)}


def _amd_facts(amdsmi: ModuleType, handle: object) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        info = amdsmi.amdsmi_get_gpu_enumeration_info(handle)
        if isinstance(info, Mapping):
            facts.update({k: info.get(k) for k in ("drm_render", "hsa_id", "hip_id", "hip_uuid")})
    except Exception:  # noqa: BLE001 - ROCm < 6.4: no enumeration info
        pass
    try:
        facts["bdf"] = str(amdsmi.amdsmi_get_gpu_device_bdf(handle)).lower()
    except Exception:  # noqa: BLE001
        facts["bdf"] = None
    return facts


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _same_uuid(a: object, b: str) -> bool:
    def bare(text: str) -> str:
        text = text.strip().lower()
        return text[4:] if text.startswith("gpu-") else text
    return isinstance(a, str) and bool(a) and bare(a) == bare(b)


def amd_handle(amdsmi: ModuleType, logical_id: int, environ: Mapping[str, str] | None = None,
               roots: DriRoots | None = None) -> GpuMapping:
    """The amdsmi handle of HIP device *logical_id* (amdsmi initialised by the caller).

    The GPUs the runtime can use are the handles whose render node is open here (all of them
    when ``/dev/dri`` lists none of theirs), in HIP order: ``hip_id`` (then ``hsa_id``) from the
    enumeration info, else PCI bus id order. ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``
    (:func:`mask_entry`) then pick one by position or by ``hip_uuid``. Marked ambiguous when
    several GPUs are mapped without enumeration info. Raises :class:`GpuMappingError` when the id
    names no GPU.
    """
    env = os.environ if environ is None else environ
    roots = roots or DriRoots()
    handles = list(amdsmi.amdsmi_get_processor_handles())
    if not handles:
        raise GpuMappingError("amdsmi lists no GPU")
    facts = [_amd_facts(amdsmi, h) for h in handles]
    enumerated = all(_number(f.get("hip_id")) is not None or _number(f.get("hsa_id")) is not None for f in facts)
    usable = list(range(len(handles)))
    minors = roots.open_render_minors()
    if minors:
        if enumerated and all(_number(f.get("drm_render")) is not None for f in facts):
            opened = [i for i in usable if _number(facts[i]["drm_render"]) in minors]
        else:
            bdfs = roots.render_bdfs(minors)
            opened = [i for i in usable if facts[i].get("bdf") in bdfs]
        usable = opened or usable
    if enumerated:
        usable.sort(key=lambda i: (_number(facts[i].get("hip_id")) if _number(facts[i].get("hip_id")) is not None
                                   else 1 << 30, _number(facts[i].get("hsa_id")) or 0))
    else:
        usable.sort(key=lambda i: str(facts[i].get("bdf") or ""))
    entry = mask_entry(AMD, logical_id, env)
    how = "enumeration" if enumerated else "pci-order"
    if isinstance(entry, str):
        hit = [i for i in usable if _same_uuid(facts[i].get("hip_uuid"), entry)]
        if len(hit) != 1:
            raise GpuMappingError(f"visible-devices entry {entry!r} matches {len(hit)} of the GPUs amdsmi lists"
                                  " (amd-smi list shows each GPU's UUID; amdsmi < ROCm 6.4 cannot match UUIDs)")
        return GpuMapping(handles[hit[0]], hit[0], "uuid")
    if entry >= len(usable):
        raise GpuMappingError(f"device id {logical_id} is GPU {entry} of the runtime's, but amdsmi sees {len(usable)}"
                              f" usable GPU(s) here ({mask_text(AMD, env) or 'no visibility variable set'})")
    ambiguous = None
    if not enumerated and len(usable) > 1:
        ambiguous = (f"amdsmi gives no enumeration info (ROCm < 6.4): device {logical_id} taken as GPU {entry}"
                     f" in PCI bus order of {len(usable)}; upgrade amdsmi to map by hip_id")
    elif not enumerated and len(handles) > 1 and minors is None:
        ambiguous = "no /dev/dri to tell which of amdsmi's GPUs this container may use"
    return GpuMapping(handles[usable[entry]], usable[entry], how if len(handles) > 1 else "only-gpu", ambiguous)


def amd_physical(amdsmi: ModuleType, logical_id: int, environ: Mapping[str, str] | None = None,
                 roots: DriRoots | None = None) -> PhysicalGpu:
    """:class:`PhysicalGpu` of HIP device *logical_id*: ROCr UUID (``hip_uuid``, else
    ``amdsmi_get_gpu_device_uuid``), PCI bus id, market name and the current / maximum GFX and
    current memory clocks (MHz). Raises :class:`GpuMappingError` as :func:`amd_handle`."""
    mapping = amd_handle(amdsmi, logical_id, environ, roots)
    h = mapping.handle
    facts = _amd_facts(amdsmi, h)

    def read(call: Callable[[], _T]) -> _T | None:
        try:
            return call()
        except Exception:  # noqa: BLE001
            return None

    uuid = facts.get("hip_uuid") or read(lambda: str(amdsmi.amdsmi_get_gpu_device_uuid(h)))
    name = read(lambda: amdsmi.amdsmi_get_gpu_asic_info(h).get("market_name"))
    clk_type: Any = getattr(amdsmi, "AmdSmiClkType", None)
    gfx = read(lambda: amdsmi.amdsmi_get_clock_info(h, clk_type.GFX)) or {}
    mem = read(lambda: amdsmi.amdsmi_get_clock_info(h, clk_type.MEM)) or {}
    clocks = {"gfx_clock_mhz": _number(gfx.get("clk", gfx.get("cur_clk"))),
              "mem_clock_mhz": _number(mem.get("clk", mem.get("cur_clk"))),
              "max_gfx_clock_mhz": _number(gfx.get("max_clk"))}
    return PhysicalGpu(AMD, int(logical_id), mapping.index, str(uuid) if uuid else None, facts.get("bdf"),
                       name, mapping.mapped_by, mapping.ambiguous,
                       {k: float(v) for k, v in clocks.items() if v is not None})


# ---------------------------------------------------------------- AMD without amdsmi: KFD topology


@dataclass(frozen=True)
class KfdGpu:
    """A GPU node of the KFD topology (``/sys/class/kfd/kfd/topology/nodes/<node>``): its PCI bus id
    (``0000:c4:00.0``, from the ``domain`` and ``location_id`` properties), ROCr's UUID (``GPU-`` and the
    ``unique_id`` property as 16 hex digits; None when 0) and its render node's minor number."""

    node: int
    pci_bus_id: str
    uuid: str | None
    render_minor: int | None


def _kfd_properties(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


def kfd_gpus(sysfs_root: str | Path = "/sys") -> list[KfdGpu] | None:
    """The GPU nodes of the KFD topology in node order, which is the order ROCr numbers its GPU agents
    (and so ``ROCR_VISIBLE_DEVICES`` indices and HIP device ids without a mask); None when the topology
    cannot be read (no amdgpu driver, or sysfs hidden).

    Source: the amdkfd driver's topology files (``drivers/gpu/drm/amd/amdkfd/kfd_topology.c``,
    ``node_show``): ``properties`` holds ``<name> <decimal value>`` lines; a node with ``gpu_id`` 0
    (or ``simd_count`` 0) is a CPU. ``location_id`` is the PCI bus/device/function
    (``bus << 8 | device << 3 | function``), ``domain`` the PCI domain."""
    base = Path(sysfs_root) / "class" / "kfd" / "kfd" / "topology" / "nodes"
    try:
        nodes = sorted((int(p.name), p) for p in base.iterdir() if p.name.isdigit())
    except OSError:
        return None
    found = []
    for number, path in nodes:
        try:
            props = _kfd_properties((path / "properties").read_text(encoding="ascii", errors="replace"))
            gpu_id = (path / "gpu_id").read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            continue
        if gpu_id in ("", "0") or not props.get("simd_count") or "location_id" not in props:
            continue
        loc = props["location_id"]
        bdf = f"{props.get('domain', 0):04x}:{(loc >> 8) & 0xFF:02x}:{(loc >> 3) & 0x1F:02x}.{loc & 0x7:x}"
        unique = props.get("unique_id") or 0
        found.append(KfdGpu(number, bdf, f"GPU-{unique:016x}" if unique else None, props.get("drm_render_minor")))
    return found


def amd_bus_id(logical_id: int, environ: Mapping[str, str] | None = None, sysfs_root: str | Path = "/sys",
               roots: DriRoots | None = None) -> str | None:
    """PCI bus id (lower case) of HIP device *logical_id*, from the KFD topology (:func:`kfd_gpus`)
    without amdsmi: the GPU nodes whose render node is open here (all when ``/dev/dri`` lists none of
    theirs), in ROCr's order, then ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` by position or ROCr
    UUID (:func:`mask_entry`). None when the topology cannot be read. Raises :class:`GpuMappingError`
    when the id names no GPU there."""
    env = os.environ if environ is None else environ
    gpus = kfd_gpus(sysfs_root)
    if not gpus:
        return None
    minors = (roots or DriRoots()).open_render_minors()
    usable = [g for g in gpus if minors and g.render_minor in minors] or gpus
    entry = mask_entry(AMD, logical_id, env)
    if isinstance(entry, str):
        hit = [g for g in usable if g.uuid and _same_uuid(g.uuid, entry)]
        if len(hit) != 1:
            raise GpuMappingError(f"visible-devices entry {entry!r} matches {len(hit)} of the {len(usable)} GPU(s) in"
                                  " the KFD topology (rocminfo shows each GPU's Uuid)")
        return hit[0].pci_bus_id
    if entry >= len(usable):
        where = mask_text(AMD, env) or "no visibility variable set"
        raise GpuMappingError(f"device id {logical_id} is GPU {entry} of the runtime's, but the KFD topology has"
                              f" {len(usable)} usable GPU(s) here ({where})")
    return usable[entry].pci_bus_id


def normalize_bus_id(text: object) -> str | None:
    """``0000:c4:00.0`` from a PCI bus id in any case and domain width (rocm-smi prints ``0000:C4:00.0``,
    some tools ``00000000:C4:00.0``); None when *text* is not one."""
    match = re.fullmatch(r"\s*([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s*", str(text))
    if not match:
        return None
    return f"{int(match[1], 16):04x}:{match[2].lower()}:{match[3].lower()}.{match[4]}"


def drm_card_of(bus_id: str, sysfs_root: str | Path = "/sys") -> Path | None:
    """``<sysfs_root>/class/drm/card<N>`` whose ``device`` link points at PCI device *bus_id*; None when
    there is none."""
    want = normalize_bus_id(bus_id)
    base = Path(sysfs_root) / "class" / "drm"
    try:
        cards = [p for p in base.iterdir() if re.fullmatch(r"card\d+", p.name)]
    except OSError:
        return None
    for card in sorted(cards, key=lambda p: int(p.name[4:])):
        if normalize_bus_id(os.path.basename(os.path.realpath(card / "device"))) == want:
            return card
    return None


def lock_file_name(gpu: PhysicalGpu | None, logical_id: int) -> str:
    """The device lock's file name: ``gpu-<uuid or PCI bus id>.lock`` for a known physical GPU,
    else ``gpu<N>.lock`` with N the runtime's index before any mask (the name before physical ids)."""
    if gpu is not None and (gpu.uuid or gpu.pci_bus_id):
        return "gpu-" + re.sub(r"[^A-Za-z0-9._-]+", "_", gpu.key) + ".lock"
    index = gpu.index if gpu is not None and gpu.index is not None else logical_id
    return f"gpu{index}.lock"


__all__: Sequence[str] = (
    "AMD", "NVIDIA", "DriRoots", "GpuMapping", "GpuMappingError", "KfdGpu", "PhysicalGpu", "amd_bus_id",
    "amd_handle", "amd_physical", "drm_card_of", "kfd_gpus", "lock_file_name", "normalize_bus_id",
    "mask_entry", "nvidia_handle", "nvidia_physical", "parse_mask", "visible_count",
)
