"""The JSON boundary of the records: files written by an earlier pytest-aaco load and dump to the same bytes.

The files under ``tests/data/records/`` were written by real runs before the records were typed
(see its README.md); bundles' ``items/*.json``, the xdist transport (the same
:meth:`~pytest_aaco.records.item.ItemRecord.to_dict`) and baseline files must not change by a byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_aaco.history.store import load_baseline
from pytest_aaco.jsonio import dumps
from pytest_aaco.records.base import QuantileComparison
from pytest_aaco.records.item import ItemRecord

DATA = Path(__file__).parent / "data" / "records"
ITEMS = sorted(p for p in DATA.glob("*.json") if not p.name.startswith("baseline-"))
BASELINES = sorted(DATA.glob("baseline-*.json"))


def test_the_recorded_files_cover_every_typed_field():
    verdicts = [json.loads(p.read_text())["verdict"] for p in ITEMS]
    for key in ("p99", "first_look", "contention", "side_by_side", "reference"):
        assert any(v.get(key) for v in verdicts), key
    assert BASELINES


def test_a_recorded_p99_part_reads_as_the_one_quantile_comparison():
    """Bundles written when the p99 part had a type of its own (P99Comparison) load into
    QuantileComparison, the type the bootstrap returns, with the gate's ``regression`` kept."""
    found = [ItemRecord.from_dict(json.loads(p.read_text())).verdict.p99 for p in ITEMS]
    parts = [p for p in found if p is not None]
    assert parts and all(type(p) is QuantileComparison for p in parts)
    assert {p.q for p in parts} == {99.0} and all(isinstance(p.regression, bool) for p in parts)


@pytest.mark.parametrize("path", ITEMS, ids=lambda p: p.name)
def test_an_item_record_loads_and_dumps_to_the_same_bytes(path: Path):
    text = path.read_text(encoding="utf-8")
    record = ItemRecord.from_dict(json.loads(text))
    assert dumps(record.to_dict()) == text
    assert dumps(ItemRecord.from_dict(record.to_dict()).to_dict()) == text  # the xdist transport: dict to dict


@pytest.mark.parametrize("path", BASELINES, ids=lambda p: p.name)
def test_a_baseline_loads_and_dumps_to_the_same_bytes(path: Path):
    baseline = load_baseline(path)
    assert baseline is not None
    assert dumps(baseline.to_dict(), strict=True) == path.read_text(encoding="utf-8")
