"""The one secret rule (pytest_aaco.redact): provider options, fingerprints, the command line."""

from __future__ import annotations

import pytest

from pytest_aaco.history.fingerprint import Fingerprint
from pytest_aaco.measure.providers import ProviderSpec
from pytest_aaco.redact import (
    HASH_PREFIX,
    REDACTED,
    fingerprint_options,
    fingerprint_value,
    looks_secret,
    redact_argv,
    redact_options,
    redact_text,
)


@pytest.mark.parametrize("key", ["api_key", "db_password", "auth_token", "x-api-key", "AWS_SECRET"])
def test_credential_keys_are_redacted_for_display(key):
    assert redact_options({key: "v4lue", "device_id": 0}) == {key: REDACTED, "device_id": 0}


def test_token_values_are_redacted_whatever_the_key():
    assert redact_options({"cache_dir": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}) == {"cache_dir": REDACTED}


def test_fingerprint_keeps_the_key_and_detects_a_change():
    one = fingerprint_options({"api_key": "first", "cudnn_conv_algo_search": "EXHAUSTIVE"})
    assert one["cudnn_conv_algo_search"] == "EXHAUSTIVE"
    assert one["api_key"].startswith(HASH_PREFIX) and "first" not in one["api_key"]
    assert fingerprint_options({"api_key": "first"}) == {"api_key": one["api_key"]}  # stable
    assert fingerprint_options({"api_key": "second"})["api_key"] != one["api_key"]
    assert fingerprint_value("other_key", "first") != one["api_key"]  # salted with the key


def test_describe_diff_never_shows_a_raw_secret_of_an_old_baseline():
    new = Fingerprint({"provider_options": fingerprint_options({"api_key": "new-value"})})
    text = new.describe_diff({"provider_options": {"api_key": "old-raw-value"}})
    assert "old-raw-value" not in text and "new-value" not in text
    assert "api_key" in text and HASH_PREFIX in text


def test_provider_spec_repr_hides_secret_options():
    spec = ProviderSpec("cuda", "CUDAExecutionProvider", {"api_key": "abc-secret", "device_id": 1})
    assert "abc-secret" not in repr(spec) and "device_id" in repr(spec)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--db-password", "hunter2"], ["--db-password", REDACTED]),
        (["--db-password=hunter2"], [f"--db-password={REDACTED}"]),
        (["--aaco-provider-option", "api_key=abc,device_id=1"],
         ["--aaco-provider-option", f"api_key={REDACTED},device_id=1"]),
        (["--aaco-provider-option=auth_token=abc"], [f"--aaco-provider-option=auth_token={REDACTED}"]),
        (["-o", "my_token=abc"], ["-o", f"my_token={REDACTED}"]),
        (["--aaco-session-dir=.aaco/sessions"], ["--aaco-session-dir=.aaco/sessions"]),  # own option: a path
        (["--anything", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"], ["--anything", REDACTED]),
        (["tests/perf", "-k", "resnet", "--aaco-provider=cpu"], ["tests/perf", "-k", "resnet", "--aaco-provider=cpu"]),
        (["--api-key", "-x"], ["--api-key", "-x"]),  # a flag follows: nothing to hide
    ],
)
def test_redact_argv(argv, expected):
    assert redact_argv(argv) == expected


def test_redact_text_hides_quoted_values():
    assert redact_text("ORT said: bad value 'abc-secret' for api_key", ["abc-secret"]) == \
        f"ORT said: bad value '{REDACTED}' for api_key"


#: credentials inside a longer value, each with the neighbours a fix for one example would miss
EMBEDDED = [
    "password=hunter2", "x=1,password=hunter2", "opt=1 passwd=x", "PWD=secret", "passphrase: correct horse",
    "http://h/db?token=abc123", "https://h/?a=1&api_key=zzz", "https://h/?access_token=z", "s3://b/k?sig=abcdef",
    "https://h/?X-Amz-Signature=abc", "client_secret=shh", "private_key=abc", "session_id=abc", "cookie: a=b", "auth=x",
    "Authorization: Bearer abcdefgh12345678", "bearer abcdefghijk", "Authorization: Basic dXNlcjpwYXNz",
    "admin:hunter2@db.example.com", "https://u:p@h/x", "redis://:pw@cache:6379", "--flag AKIAIOSFODNN7EXAMPLE",
    "cfg;aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "X-Api-Key: abc",
    "foo ghp_0123456789abcdefghijklmnop", "a,glpat-xxxxxxxxxxxxxxxxxxxx", "key eyJhbGciOiJIUzI1NiJ9.eyJz",
]
#: ordinary values of ORT_*, OMP_*, HIP_*, CUDA_* variables: never hidden
ORDINARY = [
    "4", "granularity=fine,compact", "/opt/rocm/lib", "cores", "0,1,2", "GPU-8a3b2c1d-1111-2222-3333-444455556666",
    "/tmp/cache:/other", "1", "verbose", "spread", "true", "kEnableFastMath=1", "http://example.com/path",
    "file:/x", "disk-cache-dir=/tmp/x", "threads:4", "nvme:0", "C:\\path", "high", "/home/me/.cache/ort",
    "PCI_BUS_ID", "gfx90a:xnack-", "verbose=1,tile=2", "passive", "0x1f", "author=me",
    "session_timeout=5", "secretary:no", "tokenizer=bert",
]


@pytest.mark.parametrize("value", EMBEDDED)
def test_credential_inside_a_value_is_secret(value: str) -> None:
    assert looks_secret("ORT_HARMLESS_NAME", value)


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_value_is_not_secret(value: str) -> None:
    assert not looks_secret("OMP_PLACES", value)


@pytest.mark.parametrize("value", ["a-" * 20000, "a." * 20000, "x:y," * 20000, "x:y " * 20000, "a= " * 30000,
                                   "://:" * 20000, "token " * 20000, "a" * 100000 + "="])
def test_secret_rule_is_linear_on_long_values(value: str) -> None:
    """An environment value of tens of kB is judged (a backtracking pattern took 148 s on ``a-`` * 20000;
    the rule's patterns have no nested quantifiers, so it stays linear). Its speed is not timed here."""
    assert looks_secret("ORT_LONG", value) in (True, False)
