"""Real pytest sessions for the verdict-quality study: suite layout, registries, the load monitor,
one pytest process per session, and reading the session bundles back.

Layout under the work directory::

    manifest.json            config, calibration, machine, sessions run, load samples
    cache/                   $AACO_CACHE_DIR of every process: the B-variant model files
    suite/pytest.ini         stops pytest's rootdir search (no project ini is picked up)
    suite/test_vq.py         def test_latency(benchmark_model): benchmark_model()
    suite/registry_a.yaml    models x copies, interleaved (squeezenet_1, shufflenet_1, ..., squeezenet_2, ...)
    suite/registry_ab<k>.yaml  the same names, every item pointing at one calibrated B variant
    suite/baselines/         --aaco-baseline-dir
    suite/sessions/<name>/   --aaco-session-dir of each session (one bundle inside)
    suite/junit/<name>.xml   pytest's --junitxml: wall time per item (setup + call + teardown)
    suite/logs/<name>.txt    the terminal output
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

TEST_FILE = "def test_latency(benchmark_model):\n    benchmark_model()\n"
PYTEST_INI = "[pytest]\naddopts = -p no:cacheprovider\n"


def item_names(models: list[str], copies: int) -> list[tuple[str, str, int]]:
    """(item name, zoo model, copy) in registry order: copies interleaved so that no two
    neighbouring items share a model file (the plugin caches the last 2 InferenceSessions)."""
    return [(f"{m}_{c + 1}", m, c) for c in range(copies) for m in models]


def write_registry(path: Path, items: list[tuple[str, str, int]],
                   extra: dict[str, dict[str, int]] | None = None) -> Path:
    """A registry with one entry per item; *extra* maps item name -> extra_work."""
    models: dict[str, Any] = {}
    for name, zoo, _ in items:
        entry: dict[str, Any] = {"zoo": zoo}
        if extra and name in extra:
            entry["extra_work"] = dict(extra[name])
        models[name] = entry
    text = yaml.safe_dump({"models": models}, sort_keys=False)
    path.write_text("# written by studies/verdict_quality.py\n" + text)
    return path


def setup_suite(workdir: Path) -> Path:
    suite = workdir / "suite"
    for sub in ("baselines", "sessions", "junit", "logs"):
        (suite / sub).mkdir(parents=True, exist_ok=True)
    (suite / "pytest.ini").write_text(PYTEST_INI)
    (suite / "test_vq.py").write_text(TEST_FILE)
    return suite


def subprocess_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["AACO_CACHE_DIR"] = str(workdir / "cache")
    env.pop("PYTEST_ADDOPTS", None)
    return env


# ------------------------------------------------------------------ load monitor


def _cpu_busy_s() -> float:
    """System-wide busy CPU seconds (all cores) from /proc/stat."""
    with open("/proc/stat") as fh:
        parts = [float(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0.0)
    return (sum(parts[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and its children: finished ones (os.times) plus running ones."""
    import psutil

    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    try:
        for child in psutil.Process().children(recursive=True):
            try:
                ct = child.cpu_times()
                total += ct.user + ct.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


class LoadMonitor:
    """Samples, every *interval* s: the 1-minute load average, the busy cores of the whole machine
    and the busy cores of everything but this study (its own process tree subtracted)."""

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> LoadMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _loop(self) -> None:
        last_t, last_busy, last_own = time.time(), _cpu_busy_s(), _own_cpu_s()
        while not self._stop.wait(self.interval):
            now, busy, own = time.time(), _cpu_busy_s(), _own_cpu_s()
            dt = max(now - last_t, 1e-6)
            total_cores = (busy - last_busy) / dt
            own_cores = (own - last_own) / dt
            self.samples.append({
                "t": now, "load1": os.getloadavg()[0], "busy_cores": round(total_cores, 3),
                "others_cores": round(max(total_cores - own_cores, 0.0), 3),
            })
            last_t, last_busy, last_own = now, busy, own

    def window(self, start: float, end: float) -> dict[str, float | None]:
        sel = [s for s in self.samples if start <= s["t"] <= end + self.interval]
        return summarize_load(sel)


def summarize_load(samples: list[dict[str, float]]) -> dict[str, float | None]:
    if not samples:
        return {"load1_mean": None, "load1_max": None, "others_cores_mean": None, "n": 0}
    load = [s["load1"] for s in samples]
    others = [s["others_cores"] for s in samples]
    return {
        "load1_mean": round(sum(load) / len(load), 2),
        "load1_max": round(max(load), 2),
        "others_cores_mean": round(sum(others) / len(others), 2),
        "n": len(samples),
    }


def wait_for_quiet(threshold: float, max_wait_s: float, poll_s: float = 30.0, log: Any = print) -> dict[str, Any]:
    """Poll ``os.getloadavg()[0]`` every *poll_s* until it is below *threshold* (or *max_wait_s* ran out)."""
    start = time.time()
    polls = []
    while True:
        load = os.getloadavg()[0]
        polls.append(round(load, 2))
        if load < threshold:
            return {"waited_s": round(time.time() - start), "load1_at_start": round(load, 2), "quiet": True,
                    "polls": polls}
        if time.time() - start >= max_wait_s:
            log(f"load average still {load:.2f} after {max_wait_s / 60:.0f} min: starting anyway")
            return {"waited_s": round(time.time() - start), "load1_at_start": round(load, 2), "quiet": False,
                    "polls": polls}
        log(f"load average {load:.2f} >= {threshold}: waiting {poll_s:.0f} s")
        time.sleep(poll_s)


# ------------------------------------------------------------------ one pytest session


def run_session(suite: Path, env: dict[str, str], name: str, registry: Path, rounds: int, save: bool,
                plugin_args: list[str], monitor: LoadMonitor | None) -> dict[str, Any]:
    """Run one pytest session (a separate process); returns its manifest entry."""
    cmd = [sys.executable, "-m", "pytest", "test_vq.py", "-q", f"--aaco-models={registry.name}",
           "--aaco-baseline-dir=baselines", f"--aaco-session-dir=sessions/{name}", f"--aaco-rounds={rounds}",
           f"--junitxml=junit/{name}.xml", *plugin_args]
    if save:
        cmd.append("--aaco-save-baseline")
    start = time.time()
    with open(suite / "logs" / f"{name}.txt", "w") as log:
        proc = subprocess.run(cmd, cwd=suite, env=env, stdout=log, stderr=subprocess.STDOUT)
    end = time.time()
    if proc.returncode not in (0, 1):
        tail = (suite / "logs" / f"{name}.txt").read_text()[-3000:]
        raise RuntimeError(f"session {name} exited {proc.returncode}:\n{tail}")
    bundles = sorted((suite / "sessions" / name).glob("*_*"))
    return {
        "name": name, "registry": registry.name, "save": save, "rc": proc.returncode,
        "start": start, "end": end, "wall_s": round(end - start, 2),
        "bundle": str(bundles[-1].relative_to(suite)) if bundles else None,
        "cmd": " ".join(cmd[1:]),
        "load": monitor.window(start, end) if monitor else None,
    }


def junit_times(path: Path) -> dict[str, float]:
    """Item name (``squeezenet_1``) -> wall seconds of the test case (setup + call + teardown)."""
    if not path.is_file():
        return {}
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" in name:
            out[name.split("[", 1)[1].rsplit("-", 1)[0]] = float(case.get("time", "nan"))
    return out


def load_bundle(suite: Path, entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Item name -> the item's record in the session bundle."""
    if not entry.get("bundle"):
        return {}
    items = {}
    for path in sorted((suite / entry["bundle"] / "items").glob("*.json")):
        record = json.loads(path.read_text())
        items[record["model"]] = record
    return items
