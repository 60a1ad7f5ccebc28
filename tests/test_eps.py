"""The execution-provider table (pytest_aaco/eps.py), the VitisAI EP and ``--aaco-provider`` fallback chains."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_aaco import eps
from pytest_aaco.measure import compile_cache as cc
from pytest_aaco.measure.inference import effective_options, resolve_iobinding, with_compile_cache
from pytest_aaco.measure.providers import (
    ProviderError,
    check_options,
    parse_provider,
    parse_provider_list,
    resolve_chain,
    unavailable_reason,
)

CPU_ONLY = ["CPUExecutionProvider"]


def test_every_ep_is_named_once_and_found_by_each_of_its_names():
    names = [n for ep in eps.ALL for n in (ep.short, ep.ort_name.lower(), *ep.aliases)]
    assert len(names) == len(set(names))
    for ep in eps.ALL:
        for name in (ep.short, ep.ort_name, ep.ort_name.upper(), *ep.aliases):
            assert eps.lookup(name) is ep, name
            assert parse_provider(name).short == ep.short


def test_the_records_say_what_the_old_tables_said():
    assert [ep.short for ep in eps.with_tracer(eps.CUPTI)] == ["cuda", "tensorrt"]
    assert [ep.short for ep in eps.with_tracer(eps.ROCPROFV3)] == ["migraphx", "rocm"]
    assert {ep.short for ep in eps.ALL if ep.is_gpu} == {"cuda", "migraphx", "rocm", "tensorrt", "dml"}
    assert {ep.short for ep in eps.ALL if ep.takes_device_id} == {"cuda", "migraphx", "rocm", "tensorrt"}
    assert {ep.short: ep.telemetry for ep in eps.ALL if ep.telemetry} == {
        "cuda": "nvidia", "tensorrt": "nvidia", "migraphx": "amd", "rocm": "amd"}
    assert {ep.short for ep in eps.ALL if ep.compile} == {"migraphx", "tensorrt", "openvino", "vitisai"}
    assert eps.get("cuda").graph_option == ("enable_cuda_graph", "1") and not eps.get("cuda").graph_probed
    assert eps.get("migraphx").graph_probed
    assert eps.get("rocm").removed((1, 23)) and not eps.get("rocm").removed((1, 22))
    assert [resolve_iobinding("auto", parse_provider(s)) for s in ("cpu", "cuda", "tensorrt", "openvino", "dml")] == [
        "none", "all", "inputs", "none", "inputs"]


def test_device_memory_readers_follow_the_telemetry():
    from pytest_aaco.samplers.gpu_memory import READERS, reader_for
    from pytest_aaco.samplers.gpus import vendor_of

    assert reader_for("cuda") is reader_for("tensorrt") is READERS[eps.NVIDIA]
    assert reader_for("migraphx") is reader_for("rocm") is READERS[eps.AMD]
    assert [reader_for(s) for s in ("cpu", "dml", "vitisai", "openvino", "AMDGPUExecutionProvider")] == [None] * 5
    assert [vendor_of(s) for s in ("cuda", "rocm", "vitisai")] == ["nvidia", "amd", None]


def test_an_ep_outside_the_table_gets_a_plain_record():
    ep = eps.get("AMDGPUExecutionProvider")
    assert not ep.known and ep.ort_name == "AMDGPUExecutionProvider"
    assert (ep.is_gpu, ep.option_keys, ep.compile, ep.tracer, ep.telemetry) == (False, None, None, eps.NO_TRACER, None)
    assert eps.lookup("AMDGPUExecutionProvider") is None


# ------------------------------------------------------------------ VitisAI


def test_vitisai_is_parsed_and_has_no_device_id():
    spec = parse_provider("VitisAIExecutionProvider")
    assert (spec.short, spec.ep_name) == ("vitisai", "VitisAIExecutionProvider")
    assert spec.ep.vendor == eps.AMD and not spec.is_gpu
    assert "device_id" not in effective_options(spec.with_options({"config_file": "vaip.json"}), 3)
    check_options([spec], ["config_file", "target", "cacheDir"])  # the EP lists its own: not refused here


@pytest.mark.skipif(sys.platform == "win32", reason="the note is for other platforms")
def test_vitisai_not_in_the_build_is_skipped_with_the_reason():
    reason = unavailable_reason(parse_provider("vitisai"), CPU_ONLY, "1.32.0")
    assert reason is not None
    assert reason.startswith("VitisAIExecutionProvider not available (available: CPUExecutionProvider)")
    assert "Ryzen AI" in reason and "Windows" in reason
    assert unavailable_reason(parse_provider("vitisai"), [*CPU_ONLY, "VitisAIExecutionProvider"], "1.32.0") is None


def test_vitisai_compile_cache_goes_through_cache_dir_and_cache_key(tmp_path):
    folder = tmp_path / "candidate" / "vitisai-0123-abcd"
    assert cc.cache_options("vitisai", folder) == {"cache_dir": str(folder), "cache_key": folder.name,
                                                   "cacheDir": str(folder), "cacheKey": folder.name}
    for key in ("cacheDir", "cacheKey", "cache_dir", "cache_key"):
        assert cc.user_steered("vitisai", {key: "mine"})
    assert not cc.user_steered("vitisai", {"config_file": "vaip.json", "target": "X2"})


def test_vitisai_user_cache_wins_and_is_recorded_as_user(tmp_path, tiny_model_path):
    old = cc.set_compile_cache(tmp_path / "root")
    try:
        spec = parse_provider("vitisai").with_options({"cacheDir": str(tmp_path / "mine")})
        options, use = with_compile_cache(spec, tiny_model_path, dict(spec.options), "1.32.0")
        assert options == {"cacheDir": str(tmp_path / "mine")} and use.status() == "user"
        plain = parse_provider("vitisai")
        options, use = with_compile_cache(plain, tiny_model_path, {}, "1.32.0")
        assert use.folder is not None and use.folder.parent == tmp_path / "root" / "candidate"
        assert options["cacheDir"] == options["cache_dir"] == str(use.folder)
        assert options["cacheKey"] == use.folder.name
    finally:
        cc.set_compile_cache(old)


def test_the_vitisai_config_files_bytes_key_the_folder(tmp_path):
    config = tmp_path / "vaip_config.json"
    config.write_text('{"passes": []}')
    first = cc.program_key("vitisai", {"config_file": str(config)}, "1.32.0")
    config.write_text('{"passes": ["fuse"]}')
    assert cc.program_key("vitisai", {"config_file": str(config)}, "1.32.0") != first
    # other EPs: a file-valued option is only its text, as before
    assert cc.program_key("migraphx", {"x": str(config)}, "1.32.0") == cc.program_key("migraphx", {"x": str(config)},
                                                                                         "1.32.0")


# ------------------------------------------------------------------ fallback chains


def test_a_chain_parses_into_one_spec_whose_id_is_the_chain():
    [spec] = parse_provider_list(["vitisai|directml|CPUExecutionProvider"])
    assert spec.chain == ("vitisai", "dml", "cpu") and spec.test_id == "vitisai|dml|cpu"
    assert spec.short == "vitisai"  # the chain's first EP until it is resolved
    with pytest.raises(ProviderError, match="fewer than two"):
        parse_provider("cpu|cpu")
    with pytest.raises(ProviderError, match="unknown execution provider 'npu'"):
        parse_provider("vitisai|npu")


def test_a_chain_runs_on_its_first_available_ep_and_says_why():
    spec = parse_provider("vitisai|dml|cpu")
    ran, note = resolve_chain(spec, CPU_ONLY, "1.32.0")
    assert (ran.short, ran.ep_name, ran.test_id, ran.label) == ("cpu", "CPUExecutionProvider", "vitisai|dml|cpu",
                                                                 "cpu (vitisai|dml|cpu)")
    assert note is not None and note.startswith("runs on CPUExecutionProvider, the first EP of --aaco-provider=")
    assert "VitisAIExecutionProvider not available" in note and "DmlExecutionProvider not available" in note
    first, quiet = resolve_chain(spec, [*CPU_ONLY, "VitisAIExecutionProvider"], "1.32.0")
    assert (first.short, quiet) == ("vitisai", None)
    assert unavailable_reason(spec, CPU_ONLY, "1.32.0") is None
    none = unavailable_reason(parse_provider("vitisai|dml"), CPU_ONLY, "1.32.0")
    assert none is not None and none.startswith("none of --aaco-provider=vitisai|dml is available: ")


def test_options_for_a_chain_must_suit_one_of_its_eps():
    check_options(parse_provider_list(["vitisai|cpu"]), ["config_file"])  # VitisAI lists its own
    with pytest.raises(ProviderError, match="CPUExecutionProvider takes no provider options"):
        check_options([parse_provider("cpu")], ["config_file"])


@pytest.mark.slow
def test_the_chain_on_a_cpu_runner_runs_on_cpu_and_says_so(aaco_project):
    result = aaco_project.pytester.runpytest_subprocess(
        *[a for a in aaco_project.args("-v", "--aaco-provider=vitisai|dml|cpu", "--aaco-save-baseline",
                                       "--aaco-junit=perf.xml", "-W", "error") if a != "--aaco-no-bundle"],
        timeout=180)
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    result.stdout.fnmatch_lines(["test_perf.py::test_latency?tiny-vitisai|dml|cpu? *PASSED*"])  # the chain's id
    # never silent, and no warning (the chain is the user's choice: it passes under -W error)
    assert "provider chain vitisai|dml|cpu: runs on CPUExecutionProvider, the first EP of --aaco-provider=" \
        "vitisai|dml|cpu this runner offers (VitisAIExecutionProvider not available" in " ".join(text.split())
    assert "AacoProviderWarning" not in text
    [baseline] = (aaco_project.pytester.path / "baselines").rglob("*.json")
    assert '"provider": "CPUExecutionProvider"' in baseline.read_text()  # the fingerprint: the EP that ran
    [item] = (aaco_project.pytester.path / ".aaco" / "sessions").rglob("items/*vitisai_dml_cpu*.json")
    record = json.loads(item.read_text())
    assert (record["provider"], record["label"]) == ("cpu", "tiny[cpu (vitisai|dml|cpu)]")
    assert (record["provider_chain"]["requested"], record["provider_chain"]["ran"]) == ("vitisai|dml|cpu", "cpu")
    assert record["provider_chain"]["reason"].startswith("runs on CPUExecutionProvider, the first EP of")
    assert 'name="aaco_provider" value="cpu"' in (aaco_project.pytester.path / "perf.xml").read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="DirectML may be there")
def test_a_chain_with_no_ep_here_is_skipped_naming_each(aaco_project):
    result = aaco_project.run("-rs", "--aaco-provider=vitisai|dml")
    result.assert_outcomes(skipped=1)
    text = result.stdout.str()
    assert "none of --aaco-provider=vitisai|dml is available" in text


def test_a_listed_ep_that_cannot_make_a_session_moves_the_chain_on():
    """``cuda|cpu`` with onnxruntime-gpu importable and no NVIDIA driver: ORT lists CUDA, the session on it
    fails or falls back, so the chain runs on CPU and says why (the refusal is ORT's own first line)."""
    spec = parse_provider_list(["cuda|cpu"])[0]
    listed = ["CUDAExecutionProvider", *CPU_ONLY]
    refusal = "libcublasLt.so.12: cannot open shared object file: No such file or directory"
    ran, note = resolve_chain(spec, listed, "1.31.1", lambda p: refusal if p.short == "cuda" else None)
    assert ran.short == "cpu" and ran.chain_reason == note
    assert note is not None and "CUDAExecutionProvider listed but cannot run here: libcublasLt.so.12" in note
    first, quiet = resolve_chain(spec, listed, "1.31.1", lambda p: None)
    assert first.short == "cuda" and quiet is None


def test_the_session_probe_names_the_fallback_of_a_real_session():
    """The real probe: CPU makes its session; an EP this build does not have is named as refused."""
    from pytest_aaco.measure.providers import session_refusal

    assert session_refusal(parse_provider("cpu")) is None
    refused = session_refusal(parse_provider("cuda"))
    assert refused is not None and refused != ""


def _ort_whose_tensorrt_library_lacks_libnvinfer(root: Path) -> Path:
    """A folder for ``PYTHONPATH`` holding the real onnxruntime package (its files linked, not copied) plus
    a stand-in ``capi/libonnxruntime_providers_tensorrt.so`` that needs ``libnvinfer.so.10``, which is not
    there: the state of an onnxruntime-gpu install without TensorRT. Built with the C compiler (skips
    without one)."""
    import shutil
    import subprocess

    import onnxruntime

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in TensorRT provider library")
    real = Path(onnxruntime.__file__).parent
    package = root / "ort" / "onnxruntime"
    (package / "capi").mkdir(parents=True)
    for folder, target in ((real, package), (real / "capi", package / "capi")):
        for entry in folder.iterdir():
            if entry.name not in ("capi", "__pycache__"):
                (target / entry.name).symlink_to(entry)
    build = root / "build"
    build.mkdir()
    (build / "nvinfer.c").write_text("int getInferLibVersion(void) { return 100000; }\n")
    (build / "provider.c").write_text("extern int getInferLibVersion(void);\n"
                                      "int GetProvider(void) { return getInferLibVersion(); }\n")
    subprocess.run([compiler, "-shared", "-fPIC", "-Wl,-soname,libnvinfer.so.10", "-o",
                    str(build / "libnvinfer.so.10"), str(build / "nvinfer.c")], check=True)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(package / "capi" / "libonnxruntime_providers_tensorrt.so"),
                    str(build / "provider.c"), str(build / "libnvinfer.so.10")], check=True)
    shutil.rmtree(build)  # libnvinfer.so.10 is gone, as on a runner without TensorRT
    return root / "ort"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the EP libraries are .so files (Linux)")
def test_a_single_ep_that_falls_back_names_the_missing_library_not_the_reference(aaco_project, monkeypatch,
                                                                                  tmp_path):
    """``--aaco-provider=tensorrt`` where ORT lists TensorRT but libnvinfer.so.10 is missing: the real CPU
    wheel, listing TensorRT (the project's conftest adds it), makes its session on CPU. The item's error is
    the EP's, naming the library; the reference workload (on by default) is not blamed."""
    monkeypatch.setenv("PYTHONPATH", str(_ort_whose_tensorrt_library_lacks_libnvinfer(tmp_path)))
    aaco_project.pytester.makeconftest("""
        import onnxruntime

        _listed = onnxruntime.get_available_providers
        onnxruntime.get_available_providers = lambda: ["TensorrtExecutionProvider", *_listed()]
    """)
    result = aaco_project.run_subprocess("--aaco-provider=tensorrt", "-p", "no:warnings", timeout=180)
    text = " ".join((result.stdout.str() + result.stderr.str()).split())
    result.assert_outcomes(errors=1)
    assert "libnvinfer.so.10: cannot open shared object file" in text, text
    assert "TensorrtExecutionProvider" in text and "reference workload" not in text, text
