"""The AMD stack under the MIGraphX EP (pytest_aaco.samplers.rocm_install): the MIGraphX runtime version from
what is installed (CMake package version file, dpkg database, library file name), the GPU architecture from
the KFD topology, and ``unknown`` where nothing says. The files are written in the layouts their producers
use: CMake's ``write_basic_package_version_file`` (``set(PACKAGE_VERSION "x")``), dpkg's status file
(RFC 822 blocks), and the amdgpu driver's ``/sys/class/kfd/kfd/topology/nodes/N/properties``
(``name value`` lines, ``gfx_target_version`` = major*10000 + minor*100 + stepping)."""

from __future__ import annotations

import os

from pytest_aaco.samplers import rocm_install as rocm_stack


def test_gfx_name_from_the_kfd_target_version():
    assert rocm_stack.gfx_name(90402) == "gfx942"
    assert rocm_stack.gfx_name(90010) == "gfx90a"
    assert rocm_stack.gfx_name(110000) == "gfx1100"
    assert rocm_stack.gfx_name(0) is None  # CPU nodes


def test_gpu_archs_reads_every_gpu_node(tmp_path):
    for node, version in (("0", 0), ("1", 90402), ("2", 90402), ("3", 90010)):
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\nsimd_count 4\n")
    assert rocm_stack.gpu_archs(str(tmp_path)) == ["gfx90a", "gfx942"]
    assert rocm_stack.gpu_archs(str(tmp_path / "absent")) == []


def test_runtime_version_from_dpkg_then_the_library_name(tmp_path):
    status = tmp_path / "status"
    status.write_text("Package: migraphx-dev\nStatus: install ok installed\nVersion: 9.9\n\n"
                      "Package: migraphx\nStatus: install ok installed\nVersion: 2.12.0.60400-39~24.04\n")
    env = {"ROCM_PATH": str(tmp_path / "none"), "LD_LIBRARY_PATH": ""}
    assert rocm_stack.migraphx_runtime_version(env, dpkg_status=str(status)) == "2.12.0.60400-39~24.04"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libmigraphx_c.so.3.0.60400").write_bytes(b"")
    os.symlink("libmigraphx_c.so.3.0.60400", lib / "libmigraphx_c.so.3")
    env = {"ROCM_PATH": str(tmp_path / "none"), "LD_LIBRARY_PATH": str(lib)}
    found = rocm_stack.migraphx_runtime_version(env, dpkg_status=str(tmp_path / "no-status"))
    if not any(p.name == "rocm" for p in rocm_stack.rocm_prefixes(env)):  # a machine with /opt/rocm answers first
        assert found == "libmigraphx_c.so.3.0.60400"


def test_stack_key_says_unknown_rather_than_guessing(monkeypatch):
    monkeypatch.setattr(rocm_stack, "rocm_version", lambda path=None, environ=None: None)
    monkeypatch.setattr(rocm_stack, "migraphx_runtime_version", lambda environ=None: None)
    monkeypatch.setattr(rocm_stack, "gpu_archs", lambda nodes=rocm_stack.KFD_NODES: [])
    assert rocm_stack.stack_key() == {"rocm": "unknown", "migraphx": "unknown", "gfx": "unknown"}
    monkeypatch.setattr(rocm_stack, "gpu_archs", lambda nodes=rocm_stack.KFD_NODES: ["gfx90a", "gfx942"])
    assert rocm_stack.stack_key()["gfx"] == "gfx90a+gfx942"


def test_the_cache_key_takes_the_rocm_the_process_loaded_not_opt_rocm(tmp_path, monkeypatch):
    """Issue 40 finding 6: the PyPI onnxruntime-migraphx wheels load /opt/rocm-7.x.y (their RUNPATH), not /opt/rocm."""
    loaded = tmp_path / "opt" / "rocm-7.0.1"
    other = tmp_path / "opt" / "rocm"
    for prefix, version in ((loaded, "7.0.1-42"), (other, "6.4.1-120")):
        (prefix / ".info").mkdir(parents=True)
        (prefix / ".info" / "version").write_text(version + "\n")
        (prefix / "lib").mkdir()
    maps = tmp_path / "maps"
    maps.write_text(
        "7f0000000000-7f0000001000 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        f"7f0000002000-7f0000003000 r-xp 00000000 08:01 2 {loaded}/lib/libamdhip64.so.7.0.70001\n"
        f"7f0000004000-7f0000005000 r-xp 00000000 08:01 3 {loaded}/lib/libmigraphx_c.so.3.0.70001\n"
        "7f0000006000-7f0000007000 rw-p 00000000 00:00 0 \n")
    monkeypatch.setattr(rocm_stack, "gpu_archs", lambda *a, **k: ["gfx942"])
    environ = {"ROCM_PATH": str(other)}
    monkeypatch.setenv("ROCM_PATH", str(other))
    assert rocm_stack.loaded_rocm(str(maps)) == (loaded, "libmigraphx_c.so.3.0.70001")
    key = rocm_stack.stack_key(environ, maps=str(maps))
    assert key == {"rocm": "7.0.1-42", "migraphx": "libmigraphx_c.so.3.0.70001", "gfx": "gfx942"}
    (loaded / ".info" / "version").unlink()  # no version file: the prefix's own name
    assert rocm_stack.stack_key(environ, maps=str(maps))["rocm"] == "7.0.1"
    nothing = tmp_path / "empty-maps"
    nothing.write_text("")
    assert rocm_stack.loaded_rocm(str(nothing)) is None
    assert rocm_stack.stack_key(environ, maps=str(nothing))["rocm"] == "6.4.1-120"  # nothing loaded: $ROCM_PATH
