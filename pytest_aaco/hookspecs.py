"""Hooks pytest-aaco offers to other plugins and conftest files."""

from __future__ import annotations

import pytest

from pytest_aaco.jsonio import JSONDict


@pytest.hookspec
def pytest_aaco_fingerprint(config: pytest.Config, item: pytest.Item, fields: JSONDict) -> None:
    """Add or change fingerprint fields for *item* (mutate *fields* in place).

    A baseline is compared only where every field matches, so add what changes timings on your
    runners (a firmware version, a container image tag). Values must be JSON-serialisable.
    """


@pytest.hookspec
def pytest_aaco_verdict(config: pytest.Config, item: pytest.Item, record: JSONDict) -> None:
    """Called with each item's record (result summary, verdict, fingerprint) after it is judged."""
