"""Plugin EP libraries (``--aaco-ep-library``), with a fake EP library at onnxruntime's Python boundary.

The fake stands in for onnxruntime's plugin EP API (register_execution_provider_library, get_ep_devices,
SessionOptions.add_provider_for_devices; names checked on onnxruntime 1.32.0) and for the session
factory, so no real EP library is loaded.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import onnxruntime as ort
import pytest

from pytest_aaco.measure import inference, plugin_eps
from pytest_aaco.measure.inference import SessionError, build_session
from pytest_aaco.measure.providers import parse_provider

EP = "MIGraphXExecutionProvider"


class Device:
    def __init__(self, ep_name: str, index: int) -> None:
        self.ep_name = ep_name
        self.ep_vendor = "AMD"
        self.ep_options: dict[str, str] = {}
        self.device = types.SimpleNamespace(type="GPU", vendor="AMD", device_id=0x74A1, index=index)


class FakeLibrary:
    """A fake EP library: registering it adds two GPU devices of :data:`EP` to ``get_ep_devices()``."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, str]] = []
        self.selected: list[tuple[list[Any], dict[str, str]]] = []

    def register(self, name: str, path: str) -> None:
        self.registered.append((name, path))

    def devices(self) -> list[Device]:
        cpu = [Device("CPUExecutionProvider", 0)]
        return cpu + ([Device(EP, 0), Device(EP, 1)] if self.registered else [])


@pytest.fixture
def library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[FakeLibrary, Path]:
    fake = FakeLibrary()
    path = tmp_path / "libonnxruntime_ep_amdgpu.so"
    path.write_bytes(b"\x7fELF fake")
    monkeypatch.setattr(plugin_eps, "_REGISTERED", {})
    monkeypatch.setattr(ort, "register_execution_provider_library", fake.register)
    monkeypatch.setattr(ort, "get_ep_devices", fake.devices)
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])

    class Options(ort.SessionOptions):
        def add_provider_for_devices(self, devices: list[Any], options: dict[str, str]) -> None:
            fake.selected.append((list(devices), dict(options)))
            self.plugin_ep = devices[0].ep_name

    monkeypatch.setattr(ort, "SessionOptions", Options)
    return fake, path


def test_a_build_without_the_api_gets_a_clear_error() -> None:
    old = types.SimpleNamespace(__version__="1.20.1", SessionOptions=type("SessionOptions", (), {}))
    with pytest.raises(plugin_eps.PluginEpError, match=r"--aaco-ep-library: onnxruntime 1\.20\.1 has no plugin EP API"
                       r" \(onnxruntime\.register_execution_provider_library, onnxruntime\.get_ep_devices,"
                       r" SessionOptions\.add_provider_for_devices missing; .*upgrade onnxruntime"):
        plugin_eps.register_libraries([("amdgpu", "/x.so")], old)
    assert plugin_eps.missing_api(ort) == []  # the installed onnxruntime has all three


def test_registering_checks_the_file_and_reports_ort_refusals(library: Any, tmp_path: Path) -> None:
    fake, path = library
    with pytest.raises(plugin_eps.PluginEpError, match=r"amdgpu=.*nope\.so: no such file"):
        plugin_eps.register_libraries([("amdgpu", str(tmp_path / "nope.so"))], ort)
    assert plugin_eps.register_libraries([("amdgpu", str(path))], ort) == ["amdgpu"]
    assert plugin_eps.register_libraries([("amdgpu", str(path))], ort) == ["amdgpu"]  # once per process
    assert fake.registered == [("amdgpu", str(path))]
    with pytest.raises(plugin_eps.PluginEpError, match="already registered"):
        plugin_eps.register_libraries([("amdgpu", str(tmp_path / "other.so"))], ort)
    assert plugin_eps.plugin_ep_names(ort) == [EP]

    def refuse(name: str, path: str) -> None:
        raise RuntimeError("CreateEpFactories not exported")

    ort.register_execution_provider_library = refuse
    with pytest.raises(plugin_eps.PluginEpError, match="could not register it: CreateEpFactories not exported"):
        plugin_eps.register_libraries([("b", str(path))], ort)


def test_devices_are_chosen_by_ep_name_and_device_id(library: Any) -> None:
    fake, path = library
    plugin_eps.register_libraries([("amdgpu", str(path))], ort)
    assert plugin_eps.devices_for(EP, 1, ort)[0].device.index == 1
    with pytest.raises(plugin_eps.PluginEpError, match="offers 2 devices; --aaco-device-id=5"):
        plugin_eps.devices_for(EP, 5, ort)
    with pytest.raises(plugin_eps.PluginEpError, match=r"no device of AMDGPUExecutionProvider .*offered:"
                       r" CPUExecutionProvider, MIGraphXExecutionProvider"):
        plugin_eps.devices_for("AMDGPUExecutionProvider", 0, ort)


def test_a_session_on_a_plugin_ep_selects_its_device(library: Any, tiny_model_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fake, path = library
    plugin_eps.register_libraries([("amdgpu", str(path))], ort)
    calls: list[dict[str, Any]] = []

    class Session:
        def __init__(self, model: str, **kwargs: Any) -> None:
            calls.append(kwargs)
            self.inner = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
            self.ep = kwargs["sess_options"].plugin_ep

        def get_providers(self) -> list[str]:
            return [self.ep, "CPUExecutionProvider"]

        def get_provider_options(self) -> dict[str, Any]:
            return {}

    monkeypatch.setattr(inference, "SESSION_FACTORY", Session)
    provider = parse_provider("migraphx").with_options({"migraphx_fp16_enable": "1"})
    handle = build_session(tiny_model_path, provider, device_id=1)
    assert "providers" not in calls[0]  # chosen on the session options, not by name
    devices, options = fake.selected[0]
    assert [d.device.index for d in devices] == [1]
    assert options["migraphx_fp16_enable"] == "True" and "device_id" not in options  # the same MIGraphX options
    assert handle.session.get_providers()[0] == EP
    with pytest.raises(SessionError, match="offers 2 devices; --aaco-device-id=4"):
        build_session(tiny_model_path, provider, device_id=4)


def test_the_option_through_pytest(aaco_project: Any, library: Any, tmp_path: Path) -> None:
    fake, path = library
    result = aaco_project.run("--aaco-smoke", f"--aaco-ep-library=amdgpu={tmp_path / 'missing.so'}")
    assert result.ret == 4 and "no such file" in result.stderr.str()
    result = aaco_project.run("--aaco-smoke", f"--aaco-ep-library={path}")
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert fake.registered == [("onnxruntime_ep_amdgpu", str(path))]
