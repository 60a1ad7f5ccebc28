"""The perf suite measures real models for tens of seconds, so it runs only when asked for by
path (``pytest tests/perf``), never as part of the unit tests (``pytest``)."""

from pathlib import Path

import pytest

HERE = Path(__file__).parent.resolve()


def _asked_for(config: pytest.Config) -> bool:
    root = Path(config.invocation_params.dir)
    for arg in config.args:
        target = (root / arg.split("::")[0]).resolve()
        if target == HERE or HERE in target.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.suffix == ".py" and not _asked_for(config):
        return True
    return None
