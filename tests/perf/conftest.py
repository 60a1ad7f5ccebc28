"""The perf suite is run on purpose (``pytest tests/perf``), never as part of the unit tests."""
