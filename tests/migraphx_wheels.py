"""Real ``onnxruntime-migraphx`` wheels from PyPI, loaded over stand-in ROCm libraries.

Shared by tests/test_migraphx_conformance.py and studies/migraphx_conformance.py. No AMD GPU is
needed: each wheel's own ``onnxruntime/capi/libonnxruntime_providers_migraphx.so`` needs
``libamdhip64.so.N`` and ``libmigraphx_c.so.N`` (its ``DT_NEEDED`` entries). For each library that
is not on this machine a C stand-in is generated from the provider library's undefined symbols
(``nm -D --undefined-only --with-symbol-versions``), with the same SONAME and symbol versions (a
``--version-script``), and compiled with ``gcc -shared``. Every stand-in function fails:

* HIP functions return ``hipErrorNoDevice`` (100), except ``hipGetDeviceCount`` (one device, so
  that ORT's ``device_id`` option check passes, and ``hipGetErrorString`` / ``hipGetErrorName``
  (a string naming the stand-in);
* MIGraphX C API functions return ``migraphx_status_unknown_target_error`` (3).

So the wheel's real option parser runs (``MIGraphXExecutionProviderInfo`` /
``ProviderOptionsParser``, or the Python binding's own parsing in older builds), and anything it
accepts fails later, in the first HIP or MIGraphX call. :func:`classify` tells the two apart.

The wheel runs in a child process whose ``sys.path`` starts with the unpacked wheel (so its
``onnxruntime`` is imported, never the environment's own) and whose ``LD_LIBRARY_PATH`` holds the
stand-ins (the provider library's RUNPATH names ``/opt/rocm-*/lib``, absent here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

#: onnxruntime-migraphx releases on PyPI at the time of writing (``pip index versions onnxruntime-migraphx``,
#: November 2026: 1.23.0 ... 1.27.1); :func:`released_versions` asks the registry for the current list
KNOWN_RELEASES = ("1.23.0", "1.23.2", "1.24.2", "1.24.4", "1.25.0", "1.27.0", "1.27.1")
#: HIP: hipErrorNoDevice; MIGraphX: migraphx_status_unknown_target_error
#: (AMDMIGraphX src/api/include/migraphx/migraphx.h)
HIP_FAIL, MIGRAPHX_FAIL = 100, 3
#: what the stand-ins' error strings say, so a failure inside them is recognised in ORT's message
STANDIN_MARK = "aaco-standin"
#: the words of the real parsers that refuse an option (ORT's ProviderOptionsParser in
#: onnxruntime/core/framework/provider_options_utils.h, AMD's ROCm/onnxruntime binding, and value parsing)
REFUSAL_PATTERNS = (
    r"Unknown provider option: \"[^\"]*\"",
    r"Invalid MIGraphX EP option[^\n]*",
    r"Failed to parse provider option[^\n]*",
    r"[^\n]*should be a boolean[^\n]*",
    r"[^\n]*Invalid value[^\n]*",
)
#: libraries the stand-ins never replace (the C and C++ runtimes)
SYSTEM_LIB = re.compile(r"^(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[-\w]*)\.so")


class WheelUnavailable(RuntimeError):
    """A wheel or a tool (pip, gcc, nm, readelf) is missing; the message says which and why (for a skip)."""


def wheel_cache() -> Path:
    """Where downloaded wheels are kept: ``$AACO_WHEEL_CACHE``, else ``~/.cache/pytest-aaco/wheels``."""
    env = os.environ.get("AACO_WHEEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pytest-aaco" / "wheels"


def released_versions(timeout: float = 60) -> list[str]:
    """The onnxruntime-migraphx versions the package registry offers (``pip index versions``), oldest
    first. Raises :class:`WheelUnavailable` when pip cannot say."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "onnxruntime-migraphx"],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WheelUnavailable(f"pip index versions onnxruntime-migraphx failed: {exc}") from None
    found = re.search(r"Available versions: (.*)", done.stdout)
    if not found:
        raise WheelUnavailable(f"pip index versions onnxruntime-migraphx: {done.stderr.strip()[-300:]}")
    versions = [v.strip() for v in found.group(1).split(",") if v.strip()]
    return sorted(versions, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)))


def fetch_wheel(version: str, cache: Path | None = None, timeout: float = 300) -> Path:
    """The ``onnxruntime-migraphx==version`` wheel for this Python, downloaded once into *cache*
    (:func:`wheel_cache`) with ``pip download --no-deps --only-binary=:all:``. Raises
    :class:`WheelUnavailable` with pip's words when it cannot be had (no network, no wheel for this
    Python, timeout after *timeout* seconds)."""
    folder = (cache or wheel_cache()) / f"onnxruntime-migraphx-{version}"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(folder.glob(f"onnxruntime_migraphx-{version}-{tag}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(folder),
           f"onnxruntime-migraphx=={version}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise WheelUnavailable(f"onnxruntime-migraphx=={version}: pip download took over {timeout:.0f} s") from None
    except OSError as exc:
        raise WheelUnavailable(f"onnxruntime-migraphx=={version}: pip could not run: {exc}") from None
    found = sorted(folder.glob(f"onnxruntime_migraphx-{version}-{tag}-*.whl"))
    if done.returncode != 0 or not found:
        words = " ".join(line for line in (done.stderr + done.stdout).splitlines() if "WARNING" not in line)
        raise WheelUnavailable(f"onnxruntime-migraphx=={version} for {tag} could not be downloaded:"
                               f" {words.strip()[-400:] or 'no wheel'}")
    return found[0]


def unpack(wheel: Path, dest: Path) -> Path:
    """Unpack *wheel* into *dest* (once); returns *dest*, the folder that holds ``onnxruntime/``."""
    marker = dest / ".unpacked"
    if not marker.exists():
        if dest.exists():
            shutil.rmtree(dest)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(dest)
        for path in (dest / "onnxruntime" / "capi").glob("*.so*"):
            path.chmod(0o755)
        marker.write_text(wheel.name, encoding="utf-8")
    return dest


def provider_library(site: Path) -> Path:
    """The MIGraphX provider library in an unpacked wheel. Raises :class:`WheelUnavailable` when absent."""
    lib = site / "onnxruntime" / "capi" / "libonnxruntime_providers_migraphx.so"
    if not lib.is_file():
        raise WheelUnavailable(f"{site.name}: no onnxruntime/capi/libonnxruntime_providers_migraphx.so in the wheel")
    return lib


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise WheelUnavailable(f"{name} is not installed (needed to build the stand-in ROCm libraries)")
    return path


def needed_libraries(lib: Path) -> list[str]:
    """The ``DT_NEEDED`` entries of *lib* (``readelf -d``)."""
    out = subprocess.run([_tool("readelf"), "-dW", str(lib)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def undefined_symbols(lib: Path) -> list[tuple[str, str | None]]:
    """(name, symbol version or None) of every strong undefined dynamic symbol of *lib*."""
    out = subprocess.run([_tool("nm"), "-D", "--undefined-only", "--with-symbol-versions", str(lib)],
                         capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2 or parts[0] != "U":
            continue  # weak (w) symbols need no definition
        name, _, version = parts[1].partition("@")
        found.append((name, version.lstrip("@") or None))
    return found


def defined_symbols(libs: list[Path]) -> set[str]:
    """Names of the dynamic symbols that *libs* define (``nm -D --defined-only``)."""
    names: set[str] = set()
    for lib in libs:
        out = subprocess.run([_tool("nm"), "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                             check=False).stdout
        names.update(line.split()[-1].split("@")[0] for line in out.splitlines() if line.split())
    return names


def system_has(soname: str) -> bool:
    """Whether the dynamic linker finds *soname* on this machine (``ldconfig -p``)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return False
    return any(line.strip().startswith(soname + " ") for line in out.splitlines())


@dataclass(frozen=True)
class StandIn:
    """One generated library: its SONAME and the (name, version) symbols it exports."""

    soname: str
    symbols: tuple[tuple[str, str | None], ...]

    def c_source(self) -> str:
        """C source of the library: every function fails (see the module docstring) and, when
        ``$AACO_STANDIN_LOG`` names a file, appends its own name to it, so a child can tell how far ORT got."""
        lines = [f"/* stand-in for {self.soname}, generated by tests/migraphx_wheels.py: every call fails */",
                 "#include <stdio.h>", "#include <stdlib.h>",
                 "static void note(const char* name) { const char* path = getenv(\"AACO_STANDIN_LOG\");",
                 "  if (path) { FILE* f = fopen(path, \"a\"); if (f) { fprintf(f, \"%s\\n\", name); fclose(f); } } }"]
        for name, _ in self.symbols:
            if name in ("hipGetErrorString", "hipGetErrorName"):
                lines.append(f'const char* {name}(int e) {{ (void)e; note("{name}");'
                             f' return "{STANDIN_MARK}: hipErrorNoDevice"; }}')
            elif name == "hipGetDeviceCount":
                lines.append('int hipGetDeviceCount(int* n) { note("hipGetDeviceCount"); if (n) *n = 1; return 0; }')
            elif name.startswith("hip"):
                lines.append(f'int {name}(void) {{ note("{name}"); return {HIP_FAIL}; }}')
            elif name.startswith("migraphx_"):
                lines.append(f'int {name}(void) {{ note("{name}"); return {MIGRAPHX_FAIL}; }}')
            else:
                lines.append(f'int {name}(void) {{ note("{name}"); return -1; }}')
        return "\n".join(lines) + "\n"

    def version_script(self) -> str | None:
        """A linker version script giving each symbol its version (None when no symbol is versioned)."""
        by_version: dict[str, list[str]] = {}
        for name, version in self.symbols:
            if version:
                by_version.setdefault(version, []).append(name)
        if not by_version:
            return None
        unversioned = [name for name, version in self.symbols if not version]
        nodes = []
        for i, version in enumerate(sorted(by_version)):
            names = by_version[version] + (unversioned if i == 0 else [])
            body = " ".join(f"{n};" for n in sorted(names))
            nodes.append(f"{version} {{ global: {body} {'local: *;' if i == 0 else ''} }};")
        return "\n".join(nodes) + "\n"

    def build(self, folder: Path) -> Path:
        """Compile the library into *folder* (``gcc -shared -fPIC -Wl,-soname``). Raises
        :class:`WheelUnavailable` when gcc is missing and RuntimeError with gcc's words when it fails."""
        gcc = _tool("gcc")
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / f"{self.soname}.c"
        source.write_text(self.c_source(), encoding="utf-8")
        cmd = [gcc, "-shared", "-fPIC", "-O0", "-w", "-o", str(folder / self.soname), str(source),
               f"-Wl,-soname,{self.soname}"]
        script = self.version_script()
        if script:
            (folder / f"{self.soname}.map").write_text(script, encoding="utf-8")
            cmd.append(f"-Wl,--version-script,{folder / (self.soname + '.map')}")
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"gcc could not build the stand-in {self.soname}: {done.stderr.strip()[-600:]}")
        return folder / self.soname


def plan_standins(site: Path) -> list[StandIn]:
    """The stand-ins the wheel's provider library needs: one per ``DT_NEEDED`` library that is neither a
    C/C++ runtime, nor in the wheel, nor on this machine, holding the undefined symbols no wheel library
    defines (HIP symbols in the ``*hip*`` library, ``migraphx_*`` in the ``*migraphx*`` one, anything
    else in the first)."""
    lib = provider_library(site)
    capi = lib.parent
    missing = [name for name in needed_libraries(lib)
               if not SYSTEM_LIB.match(name) and not (capi / name).exists() and not system_has(name)]
    if not missing:
        return []
    own = defined_symbols([p for p in capi.glob("*.so*") if p != lib])
    wanted = [(n, v) for n, v in undefined_symbols(lib)
              if n not in own and not (v and re.match(r"(GLIBC|GLIBCXX|CXXABI|GCC)_", v))
              and not n.startswith(("_ZNSt", "_ZSt", "__cxa", "_Unwind"))]
    groups: dict[str, list[tuple[str, str | None]]] = {name: [] for name in missing}
    for name, version in wanted:
        if name.startswith("hip"):
            target = next((m for m in missing if "hip" in m), missing[0])
        elif name.startswith("migraphx_"):
            target = next((m for m in missing if "migraphx" in m), missing[0])
        else:
            target = missing[0]
        groups[target].append((name, version))
    return [StandIn(soname, tuple(symbols)) for soname, symbols in groups.items()]


def build_standins(site: Path, folder: Path) -> list[Path]:
    """Build the stand-ins for the unpacked wheel *site* into *folder* (:func:`plan_standins`); returns their paths."""
    return [standin.build(folder) for standin in plan_standins(site)]


def prepare(version: str, work: Path, cache: Path | None = None) -> tuple[Path, Path]:
    """Download (cached), unpack and build stand-ins for onnxruntime-migraphx *version* under *work*;
    returns (site folder, stand-in folder). Raises :class:`WheelUnavailable` (skip) when it cannot."""
    wheel = fetch_wheel(version, cache)
    site = unpack(wheel, work / f"site-{version}")
    standins = work / f"standins-{version}"
    if not (standins / ".built").exists():
        build_standins(site, standins)
        (standins / ".built").write_text("ok", encoding="utf-8")
    return site, standins


def child_env(site: Path, standins: Path, extra_path: list[Path] | None = None) -> dict[str, str]:
    """The environment of a child that imports the wheel at *site* over the stand-ins: ``LD_LIBRARY_PATH``
    with the stand-ins, ``AACO_WHEEL_SITE`` (the child puts it first on ``sys.path``), no ``ORT_MIGRAPHX_*``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ORT_MIGRAPHX_")}
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(standins), env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    env["AACO_WHEEL_SITE"] = str(site)
    env["AACO_EXTRA_PATH"] = os.pathsep.join(str(p) for p in (extra_path or []))
    env.pop("PYTHONPATH", None)
    return env


def run_child(script: Path, site: Path, standins: Path, request: object, extra_path: list[Path] | None = None,
              timeout: float = 120) -> object:
    """Run *script* with the wheel at *site* over *standins*, *request* as JSON on stdin; returns the
    JSON the script prints last. Raises RuntimeError with the child's output when it prints none."""
    done = subprocess.run([sys.executable, str(script)], input=json.dumps(request), capture_output=True, text=True,
                          env=child_env(site, standins, extra_path), timeout=timeout, check=False)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{") or line.startswith("["):
            return json.loads(line)
    raise RuntimeError(f"{script.name} (rc {done.returncode}) printed no result: {(done.stdout + done.stderr)[-1500:]}")


def refusal(message: str) -> str | None:
    """The real parser's words refusing an option in *message* (ORT's error text), or None."""
    for pattern in REFUSAL_PATTERNS:
        found = re.search(pattern, message)
        if found:
            return found.group(0).strip()
    return None


def classify(on_ep: bool, message: str, calls: list[str] | tuple[str, ...] = ()) -> tuple[str, str]:
    """(``accepted`` | ``refused`` | ``other``, words) for one session attempt.

    ``refused``: *message* (ORT's error or printed "EP Error" text) holds a parser's refusal
    (:func:`refusal`). ``accepted``: the session runs on the EP (*on_ep*), or the EP went past its
    option parser into the stand-ins (*calls*, the stand-in functions called, beyond the
    ``hipGetDeviceCount`` that the ``device_id`` check makes). ``other``: anything else, with its words.
    """
    words = refusal(message)
    if words:
        return "refused", words
    if on_ep:
        return "accepted", "session created on the EP"
    past = [c for c in calls if c != "hipGetDeviceCount"]
    if past:
        return "accepted", f"past the parser: the EP failed in the stand-in {past[0]}"
    return "other", _short(message)


def _short(message: str) -> str:
    """*message* on one line, without ORT's source prefix and its fallback banner (at most 240 characters)."""
    text = re.sub(r"\s+", " ", message).strip()
    fallback = re.search(r"EP Error (.*?) when using ", text)
    text = fallback.group(1) if fallback else text
    found = re.search(r"\[ONNXRuntimeError\] : \d+ : \w+ : (.*)", text)
    text = found.group(1) if found else text
    text = re.sub(r"/onnxruntime_src/\S+:\d+ ", "", text)
    return text[:240]


def tiny_model(path: Path) -> Path:
    """A static-shape ONNX model (Y = X + X, float32 [1, 4]) at *path*, opset 17, IR 8 (every wheel reads it)."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "X"], ["Y"])], "aaco_tiny", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


#: the option sets the plugin produces for MIGraphX, as (name, plugin attempt); ``{work}`` is replaced by a
#: scratch folder. Each goes through the plugin's own code path (tests/migraphx_child.py, mode "plugin").
PLUGIN_OPTION_SETS: tuple[tuple[str, dict[str, object]], ...] = (
    ("compile cache auto", {"compile_cache": "auto"}),
    ("compile cache off", {"compile_cache": "off"}),
    ("compile cache user folder", {"compile_cache": "{work}/user-compile-cache"}),
    ("fp16", {"compile_cache": "auto", "options": {"migraphx_fp16_enable": "1"}}),
    ("int8 + calibration table", {"compile_cache": "auto", "options": {
        "migraphx_int8_enable": "yes", "migraphx_int8_calibration_table_name": "{work}/calibration.flatbuffers",
        "migraphx_int8_use_native_calibration_table": "false"}}),
    ("user provider options", {"compile_cache": "off", "options": {
        "migraphx_exhaustive_tune": "true", "migraphx_mem_limit": "2147483648",
        "migraphx_arena_extend_strategy": "kSameAsRequested", "migraphx_bf16_enable": "0",
        "migraphx_model_cache_dir": "{work}/users-own-cache"}}),
    ("--aaco-graph=on", {"compile_cache": "auto", "graph": "on"}),
)
#: a user option no PyPI wheel takes: the plugin must refuse it naming the key, the build and what it takes
REFUSED_USER_SET = ("user option the EP refuses", {"compile_cache": "off",
                                                  "options": {"migraphx_save_compiled_model": "1"}})
#: the harness's own check: an invented key must be refused by the real parser and a known one accepted
SELF_CHECK = ({"options": {"aaco_invented_key": "1"}}, {"options": {"migraphx_fp16_enable": "True"}})


@dataclass(frozen=True)
class Row:
    """One cell of the conformance table: ``wheel`` x ``option_set`` -> ``state`` with ``words``."""

    wheel: str
    option_set: str
    state: str
    words: str


def _fill(value: object, work: Path) -> object:
    if isinstance(value, str):
        return value.replace("{work}", str(work))
    if isinstance(value, dict):
        return {k: _fill(v, work) for k, v in value.items()}
    return value


def plugin_state(result: dict) -> tuple[str, str]:
    """(state, words) for one plugin attempt of tests/migraphx_child.py: ``refused with a reason`` (graph
    replay refused before any session), ``refused`` (a parser's words anywhere in the message), ``accepted``
    (past the parser: on the EP, or failed in a stand-in call), ``other``."""
    message = str(result.get("message", ""))
    if result.get("graph_refused"):
        return "refused with a reason", _short(message.split("refused: ", 1)[-1])
    return classify(bool(result.get("on_ep")), message, result.get("calls", ()))


def conformance(version: str, work: Path, sets: tuple[tuple[str, dict[str, object]], ...] = PLUGIN_OPTION_SETS,
                cache: Path | None = None, timeout: float = 180) -> list[Row]:
    """The conformance rows of onnxruntime-migraphx *version*: the harness's self-check (raw sessions,
    :data:`SELF_CHECK`), then every option set of *sets* through the plugin's code path. Raises
    :class:`WheelUnavailable` when the wheel, a tool, or this machine's C library cannot run it."""
    site, standins = prepare(version, work, cache)
    problem = glibc_problem(site)
    if problem:
        raise WheelUnavailable(f"onnxruntime-migraphx {version}: {problem}")
    scratch = work / f"scratch-{version}"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "calibration.flatbuffers").write_bytes(b"")
    model = tiny_model(scratch / "tiny.onnx")
    child = Path(__file__).with_name("migraphx_child.py")
    root = Path(__file__).resolve().parent.parent
    rows = []
    raw = run_child(child, site, standins, {"mode": "raw", "model": str(model), "attempts": list(SELF_CHECK)},
                    timeout=timeout)
    if not isinstance(raw, dict) or "results" not in raw:
        raise RuntimeError(f"onnxruntime-migraphx {version}: the child could not import the wheel: {raw}")
    for name, result in zip(("self-check: invented key", "self-check: known key"), raw["results"], strict=True):
        state, words = classify(result["on_ep"], result["message"], result["calls"])
        rows.append(Row(version, name, state, words))
    attempts = [_fill(attempt, scratch) for _, attempt in sets]
    out = run_child(child, site, standins, {"mode": "plugin", "model": str(model), "attempts": attempts},
                    extra_path=[root], timeout=timeout)
    assert isinstance(out, dict)
    for (name, _), result in zip(sets, out["results"], strict=True):
        state, words = plugin_state(result)
        if state == "refused" and "refuses option" in str(result.get("message")):
            words = " ".join(str(result["message"]).split(": ", 1)[-1].split())  # the plugin's own message, whole
        rows.append(Row(version, name, state, words))
    return rows


def glibc_problem(site: Path) -> str | None:
    """Why this machine's C library cannot load the wheel at *site* (its libraries need a newer
    ``GLIBC_x.y`` than ``os.confstr("CS_GNU_LIBC_VERSION")``), or None. Read with ``objdump -T``."""
    try:
        have = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    found = re.search(r"(\d+)\.(\d+)", have)
    objdump = shutil.which("objdump")
    if not found or objdump is None:
        return None
    mine = (int(found.group(1)), int(found.group(2)))
    need = (0, 0)
    for lib in (site / "onnxruntime" / "capi").glob("*.so*"):
        out = subprocess.run([objdump, "-T", str(lib)], capture_output=True, text=True, check=False).stdout
        for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", out):
            need = max(need, (int(major), int(minor)))
    if need > mine:
        return (f"its libraries need GLIBC_{need[0]}.{need[1]} and this machine has glibc {mine[0]}.{mine[1]}"
                " (the wheel's manylinux tag promises less)")
    return None
