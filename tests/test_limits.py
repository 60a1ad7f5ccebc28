"""Resource bombs are refused before they are expanded: YAML alias bombs, deep nesting and huge files
in the registry, deep or huge JSON, and measurement counts that would need terabytes.

Each refusal is one line that names the file and the key (or the option) and stays short."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_aaco import options
from pytest_aaco.jsonio import MAX_JSON_DEPTH, AacoFileError, read_json
from pytest_aaco.measure.registry import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_MESSAGE_CHARS,
    MAX_REGISTRY_BYTES,
    RegistryError,
    load_registry,
)


def bomb(levels: int, width: int = 9) -> str:
    """A flow list whose last anchor stands for ``width ** levels`` values (a billion laughs)."""
    parts = [f"&a0 [{','.join(['1'] * width)}]"]
    parts += [f"&a{i} [{','.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(parts) + "]"


#: where a bomb may sit in a registry: (YAML of the model entry with {B} for the bomb, key named in the error)
PLACES = [
    ("path: tiny.onnx\n    dims: {{batch: {B}}}", "models.tiny.dims.batch"),
    ("path: tiny.onnx\n    warmup: {B}", "models.tiny.warmup"),
    ("path: tiny.onnx\n    iterations: {B}", "models.tiny.iterations"),
    ("path: tiny.onnx\n    inputs: {{x: {{kind: ints, low: {B}}}}}", "models.tiny.inputs.x.low"),
    ("generator: bert-encoder\n    params: {{layers: {B}}}", "models.tiny.params.layers"),
    ("path: tiny.onnx\n    providers: {{cpu: {{opt: {B}}}}}", "models.tiny.providers.cpu.opt"),
    ("path: tiny.onnx\n    tags: {B}", "models.tiny.tags"),
    ("path: tiny.onnx\n    description: {B}", "models.tiny.description"),
]


@pytest.mark.parametrize(("entry", "key"), PLACES)
@pytest.mark.parametrize("levels", [6, 9, 12])
def test_alias_bomb_is_refused_before_expansion(write_registry, entry: str, key: str, levels: int) -> None:
    """A 479-byte registry used to produce a 35 MB error line, a 738-byte one ran 357 s into a MemoryError."""
    path = write_registry("models:\n  tiny:\n    " + entry.format(B=bomb(levels)) + "\n")
    assert path.stat().st_size < 1000
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    message = str(info.value)
    assert len(message) <= MAX_MESSAGE_CHARS and "\n" not in message
    assert str(path) in message and key in message and "alias" in message, message


def test_bomb_under_defaults_and_merge_keys(write_registry) -> None:
    path = write_registry(f"defaults: {{dims: {{batch: {bomb(8)}}}}}\nmodels:\n  tiny:\n    path: tiny.onnx\n")
    with pytest.raises(RegistryError, match="defaults.dims.batch"):
        load_registry(path)
    merged = "\n".join([
        "base: &base {path: tiny.onnx}",
        "models:",
        *[f"  m{i}: {{<<: *base}}" for i in range(3)],
    ])
    with pytest.raises(RegistryError, match="unknown top-level"):  # ordinary anchors still work
        load_registry(write_registry(merged))


def test_ordinary_anchors_still_load(write_registry) -> None:
    path = write_registry("""
        models:
          a: &m {path: tiny.onnx, dims: {batch: 1}, warmup: 3}
          b: *m
          c: {<<: *m, warmup: 4}
    """)
    models = {m.name: m for m in load_registry(path)}
    assert models["b"].warmup == 3 and models["c"].warmup == 4


@pytest.mark.parametrize("text", [
    "models:\n  tiny:\n    path: tiny.onnx\n    dims: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n",
    "models:\n  tiny:\n    path: tiny.onnx\n    dims: " + "{a: " * (MAX_DEPTH + 5) + "1" + "}" * (MAX_DEPTH + 5) + "\n",
    "models:\n  tiny:\n    path: tiny.onnx\n    tags: " + "[" * 20000 + "]" * 20000 + "\n",
    "x: &x 1\nmodels:\n  tiny:\n    path: tiny.onnx\n    tags: [" + ",".join(["*x"] * (MAX_ALIASES + 1)) + "]\n",
])
def test_deep_nesting_and_alias_count_are_refused(write_registry, text: str) -> None:
    path = write_registry(text)
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    message = str(info.value)
    assert str(path) in message and ("nested deeper" in message or "aliases" in message), message
    assert len(message) <= MAX_MESSAGE_CHARS


def test_huge_registry_file_is_refused_unread(write_registry) -> None:
    path = write_registry("models:\n  tiny:\n    path: tiny.onnx\n" + "# padding\n" * (MAX_REGISTRY_BYTES // 10 + 1))
    with pytest.raises(RegistryError, match="larger than"):
        load_registry(path)


@pytest.mark.slow
def test_long_values_are_cut_in_messages(write_registry) -> None:
    path = write_registry("models:\n  tiny:\n    path: tiny.onnx\n    dims: {batch: [" + ", ".join(["123"] * 50000)
                          + "]}\n")
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert len(str(info.value)) <= MAX_MESSAGE_CHARS and "models.tiny.dims.batch" in str(info.value)


# ---------------------------------------------------------------- measurement counts


@pytest.mark.parametrize(("key", "value"), [
    ("iterations", 10**12), ("iterations", options.MAX_ITERATIONS + 1), ("warmup", 10**9),
    ("warmup", options.MAX_WARMUP + 1), ("rounds", 10**6), ("rounds", options.MAX_ROUNDS + 1),
    ("iterations", 10**400),
])
def test_registry_counts_have_upper_bounds(write_registry, key: str, value: int) -> None:
    """``iterations: 10^12`` used to ask for 7.28 TiB, blamed on session.run."""
    path = write_registry(f"models:\n  tiny:\n    path: tiny.onnx\n    {key}: {value}\n")
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    message = str(info.value)
    assert f"models.tiny.{key}" in message and f"{options.COUNT_BOUNDS[key]:,}" in message, message
    assert len(message) < 400


@pytest.mark.parametrize(("key", "value"), [("iterations", "1000000000000"), ("warmup", "999999999"),
                                            ("rounds", "100000"), ("iterations", "9" * 5000)])
def test_option_counts_have_upper_bounds(key: str, value: str) -> None:
    opt = options.option(key)
    with pytest.raises(ValueError, match="at most|characters") as info:
        opt.value(value)
    assert len(str(info.value)) < 200


def test_bounds_keep_every_default_and_auto() -> None:
    assert options.option("iterations").value("auto") is None
    assert options.option("rounds").value("auto") is None
    assert options.option("iterations").value(str(options.MAX_ITERATIONS)) == options.MAX_ITERATIONS


def test_count_bounds_reach_the_marker(aaco_project) -> None:
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(iterations=10**12)
        def test_marker(benchmark_model):
            benchmark_model()
    """)
    result = aaco_project.run()
    text = result.stdout.str()
    assert "session.run" not in text and "MemoryError" not in text
    assert f"@pytest.mark.aaco(iterations=...): must be at most {options.MAX_ITERATIONS:,}" in text, text


def test_count_bounds_reach_benchmark_model(aaco_project) -> None:
    aaco_project.tests("""
        def test_override(benchmark_model):
            benchmark_model(iterations=10**12)
    """)
    result = aaco_project.run()
    text = result.stdout.str()
    assert "session.run" not in text and "MemoryError" not in text
    assert f"benchmark_model(iterations=...): must be at most {options.MAX_ITERATIONS:,}" in text, text


# ---------------------------------------------------------------- JSON


@pytest.mark.parametrize(("content", "expected"), [
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nested deeper"),
    ("[" * 200000 + "]" * 200000, "nested deeper"),
    ('{"a": ' * 100000 + "1" + "}" * 100000, "nested deeper"),
    ('{"runs": [1' + "0" * 400 + "]}", "401 digits"),
    ('{"runs": [-1' + "0" * 5000 + "]}", "5001 digits"),
    ('{"x": 1e400}', "out of the range"),
    ('{"x": -1e400}', "out of the range"),
])
def test_json_beyond_the_limits_is_refused_by_name(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(AacoFileError) as info:
        read_json(path)
    assert str(path) in str(info.value) and expected in str(info.value)
    assert len(str(info.value)) < 300


def test_json_within_the_limits_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "ok.json"
    path.write_text('{"s": "[[[[{{\\" ]", "n": [' + "[" * 30 + "1" + "]" * 30 + '], "i": 123456789012345678,'
                    ' "f": 1.5e300}', encoding="utf-8")
    data = read_json(path)
    assert data["s"] == '[[[[{{" ]' and data["i"] == 123456789012345678 and data["f"] == 1.5e300


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_json_special_files_are_never_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(AacoFileError, match="FIFO"):  # opened for reading, it would block: never opened
        read_json(fifo)
    with pytest.raises(AacoFileError, match="folder"):
        read_json(tmp_path)
    with pytest.raises(AacoFileError, match="character device"):
        read_json("/dev/null")


def test_rounds_times_iterations_have_a_joint_bound(aaco_project) -> None:
    """Each count within its bound still allowed 1,000 rounds x 100,000 iterations: 10^8 latencies (0.8 GB).
    The item that asks for it fails naming both counts; the run goes on with the next item."""
    aaco_project.tests("""
        import pytest

        @pytest.mark.aaco(rounds=1000, iterations=100000)
        def test_marker(benchmark_model):
            benchmark_model()

        def test_override(benchmark_model):
            benchmark_model(rounds=200, iterations=60000)

        def test_fine(benchmark_model):
            benchmark_model(rounds=2, iterations=5, warmup=1)
    """)
    result = aaco_project.run()
    text = result.stdout.str()
    assert "MemoryError" not in text and "Traceback" not in text
    assert (f"1,000 rounds x 100,000 iterations keep 100,000,000 latencies, at most {options.MAX_LATENCIES:,}"
            in text), text
    assert "200 rounds x 60,000 iterations keep 12,000,000 latencies" in text, text
    result.assert_outcomes(failed=2, passed=1)


def test_the_joint_bound_keeps_every_auto_setting() -> None:
    options.latency_count(options.MAX_ROUNDS, None)  # adaptive iterations: at most 1000 a round
    options.latency_count(options.MAX_ROUNDS, options.MAX_LATENCIES // options.MAX_ROUNDS)
    with pytest.raises(ValueError, match="lower rounds or iterations"):
        options.latency_count(options.MAX_ROUNDS, options.MAX_LATENCIES // options.MAX_ROUNDS + 1)
