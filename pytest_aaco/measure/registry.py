"""The YAML model registry, read with a ``yaml.SafeLoader`` refusing duplicate keys, into :class:`ModelSpec`
records.

Format (every key but the model source is optional)::

    defaults:                 # merged under every model
      warmup: 10
    models:
      resnet50:
        zoo: resnet50         # a model-zoo architecture (generated: measure/zoogen.py) ...
        # path: nets/my.onnx  # ... or a path relative to this file ...
        # generator: bert-encoder   # ... or a generated model (params: {...})
        dims: {batch: 1}      # values for symbolic dimensions
        inputs:               # per input: normal | uniform | ints | ones | zeros | constant
          input_ids: {kind: ints, low: 0, high: 30522, seed: 1}
        providers:            # provider options per execution provider (short name)
          migraphx: {migraphx_fp16_enable: "True"}
        extra_work: {matmuls: 20, size: 256}   # appended slowdown, for A/B tests
        warmup: 10
        iterations: auto
        rounds: 10
        threshold: 5%
        device_threshold: 2%  # of device time (kernel time per run), where it is traced
"""

from __future__ import annotations

import hashlib
import math
import os
import reprlib
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.measure.inputs import INPUT_KINDS, InputSpec
from pytest_aaco.measure.modelgen import GENERATORS, add_extra_work, cache_dir, cache_key, cached_model
from pytest_aaco.measure.providers import ProviderError, ProviderSpec, option_problem, options_for, parse_provider
from pytest_aaco.measure.zoogen import ZOO_GENERATORS
from pytest_aaco.options import MAX_ITERATIONS, MAX_ROUNDS, MAX_WARMUP, fraction_below

MODEL_KEYS = {
    "zoo", "path", "generator", "params", "dims", "inputs", "providers", "extra_work",
    "warmup", "iterations", "rounds", "threshold", "device_threshold", "tags", "description",
}
#: keyword arguments of :func:`pytest_aaco.measure.modelgen.add_extra_work`
EXTRA_WORK_KEYS = {"matmuls", "size", "seed"}
#: part of the cache key of transformed models: bump it when add_extra_work changes what it builds
#: (2: the chain hangs on a real input, not on an initializer listed as an input)
EXTRA_WORK_VERSION = 2
#: part of the cache key of the generated zoo models: bump it when a generator in zoogen changes what it builds
ZOO_VERSION = 1
BUILTIN_REGISTRY = Path(__file__).parent.parent / "data" / "models.yaml"


class RegistryError(ValueError):
    """The model registry is malformed; the message names the file, the model and the key.

    The message is always one line: a character that is not printable (a newline or a NUL in a
    key or a path) is shown as its escape, ``\\n`` or ``\\x00``."""

    def __init__(self, message: str) -> None:
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        if len(text) > MAX_MESSAGE_CHARS:  # a value quoted in full could be megabytes
            half = MAX_MESSAGE_CHARS // 2 - 20
            text = f"{text[:half]} ... ({len(text) - 2 * half:,} characters left out) ... {text[-half:]}"
        super().__init__(text)


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry. ``source`` is ``zoo:NAME``, ``path:/abs/file.onnx`` or ``generator:NAME``."""

    name: str
    source: str
    registry_path: Path
    params: JSONDict = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    provider_options: dict[str, JSONDict] = field(default_factory=dict)
    extra_work: dict[str, int] = field(default_factory=dict)
    warmup: int | None = None
    iterations: int | None = None
    rounds: int | None = None
    threshold: float | None = None
    #: the practical threshold of device time for this model (a fraction; ``--aaco-device-threshold`` when None)
    device_threshold: float | None = None
    tags: tuple[str, ...] = ()

    def options_for(self, provider_short: str) -> JSONDict:
        """Provider options the registry gives for this EP (``{}`` when none)."""
        return dict(self.provider_options.get(provider_short, {}))


def item_provider(model: ModelSpec, provider: ProviderSpec, command_line: JSONDict) -> ProviderSpec:
    """*provider* with the registry's options for *model* and the command line's
    (``--aaco-provider-option``, those its EP takes: :func:`~pytest_aaco.measure.providers.options_for`)
    merged in; the command line's win."""
    return provider.with_options({**model.options_for(provider.short), **options_for(provider, command_line)})


def zoo_dir() -> Path:
    """``onnx/backend/test/data/light/`` of the installed onnx package (it may be missing: onnx is
    trimming its test data)."""
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def zoo_models() -> list[str]:
    """Names a ``zoo:`` entry may give: the architectures generated in code
    (:data:`pytest_aaco.measure.zoogen.ZOO_GENERATORS`: ``resnet50``, ``squeezenet``, ``densenet121``,
    ``inception_v1``, ``shufflenet``), plus any other ``light_<name>.onnx`` the installed onnx
    package still ships (``vgg19`` ...)."""
    return sorted(set(ZOO_GENERATORS) | {p.stem.removeprefix("light_") for p in zoo_dir().glob("light_*.onnx")})


def zoo_model_path(name: str) -> Path:
    """The ONNX file of ``zoo: NAME``. A generated architecture (:data:`~pytest_aaco.measure.zoogen.
    ZOO_GENERATORS`) is built with seed 0 on first use and cached (``<cache>/models/zoo-<name>-<key>.onnx``,
    as the generated encoder), whatever the installed onnx ships, so its bytes and the baselines'
    model hash do not depend on the onnx version; any other name is onnx's ``light_<name>.onnx``.
    Raises :class:`~pytest_aaco.measure.modelgen.CacheError` when the cache cannot be written."""
    if name not in ZOO_GENERATORS:
        return zoo_dir() / f"light_{name}.onnx"
    params = {"seed": 0, "version": ZOO_VERSION}
    target = cache_dir() / "models" / f"zoo-{name}-{cache_key(f'zoo-{name}', params)}.onnx"
    return cached_model(target, lambda: ZOO_GENERATORS[name](seed=0), f"zoo: {name}")


# ---------------------------------------------------------------- parsing


class DuplicateKeyError(yaml.YAMLError):
    """A key given twice in one YAML mapping, with the (1-based) lines of both."""

    def __init__(self, key: object, first_line: int, second_line: int) -> None:
        super().__init__(f"duplicate key {key!r} on lines {first_line} and {second_line}")
        self.key, self.first_line, self.second_line = key, first_line, second_line


#: the most bytes a registry file may have (a registry lists models; it is never this large)
MAX_REGISTRY_BYTES = 4 << 20
#: the most aliases (``*name``) one registry may use
MAX_ALIASES = 1000
#: the most values (scalars, lists, mappings) the registry may stand for once every alias is
#: expanded: an alias bomb (each anchor a list of aliases of the one before) stands for billions
MAX_EXPANDED_NODES = 100_000
#: the deepest nesting of lists and mappings
MAX_DEPTH = 64
#: the longest message of a :class:`RegistryError`, in characters
MAX_MESSAGE_CHARS = 1000


class YamlLimitError(yaml.YAMLError):
    """The YAML document exceeds a limit (:data:`MAX_ALIASES`, :data:`MAX_EXPANDED_NODES`,
    :data:`MAX_DEPTH`); *where* is the key path (``models.tiny.dims``) and *mark* the position."""

    def __init__(self, problem: str, where: str = "", mark: yaml.Mark | None = None) -> None:
        super().__init__(problem)
        self.problem, self.where, self.mark = problem, where, mark


def _key_text(node: yaml.Node) -> str:
    return str(node.value)[:40] if isinstance(node, yaml.ScalarNode) else "?"


def _expanded_sizes(root: yaml.Node) -> dict[int, int]:
    """Node id -> how many nodes it stands for with aliases expanded (shared nodes counted once per
    use), computed once per distinct node, without recursion."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if done or not children:
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 0) for c in children), 1 << 62)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, where ``safe_load`` keeps
    the last one and a model entry is silently lost. Keys brought in by a ``<<`` merge may be
    overridden, as YAML intends; only keys written in the mapping itself are compared.

    It also refuses, before anything is constructed, a document that uses more than
    :data:`MAX_ALIASES` aliases, stands for more than :data:`MAX_EXPANDED_NODES` values once its
    aliases are expanded (an alias bomb: a few hundred bytes that stand for billions of values), or
    nests lists and mappings deeper than :data:`MAX_DEPTH` (:class:`YamlLimitError`)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._alias_of: dict[int, str] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise YamlLimitError(f"more than {MAX_ALIASES} aliases (*name)", mark=event.start_mark)
            node = super().compose_node(parent, index)
            if node is not None:
                self._alias_of[id(node)] = str(event.anchor)
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(f"lists and mappings nested deeper than {MAX_DEPTH} levels",
                                     mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            self._check_expansion(node)
        return node

    def _check_expansion(self, root: yaml.Node) -> None:
        """Refuse a document that stands for more than :data:`MAX_EXPANDED_NODES` values, naming the
        key path down to the alias (or value) that holds most of them."""
        sizes = _expanded_sizes(root)
        total = sizes[id(root)]
        if total <= MAX_EXPANDED_NODES:
            return
        path: list[str] = []
        node = root
        while id(node) not in self._alias_of and isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if isinstance(node, yaml.MappingNode):
                key, node = max(node.value, key=lambda kv: sizes[id(kv[1])])
                path.append(_key_text(key))
            else:
                index, node = max(enumerate(node.value), key=lambda iv: sizes[id(iv[1])])
                path[-1:] = [f"{path[-1] if path else ''}[{index}]"]
        alias = f" through alias *{self._alias_of[id(node)]}" if id(node) in self._alias_of else ""
        raise YamlLimitError(f"stands for {'more than 10^18' if total >= 1 << 62 else f'{total:,}'} values once its"
                             f" aliases are expanded{alias} (limit {MAX_EXPANDED_NODES:,}); an alias bomb?"
                             " write the values out or use fewer aliases", ".".join(path), node.start_mark)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:  # an unhashable key: the SafeLoader refuses it itself
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> object:
    """*text* as plain YAML (safe tags only); :class:`DuplicateKeyError` for a key given twice in a mapping."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def _fail(where: str, message: str) -> RegistryError:
    return RegistryError(f"{where}: {message}")


def _int(where: str, value: object, minimum: int = 1, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(where, f"expected an integer >= {minimum}, got {reprlib.repr(value)}")
    if maximum is not None and value > maximum:
        raise _fail(where, f"must be at most {maximum:,} (each measured iteration keeps its latency),"
                           f" got {reprlib.repr(value)}")
    return value


def _threshold(where: str, value: object) -> float:
    try:
        return fraction_below(value)
    except ValueError as exc:
        raise _fail(where, str(exc)) from None


def _input_spec(where: str, raw: object) -> InputSpec:
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, dict):
        raise _fail(where, f"expected a mapping like {{kind: ints, low: 0, high: 100}}, got {reprlib.repr(raw)}")
    unknown = set(raw) - {"kind", "low", "high", "seed", "value"}
    if unknown:
        raise _fail(where, f"unknown key(s) {sorted(unknown, key=str)}; allowed: kind, low, high, seed, value")
    kind = raw.get("kind")
    if kind is not None and kind not in INPUT_KINDS:
        raise _fail(f"{where}.kind", f"unknown kind {kind!r}; valid: {', '.join(INPUT_KINDS)}")
    if kind == "constant" and "value" not in raw:
        raise _fail(where, "kind constant needs a value")
    for key in ("low", "high", "value"):
        number = raw.get(key)
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))
                                   or (isinstance(number, float) and not math.isfinite(number))):
            raise _fail(f"{where}.{key}", f"expected a finite number, got {reprlib.repr(number)}")
    low, high = raw.get("low"), raw.get("high")
    if low is not None and high is not None and not low < high:
        raise _fail(where, f"low ({low}) must be below high ({high})")
    return InputSpec(kind=kind, low=low, high=high, seed=_int(f"{where}.seed", raw.get("seed", 0), 0),
                     value=raw.get("value"))


def _mapping(where: str, raw: object) -> JSONDict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(where, f"expected a mapping, got {type(raw).__name__}")
    return raw


#: a Git LFS pointer file is at most this long (bytes) and starts with one of these lines' beginnings
#: (the Git LFS pointer specification, https://git-lfs.github.com/spec/v1: "Pointer files must be ... less
#: than 1024 bytes")
LFS_POINTER_MAX_BYTES = 1024
_LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")


def is_lfs_pointer(head: bytes) -> bool:
    """Whether *head* (a file's first bytes, at least :data:`LFS_POINTER_MAX_BYTES` + 1 of them when
    the file is longer) is a whole Git LFS pointer file: short, and starting with its version line."""
    return len(head) <= LFS_POINTER_MAX_BYTES and head.startswith(_LFS_VERSIONS)


#: what a path that is neither a regular file nor a folder is, by its stat mode
_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"))


def _model_file(where: str, given: Path) -> Path:
    """The regular file *given* (relative to the registry) resolves to; a RegistryError naming what it
    is otherwise: missing, a broken symlink, a folder, a special file such as a FIFO or /dev/null,
    a file that cannot be read, an empty one, or a Git LFS pointer (a file of at most 1 KiB is
    opened to tell)."""
    fix = "give the path of an .onnx file (paths are relative to the registry file)"
    try:
        resolved = given.resolve(strict=True)
    except FileNotFoundError:
        if given.is_symlink():
            raise _fail(where, f"{given} is a broken symlink (to {os.readlink(given)}); {fix}")\
                from None
        raise _fail(where, f"{given.resolve()} does not exist; {fix}") from None
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a permission error, a NUL in the name
        raise _fail(where, f"{given} cannot be resolved ({getattr(exc, 'strerror', None) or exc}); {fix}")\
            from None
    shown = str(resolved) if resolved == given else f"{given} (-> {resolved})"
    if resolved.is_dir():
        raise _fail(where, f"{shown} is a folder, not a model file; {fix}")
    info = resolved.stat()
    if not stat.S_ISREG(info.st_mode):
        raise _fail(where, f"{shown} is {_file_kind(info.st_mode)}, not a model file; {fix}")
    if not os.access(resolved, os.R_OK):
        raise _fail(where, f"{shown} cannot be read (permission denied); give this user read access, or {fix}")
    if info.st_size == 0:
        raise _fail(where, f"{shown} is empty (0 bytes), not an ONNX model; {fix}")
    if info.st_size <= LFS_POINTER_MAX_BYTES:
        try:
            with open(resolved, "rb") as handle:
                pointer = is_lfs_pointer(handle.read(LFS_POINTER_MAX_BYTES + 1))
        except OSError:
            pointer = False
        if pointer:
            raise _fail(where, f"{shown} is a Git LFS pointer, not the model: the LFS object was not fetched;"
                               " run git lfs pull (git-lfs installed) in the repository, or in CI check out with"
                               " lfs: true")
    return resolved


def _source(where: str, entry: JSONDict, registry_path: Path) -> str:
    given = [k for k in ("zoo", "path", "generator") if k in entry]
    if len(given) != 1:
        raise _fail(where, "give exactly one of zoo, path or generator")
    key = given[0]
    value = str(entry[key])
    if key == "zoo":
        available = zoo_models()
        if value not in available:
            raise _fail(f"{where}.zoo", f"{value!r} is not a zoo model (neither generated by pytest-aaco nor shipped"
                                        f" with the installed onnx); available: {', '.join(available)}")
        return f"zoo:{value}"
    if key == "path":  # relative to the registry file; absolute, or ~ for the home folder, as written
        return f"path:{_model_file(f'{where}.path', registry_path.parent / os.path.expanduser(value))}"
    if value not in GENERATORS:
        raise _fail(f"{where}.generator", f"unknown generator {value!r}; valid: {', '.join(GENERATORS)}")
    return f"generator:{value}"


def _provider_options(where: str, raw: object) -> dict[str, JSONDict]:
    result: dict[str, JSONDict] = {}
    for name, options in _mapping(where, raw).items():
        try:
            short = parse_provider(str(name)).short
        except ProviderError as exc:
            raise _fail(f"{where}.{name}", str(exc)) from None
        result[short] = dict(_mapping(f"{where}.{name}", options))
        problem = option_problem(short, [str(k) for k in result[short]])
        if problem:
            raise _fail(f"{where}.{name}", problem)
    return result


def parse_model(name: str, entry: object, registry_path: Path, defaults: JSONDict) -> ModelSpec:
    """Validate one ``models:`` entry. Raises :class:`RegistryError` naming file, model and key."""
    where = f"{registry_path}: models.{name}"
    if not isinstance(entry, dict):
        raise _fail(where, f"expected a mapping, got {type(entry).__name__}")
    merged = {**defaults, **entry}
    unknown = set(merged) - MODEL_KEYS
    if unknown:
        raise _fail(where, f"unknown key(s) {sorted(unknown, key=str)}; allowed: {', '.join(sorted(MODEL_KEYS))}")
    dims = {str(k): _int(f"{where}.dims.{k}", v) for k, v in _mapping(f"{where}.dims", merged.get("dims")).items()}
    inputs = {str(k): _input_spec(f"{where}.inputs.{k}", v)
              for k, v in _mapping(f"{where}.inputs", merged.get("inputs")).items()}
    extra = {str(k): _int(f"{where}.extra_work.{k}", v)
             for k, v in _mapping(f"{where}.extra_work", merged.get("extra_work")).items()}
    if extra and "matmuls" not in extra:
        raise _fail(f"{where}.extra_work", "needs matmuls (and optionally size)")
    if set(extra) - EXTRA_WORK_KEYS:
        raise _fail(f"{where}.extra_work", f"unknown key(s) {sorted(set(extra) - EXTRA_WORK_KEYS)};"
                                           f" allowed: {', '.join(sorted(EXTRA_WORK_KEYS))}")
    iterations = merged.get("iterations")
    tags = merged.get("tags") or ()
    if not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise _fail(f"{where}.tags", "expected a list of strings")
    return ModelSpec(
        name=str(name),
        source=_source(where, merged, registry_path),
        registry_path=registry_path,
        params=dict(_mapping(f"{where}.params", merged.get("params"))),
        dims=dims,
        inputs=inputs,
        provider_options=_provider_options(f"{where}.providers", merged.get("providers")),
        extra_work=extra,
        warmup=None if merged.get("warmup") is None else _int(f"{where}.warmup", merged["warmup"], 1, MAX_WARMUP),
        iterations=None if iterations in (None, "auto") else _int(f"{where}.iterations", iterations, 2,
                                                                  MAX_ITERATIONS),
        rounds=None if merged.get("rounds") is None else _int(f"{where}.rounds", merged["rounds"], 2, MAX_ROUNDS),
        threshold=None if merged.get("threshold") is None else _threshold(f"{where}.threshold", merged["threshold"]),
        device_threshold=None if merged.get("device_threshold") is None else _threshold(
            f"{where}.device_threshold", merged["device_threshold"]),
        tags=tuple(tags),
    )


#: byte-order marks the registry may start with, and the text encoding each one announces
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _decode(name: str, data: bytes) -> str:
    """*data* as text: UTF-8, or UTF-8/UTF-16 with a byte-order mark; RegistryError naming the byte otherwise."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RegistryError(f"{name}: not {encoding.removesuffix('-sig').upper()} text (byte"
                            f" 0x{data[exc.start]:02x} on line {line}: {exc.reason}); save the registry as UTF-8")\
            from None


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """One line for a YAML error: what is wrong and where (line and column, 1-based), without
    the multi-line excerpt PyYAML's own message carries."""
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        column = exc.position - (before.rfind("\n") + 1) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        return (f"character {char} on line {before.count(chr(10)) + 1}, column {column}: {exc.reason};"
                " the registry must be plain text")
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        context = ""
        if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            context = f" ({exc.context} from line {exc.context_mark.line + 1})"
        elif exc.context:
            context = f" ({exc.context})"
        return f"{where}{exc.problem or exc.context}{context}"
    return " ".join(str(exc).split())


def parse_registry_text(name: str, data: bytes) -> object:
    """The YAML document in *data* (the bytes of a registry file), read with :class:`UniqueKeyLoader`.

    *name* starts every message (the file, or ``models.yaml at REF``). Raises :class:`RegistryError`,
    always one line: text that is not UTF-8 (or UTF-8/UTF-16 with a byte-order mark), a control
    character such as NUL, a key given twice, a tag outside plain YAML, a syntax error.
    """
    text = _decode(name, data)
    try:
        return load_yaml(text)
    except YamlLimitError as exc:
        where = f" at {exc.where}" if exc.where else ""
        line = f" (line {exc.mark.line + 1}, column {exc.mark.column + 1})" if exc.mark is not None else ""
        raise RegistryError(f"{name}: refused{where}{line}: {exc.problem}") from None
    except RecursionError:
        raise RegistryError(f"{name}: refused: nested too deeply to read") from None
    except DuplicateKeyError as exc:
        raise RegistryError(f"{name}: duplicate key {exc.key!r} on lines {exc.first_line} and"
                            f" {exc.second_line}; YAML keeps only the last, so rename or remove one") from None
    except yaml.constructor.ConstructorError as exc:
        if "unhashable" in str(exc.problem):  # a list or mapping used as a key
            raise RegistryError(f"{name}: invalid YAML: {_yaml_problem(exc, text)}") from None
        raise RegistryError(f"{name}: tag not allowed: the registry is plain YAML, read with yaml.safe_load,"
                            f" so tags such as !!python/object are refused ({_yaml_problem(exc, text)})") from None
    except yaml.YAMLError as exc:
        raise RegistryError(f"{name}: invalid YAML: {_yaml_problem(exc, text)}") from None


def _file_kind(mode: int) -> str:
    return next((name for test, name in _SPECIAL_FILES if test(mode)), "a special file")


def read_registry_file(path: Path) -> object:
    """The parsed YAML of the registry file *path* (absolute), :func:`parse_registry_text`.

    Only a readable regular file is opened (a FIFO would block the session): a missing file, a
    broken symlink, a folder, a special file (FIFO, device such as /dev/null, socket) and a file
    that cannot be read are each a :class:`RegistryError` that says which, naming the file and
    the option that chose it.
    """
    fix = ("check --aaco-models / aaco_models (a relative --aaco-models is resolved against the current folder,"
           " aaco_models in the ini file against the rootdir)")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise RegistryError(f"{path}: cannot read the model registry: a broken symlink (to"
                                f" {os.readlink(path)}); {fix}") from None
        raise RegistryError(f"{path}: cannot read the model registry (no such file); {fix}") from None
    except (OSError, ValueError) as exc:  # a symlink loop, a folder on the way that cannot be entered, a NUL
        raise RegistryError(f"{path}: cannot read the model registry ({getattr(exc, 'strerror', None) or exc});"
                            f" {fix}") from None
    if stat.S_ISDIR(mode):
        raise RegistryError(f"{path}: cannot read the model registry: a folder, not a YAML file; {fix}")
    if not stat.S_ISREG(mode):
        raise RegistryError(f"{path}: cannot read the model registry: {_file_kind(mode)}, not a YAML file; {fix}")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_REGISTRY_BYTES + 1)
        if len(data) > MAX_REGISTRY_BYTES:
            raise RegistryError(f"{path}: refused: larger than {MAX_REGISTRY_BYTES >> 20} MiB, far more than a model"
                                f" registry needs; {fix}")
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read the model registry ({exc.strerror or exc}); {fix}") from None
    return parse_registry_text(str(path), data)


def load_registry(path: Path | None = None) -> list[ModelSpec]:
    """Load a registry file (the built-in one when *path* is None).

    Raises :class:`RegistryError` (one line, naming the file and, for an entry, the key) for a file
    that cannot be read (:func:`read_registry_file`), text that is not YAML and invalid entries.
    """
    given = (path or BUILTIN_REGISTRY).absolute()
    data = read_registry_file(given)
    registry_path = given.resolve()  # model paths are relative to the file itself, not to a link to it
    if data is None:
        raise RegistryError(f"{registry_path}: expected a top-level 'models:' mapping with at least one model;"
                            " the file is empty (or only comments)")
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict) or not data["models"]:
        raise RegistryError(f"{registry_path}: expected a top-level 'models:' mapping with at least one model")
    unknown = set(data) - {"models", "defaults"}
    if unknown:
        raise RegistryError(f"{registry_path}: unknown top-level key(s) {sorted(unknown, key=str)};"
                            " allowed: models, defaults")
    _string_keys(str(registry_path), data)
    defaults = _mapping(f"{registry_path}: defaults", data.get("defaults"))
    return [parse_model(str(name), entry, registry_path, defaults) for name, entry in data["models"].items()]


#: what YAML made of an unquoted key that is not a string, for the message
_KEY_KINDS = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (type(None), "null"))


def _string_keys(where: str, value: object, at: str = "") -> None:
    """Every mapping key in the registry document *value* is a string; RegistryError naming the file
    (*where*) and the key otherwise. YAML reads ``1:``, ``true:``, ``null:``/``~:`` and ``2024-01-01:``
    as an integer, a boolean, null and a date, whose text would collide with the quoted key
    (``1`` and ``'1'`` both became model ``1``, so reordering them swapped their histories)."""
    if isinstance(value, dict):
        for key, sub in value.items():
            inner = f"{at}.{key}" if at else str(key)
            if not isinstance(key, str):
                kind = next((name for types, name in _KEY_KINDS if isinstance(key, types)), type(key).__name__)
                text = "null" if key is None else str(key).lower() if isinstance(key, bool) else str(key)
                raise RegistryError(f"{where}: {at + '.' if at else ''}{text}: YAML reads this key as {kind}, not a"
                                    f' name; write it in quotes ("{text}":) so it names one thing and cannot stand'
                                    " for another key")
            _string_keys(where, sub, inner)
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            _string_keys(where, sub, f"{at}[{index}]")


# ---------------------------------------------------------------- materialising model files


def _base_path(spec: ModelSpec) -> Path:
    kind, _, value = spec.source.partition(":")
    if kind == "zoo":
        return zoo_model_path(value)
    if kind == "path":
        return Path(value)
    target = cache_dir() / "models" / f"{value}-{cache_key(value, spec.params)}.onnx"
    return cached_model(target, lambda: GENERATORS[value](**spec.params), f"generate: {value}")


def model_path(spec: ModelSpec) -> Path:
    """The ONNX file to load for *spec*: generated or transformed models are built once and cached.

    Raises :class:`RegistryError` when generator parameters are invalid.
    """
    try:
        base = _base_path(spec)
    except (TypeError, ValueError) as exc:  # unknown parameter, or a value the generator refuses
        raise RegistryError(f"{spec.registry_path}: models.{spec.name}.params: {exc}") from None
    if not spec.extra_work:
        return base
    key = hashlib.sha256(f"{content_hash(base)}:{sorted(spec.extra_work.items())}:{EXTRA_WORK_VERSION}".encode()
                         ).hexdigest()[:12]
    target = cache_dir() / "models" / f"{base.stem}-xw-{key}.onnx"
    import onnx

    return cached_model(target, lambda: add_extra_work(onnx.load(str(base)), **spec.extra_work),
                        f"model {spec.name} with extra work")


@lru_cache(maxsize=64)
def _hash_file(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def content_hash(path: Path) -> str:
    """SHA-256 of the model file (memoised per path, size and mtime)."""
    stat = path.stat()
    return _hash_file(str(path), stat.st_size, stat.st_mtime_ns)
