"""The plugin's share of ``pytest --help`` at 80 columns stays within ``options.HELP_LINE_BUDGET`` lines.

Measured as a user would: ``COLUMNS=80 pytest --help`` with and without ``-p no:aaco``, the difference
of the line counts. When it fails, the message lists what each shown option and each ini twin costs,
so that whoever added an option sees where the lines went (shorten a help text, or leave the option
out of ``options.HELP_SHOWN``: the options reference, docs/options.md, lists every option).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pytest_aaco import options as opts


def help_lines(folder: Path, *args: str) -> list[str]:
    """``pytest --help`` at 80 columns, run in *folder* (no project configuration), as lines."""
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "--help", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.splitlines()


def costs(lines: list[str]) -> list[tuple[int, str]]:
    """Lines per entry of the plugin's part of *lines*: each ``--aaco-*`` option and ``aaco_*`` ini key
    with its continuation lines, and each group title, largest first."""
    found: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = re.match(r"^  (--aaco-[a-z0-9-]+|aaco_[a-z0-9_]+)\b", line) or re.match(r"^(pytest-aaco.*)$", line)
        if m:
            n = 1
            while i + n < len(lines) and lines[i + n].startswith(" " * 24) and lines[i + n].strip():
                n += 1
            found.append((n, m.group(1)))
    return sorted(found, key=lambda c: -c[0])


def test_the_plugins_share_of_help_fits_the_budget(tmp_path: Path):
    with_plugin = help_lines(tmp_path)
    without = help_lines(tmp_path, "-p", "no:aaco")
    share = len(with_plugin) - len(without)
    detail = "\n".join(f"  {n} line(s)  {what}" for n, what in costs(with_plugin))
    assert share <= opts.HELP_LINE_BUDGET, (
        f"pytest-aaco adds {share} lines to `COLUMNS=80 pytest --help`, at most {opts.HELP_LINE_BUDGET}:"
        f" shorten a help text, or leave an option out of options.HELP_SHOWN (docs/options.md lists it).\n"
        f"What each entry costs:\n{detail}")
    # the measurement sees the plugin: its options and ini twins are in one output and not in the other
    assert any(line.startswith("  --aaco-provider") for line in with_plugin)
    assert not any("aaco" in line for line in without)


def test_costs_finds_each_entry_and_its_continuation_lines():
    lines = ["pytest-aaco (every option: x):", "  --aaco-provider=EP    one", " " * 24 + "two",
             "  aaco_models (string): ini twin", "  aaco_baseline_dir (string):", ""]
    assert costs(lines) == [(2, "--aaco-provider"), (1, "pytest-aaco (every option: x):"), (1, "aaco_models"),
                            (1, "aaco_baseline_dir")]
