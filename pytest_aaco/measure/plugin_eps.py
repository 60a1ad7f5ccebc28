"""Plugin execution providers: EP libraries registered with ONNX Runtime at run time (``--aaco-ep-library``).

From ONNX Runtime 1.23 an EP can ship as a shared library of its own (a *plugin EP*; after ROCm 7.14
MIGraphX ships as ``onnxruntime-ep-amdgpu``). Such an EP is not in ``get_available_providers()``
and is not chosen with ``providers=[...]``: the library is registered, its devices are listed, and
the session options are told which devices to use
(https://onnxruntime.ai/docs/execution-providers/plugin-ep-libraries/usage.html). In Python
(checked on onnxruntime 1.32.0):

* ``onnxruntime.register_execution_provider_library(registration_name, path)``;
* ``onnxruntime.get_ep_devices()`` -> ``OrtEpDevice`` objects (``ep_name``, ``ep_vendor``,
  ``ep_options``, ``device``: ``type``, ``vendor``, ``device_id`` ...);
* ``SessionOptions.add_provider_for_devices(devices, {option: value})`` (all devices of one EP).

The ONNX Runtime build must have all three (upstream 1.23+ Python API); otherwise
:func:`register_libraries` raises :class:`PluginEpError` saying so. The registered EP is requested by
the name its devices report (``--aaco-provider=MIGraphXExecutionProvider``); the error for a name no
device reports lists the names that are offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_aaco.jsonio import JSONDict

#: what the Python API must have for plugin EPs, as (owner, attribute)
API = (("onnxruntime", "register_execution_provider_library"), ("onnxruntime", "get_ep_devices"),
       ("SessionOptions", "add_provider_for_devices"))

#: registration name -> library path, for the libraries registered in this process
_REGISTERED: dict[str, str] = {}


class PluginEpError(RuntimeError):
    """A plugin EP library cannot be registered or used; the message names ``--aaco-ep-library`` and the fix."""


def missing_api(ort: ModuleType) -> list[str]:
    """The parts of :data:`API` that the onnxruntime module *ort* lacks (``[]`` when it has all)."""
    owners = {"onnxruntime": ort, "SessionOptions": getattr(ort, "SessionOptions", None)}
    return [f"{owner}.{name}" for owner, name in API if not hasattr(owners[owner], name)]


def register_libraries(libraries: Sequence[tuple[str, str]], ort: ModuleType) -> list[str]:
    """Register each ``(registration name, path)`` of *libraries* with the onnxruntime module *ort*
    (once per process and name); returns the names registered now or before.

    Raises :class:`PluginEpError` when this onnxruntime has no plugin EP API, a file is missing, a
    name is already registered with another path, or ONNX Runtime refuses the library.
    """
    if not libraries:
        return []
    missing = missing_api(ort)
    if missing:
        raise PluginEpError(f"--aaco-ep-library: onnxruntime {getattr(ort, '__version__', '?')} has no plugin EP API"
                            f" ({', '.join(missing)} missing; ONNX Runtime 1.23 and later have it): upgrade"
                            " onnxruntime, or leave --aaco-ep-library out")
    for name, path in libraries:
        if _REGISTERED.get(name) == path:
            continue
        if name in _REGISTERED:
            raise PluginEpError(f"--aaco-ep-library {name}={path}: the name {name} is already registered for"
                                f" {_REGISTERED[name]}; give each library its own NAME=PATH")
        if not Path(path).is_file():
            raise PluginEpError(f"--aaco-ep-library {name}={path}: no such file; give the path of the EP's shared"
                                " library (e.g. .../libonnxruntime_ep_amdgpu.so)")
        try:
            ort.register_execution_provider_library(name, str(path))
        except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
            raise PluginEpError(f"--aaco-ep-library {name}={path}: ONNX Runtime could not register it: {exc}") from None
        _REGISTERED[name] = path
    return list(_REGISTERED)


def plugin_ep_names(ort: ModuleType) -> list[str]:
    """EP names that only EP libraries offer: those of ``get_ep_devices()`` missing from
    ``get_available_providers()`` (libraries registered with ``--aaco-ep-library`` or otherwise); ``[]``
    when this onnxruntime has no ``get_ep_devices`` or it fails."""
    if not hasattr(ort, "get_ep_devices"):
        return []
    try:
        devices = list(ort.get_ep_devices())
    except Exception:  # noqa: BLE001 - ORT's own error types: no plugin EP to offer
        return []
    built_in = set(ort.get_available_providers())
    return sorted({str(d.ep_name) for d in devices} - built_in)


def devices_for(ep_name: str, device_id: int, ort: ModuleType) -> list[Any]:
    """The ``OrtEpDevice`` to run *ep_name* on: its only device, or the *device_id*-th of its devices in
    ``get_ep_devices()`` order (*paper*: the order of a plugin EP's GPUs is the library's; docs/amd.md).

    Raises :class:`PluginEpError` naming the offered EPs when none is *ep_name*'s, or the device count
    when *device_id* is beyond it.
    """
    every = list(ort.get_ep_devices())
    mine = [d for d in every if str(d.ep_name) == ep_name]
    if not mine:
        offered = sorted({str(d.ep_name) for d in every})
        raise PluginEpError(f"no device of {ep_name} among the registered EP libraries' devices (offered:"
                            f" {', '.join(offered) or 'none'}); request one of those with --aaco-provider")
    if len(mine) == 1:
        return mine
    if device_id >= len(mine):
        raise PluginEpError(f"{ep_name} offers {len(mine)} devices; --aaco-device-id={device_id} is beyond them")
    return [mine[device_id]]


def add_plugin_provider(sess_options: Any, ep_name: str, options: JSONDict, device_id: int, ort: ModuleType) -> None:
    """Select *ep_name*'s device (:func:`devices_for`) on *sess_options* with *options* (as strings),
    through ``SessionOptions.add_provider_for_devices``. Raises :class:`PluginEpError`."""
    devices = devices_for(ep_name, device_id, ort)
    try:
        sess_options.add_provider_for_devices(devices, {str(k): str(v) for k, v in options.items()})
    except Exception as exc:  # noqa: BLE001 - ORT's own error types
        raise PluginEpError(f"{ep_name}: ONNX Runtime refused its devices or options: {exc}") from None
