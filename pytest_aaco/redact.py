"""The one rule for credentials: what looks like a secret, and how it is hidden.

Every channel a credential can come through (environment variables, provider options from
``--aaco-provider-option`` or the registry, the command line) is judged by :func:`looks_secret`.
Where it is *shown* (terminal, bundle, JUnit, HTML, error messages) a secret value becomes
:data:`REDACTED`. Where it must still be *compared* (the baseline fingerprint) it becomes a salted,
slow hash (:func:`fingerprint_value`), so a changed credential still changes the fingerprint without
the file that users commit carrying the value.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TypeVar

_V = TypeVar("_V")

#: what a hidden value is shown as
REDACTED = "***"
#: prefix of a hidden value inside a fingerprint: ``redacted:<16 hex digits>``
HASH_PREFIX = "redacted:"
#: PBKDF2-HMAC-SHA256 iterations for :func:`fingerprint_value` (slows down guessing a short password)
HASH_ITERATIONS = 100_000
#: name fragments that mark a variable or option as a secret (upper-case comparison)
SECRET_NAME_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
#: value prefixes of well-known credential formats (GitHub, Slack, AWS, OpenAI-style, JWT, PEM)
_SECRET_VALUE = re.compile(
    r"^(?:gh[pousr]_|github_pat_|xox[abposr]-|AKIA|ASIA|sk-|eyJ|glpat-|-----BEGIN)"
    r"|://[^/\s:@]*:[^/\s@]+@",  # credentials inside a URL: scheme://user:password@host (user may be empty)
)
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9+/_\-=]{32,}$")
#: a credential anywhere inside a longer value: an ``Authorization`` scheme with its credentials
#: (``Bearer ...``, ``Basic ...``), ``user:password@host`` with or without a URL scheme, a well-known
#: token format after a separator, an AWS access key id. Every part runs in linear time (no nested
#: unbounded repetition over the same characters): values come from the environment.
_EMBEDDED_SECRET = re.compile(
    r"(?i:\b(?:bearer|basic|token|digest)\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|(?:^|[\s,;=(])[^/\s:@=,;]+:[^/\s@,;]+@[A-Za-z0-9.-]+"
    r"|(?:^|[^A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_|xox[abposr]-|glpat-|sk-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.)"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
)
#: where a value splits into words, each of which may be a ``name=value`` or ``name: value`` pair (query
#: strings, comma or semicolon lists, words)
_PAIR_SEPARATORS = re.compile(r"[?&;,\s]+")
#: a pair's name that names a secret (``password``, ``db_passwd``, ``access_token``, ``X-Api-Key``,
#: ``X-Amz-Signature``, ``Authorization``); not ``author``, ``tokenizer``, ``session_timeout``
_SECRET_PAIR_NAME = re.compile(
    r"(?i)(?:pass(?:word|wd|phrase)?|pwd|token|secret|api[_-]?key|access[_-]?key|private[_-]?key|credentials?"
    r"|auth(?:orization)?|sig(?:nature)?|session[_-]?(?:id|key|token)|cookie)(?![a-z])"
)


def secret_pair(text: str) -> bool:
    """True when *text*, split into words at ``?``, ``&``, ``;``, ``,`` and white space, holds a pair
    ``name=value`` or ``name: value`` (the value in the word or the next one) whose name names a
    secret (:data:`_SECRET_PAIR_NAME`): ``password=...``, ``db?token=...``, ``&api_key=...``,
    ``X-Api-Key: ...``. Linear in the length of *text*."""
    words = [w for w in _PAIR_SEPARATORS.split(text) if w]
    for index, word in enumerate(words):
        cut = min((i for i in (word.find("="), word.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            continue
        has_value = bool(word[cut + 1:].strip("=:")) or index + 1 < len(words)
        if has_value and _SECRET_PAIR_NAME.search(word[max(0, cut - 100):cut]):
            return True
    return False


_UUID = re.compile(r"^(?:GPU-|MIG-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
#: bits of Shannon entropy per character above which a long token-like string counts as random
ENTROPY_BITS_PER_CHAR = 3.5
#: ... and whose longest run of base64 characters (``[A-Za-z0-9+/=]``) is at least this long,
#: so identifiers made of short words (``SOME_LONG_OPTION_NAME_2024``) are not taken for tokens
MIN_RANDOM_RUN = 20
#: command-line options of pytest-aaco itself: their names never mark a value as secret
#: (``--aaco-session-dir`` holds a path), their values are still checked
OWN_OPTION_PREFIX = "--aaco-"


def shannon_entropy(text: str) -> float:
    """Shannon entropy of the characters of *text*, in bits per character (0 for an empty string).

    H = -sum(p_c * log2 p_c) over the character frequencies p_c (Shannon, 1948).
    """
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -math.fsum(c / n * math.log2(c / n) for c in counts.values())


def secret_name(name: str) -> bool:
    """True when *name* (a variable, option or key) contains one of :data:`SECRET_NAME_PARTS`."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def secret_value(value: str) -> bool:
    """True when *value* itself looks like a credential, whatever its name (see :func:`looks_secret`)."""
    text = value.strip()
    if _SECRET_VALUE.search(text) or _EMBEDDED_SECRET.search(text) or secret_pair(text):
        return True
    for item in re.split(r"[,;\s]+", text):
        if _UUID.match(item) or item.startswith(("/", "~", ".")):
            continue
        if (
            _TOKEN_CHARS.match(item)
            and re.search(r"[A-Za-z]", item)
            and re.search(r"\d", item)
            and shannon_entropy(item) > ENTROPY_BITS_PER_CHAR
            and max(len(run) for run in re.findall(r"[A-Za-z0-9+/=]+", item)) >= MIN_RANDOM_RUN
        ):
            return True
    return False


def looks_secret(name: str, value: object) -> bool:
    """True when *name* = *value* may hold a credential and must not be recorded.

    - the name contains TOKEN, SECRET, PASSWORD, PASSWD, KEY, CREDENTIAL, AUTH, COOKIE or SESSION
      (``api_key``, ``db_password``, ``auth_token``, ``x-api-key`` ...);
    - the value starts like a known token (``ghp_``, ``gho_``, ``github_pat_``, ``xoxb-``, ``AKIA``,
      ``sk-``, ``eyJ`` (JWT), ``glpat-``, a PEM block) or carries ``user:password@`` in a URL;
    - the value holds a credential anywhere inside it: a pair whose name names a secret
      (``password=...``, ``db?token=...``, ``&api_key=...``, ``X-Api-Key: ...``), an
      ``Authorization`` header's credentials (``Bearer ...``, ``Basic ...``), ``user:password@host``
      without a scheme, a known token format after a separator, an AWS access key id
      (``AKIA``/``ASIA`` and 16 characters);
    - the value is a long random-looking string: 32 or more characters of ``[A-Za-z0-9+/_-=]``,
      with letters and digits, more than :data:`ENTROPY_BITS_PER_CHAR` bits of entropy per
      character and an unbroken base64 run (no ``_``/``-``) of :data:`MIN_RANDOM_RUN` or more.
      GPU UUIDs (``GPU-xxxxxxxx-...``, as ``CUDA_VISIBLE_DEVICES`` may hold) and paths are not
      treated as random.
    """
    return secret_name(name) or secret_value(str(value))


def redact_options(options: Mapping[str, _V]) -> dict[str, _V | str]:
    """*options* (provider options: key -> value) for display: secret values become :data:`REDACTED`
    (a fingerprint's salted hash, ``redacted:...``, is shown as it is)."""
    return {k: REDACTED if looks_secret(str(k), v) and not str(v).startswith(HASH_PREFIX) else v
            for k, v in options.items()}


@lru_cache(maxsize=256)
def fingerprint_value(key: str, value: str) -> str:
    """A stand-in for a secret *value* of option *key* in a fingerprint: ``redacted:`` + 16 hex digits.

    PBKDF2-HMAC-SHA256 (RFC 8018) of the value, salted with the key and the package name,
    :data:`HASH_ITERATIONS` rounds: equal values give equal stand-ins on every machine (a changed
    credential still changes the fingerprint), and the committed file does not carry the value.
    """
    salt = f"pytest-aaco/provider-option/{key}".encode()
    digest = hashlib.pbkdf2_hmac("sha256", value.encode(), salt, HASH_ITERATIONS)
    return HASH_PREFIX + digest.hex()[:16]


def fingerprint_options(options: Mapping[str, _V]) -> dict[str, _V | str]:
    """*options* for a fingerprint: keys kept, secret values replaced by :func:`fingerprint_value`."""
    return {k: fingerprint_value(str(k), str(v)) if looks_secret(str(k), v) else v for k, v in options.items()}


def redact_text(text: str, values: Iterable[object]) -> str:
    """*text* with every occurrence of the secret ones among *values* replaced by :data:`REDACTED`.

    For messages that quote what another library said (ORT's error text may echo an option value).
    """
    for value in sorted({str(v) for v in values if str(v)}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def secret_values(options: Mapping[str, object]) -> list[str]:
    """The values of *options* that :func:`looks_secret` hides, for :func:`redact_text`."""
    return [str(v) for k, v in options.items() if looks_secret(str(k), v)]


def _redact_pairs(text: str) -> str:
    """``KEY=VALUE[,KEY=VALUE...]`` with secret values hidden; other text judged by its value alone."""
    parts = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and looks_secret(key, value):
            parts.append(f"{key}={REDACTED}")
        elif not sep and secret_value(part):
            parts.append(REDACTED)
        else:
            parts.append(part)
    return ",".join(parts)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line for the record, with the same rule as the environment (:func:`looks_secret`).

    - ``--name=value`` and ``--name value``: hidden when the option name looks secret
      (``--db-password``); pytest-aaco's own ``--aaco-*`` names never do, but their values are checked;
    - ``KEY=VALUE`` lists (``--aaco-provider-option api_key=...``, ``-o name=value``): each pair judged;
    - any other argument: hidden when the value itself looks like a token.
    """
    result: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("-"):
            result.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if arg.startswith("-"):
            name, sep, value = arg.partition("=")
            own = name.startswith(OWN_OPTION_PREFIX)
            if not sep:
                hide_next = not own and secret_name(name)
                result.append(arg)
            elif not own and secret_name(name):
                result.append(f"{name}={REDACTED}")
            else:
                result.append(f"{name}={_redact_pairs(value)}")
        else:
            result.append(_redact_pairs(arg))
    return result
