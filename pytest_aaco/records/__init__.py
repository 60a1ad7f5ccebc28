"""Typed records shared by the session, the gate and the reports (imports only :mod:`pytest_aaco.jsonio`).

* :mod:`pytest_aaco.records.base`: :class:`~pytest_aaco.records.base.Outcome` (every outcome word
  pytest-aaco writes, the verdict's and the item's), :class:`~pytest_aaco.records.base.Judgement` (one
  tested metric, wall time or device time: the test's estimate, bounds, p, level, MDE, threshold and
  outcome; built by :func:`pytest_aaco.verdict.outcome.judgement_of`), the metric names, the JSON helpers.
* :mod:`pytest_aaco.records.verdict`: :class:`~pytest_aaco.records.verdict.Verdict`, the gate's decision
  for one item, with the figures behind it: its judgements by metric
  (:attr:`~pytest_aaco.records.verdict.Verdict.judgements`) and the item's facts; device time against the
  stored history (:class:`~pytest_aaco.records.verdict.DeviceTimeRecord`).
* :mod:`pytest_aaco.records.device`: the device and cold-start records, and the other typed records at
  the edge (the result's figures, telemetry, the diagnosis, the baseline file's history).
* :mod:`pytest_aaco.records.item`: :class:`~pytest_aaco.records.item.ItemRecord`, what the reports need
  about one item (:meth:`~pytest_aaco.records.item.ItemRecord.to_dict` is the JSON of a bundle's
  ``items/*.json`` and :meth:`~pytest_aaco.records.item.ItemRecord.from_dict` reads it back); what an item
  counts as in the reports (:attr:`~pytest_aaco.records.item.ItemRecord.effective_outcome`,
  :attr:`~pytest_aaco.records.item.ItemRecord.fails`, the stored decisions of
  :func:`pytest_aaco.verdict.outcome.fails`); :class:`~pytest_aaco.records.item.SessionSummary` (verdict
  counts and the LOND state of one session); the keys under which items and pytest-xdist processes
  exchange these records.

The modules import down this list only: base, then verdict and device, then item.
"""
