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
