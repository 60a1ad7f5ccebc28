"""Make the recorded GPU bundle from the real CPU bundle cpu-a (see README.md).

Usage: python make_gpu_bundle.py cpu-a/<bundle> gpu-h100/<bundle>
"""

import json
import shutil
import sys
from pathlib import Path

GPU = {"name": "NVIDIA H100 80GB HBM3", "driver": "570.86.15", "vendor": "nvidia", "runtime": "12.8"}
CPU = {"model": "Intel(R) Xeon(R) Platinum 8480+", "logical_cores": 16, "physical_cores": 16}


def main(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    env = json.loads((dst / "environment.json").read_text())
    env["gpu"] = GPU
    env["cpu"].update(CPU)
    env["cpu"]["affinity"] = list(range(16))
    (dst / "environment.json").write_text(json.dumps(env, indent=2, sort_keys=True) + "\n")
    meta = json.loads((dst / "session_meta.json").read_text())
    meta["providers"] = ["cuda"]
    meta["argv"] = [*meta["argv"], "--aaco-provider=cuda"]
    (dst / "session_meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    for path in sorted((dst / "items").glob("*.json")):
        item = json.loads(path.read_text())
        item["provider"] = "cuda"
        item["fingerprint"].update(provider="CUDAExecutionProvider", gpu_name=GPU["name"], gpu_driver=GPU["driver"],
                                   cpu_model=CPU["model"], cpu_cores=CPU["logical_cores"])
        item["gpu"] = {"vendor": "nvidia", "logical_id": 0, "index": 0,
                       "uuid": "GPU-00000000-0000-0000-0000-000000000000", "pci_bus_id": "0000:18:00.0",
                       "name": GPU["name"], "mapped_by": "uuid", "clocks": {}}
        text = json.dumps(item, indent=2, sort_keys=True) + "\n"
        text = text.replace("[cpu]", "[cuda]").replace("-cpu]", "-cuda]")
        path.unlink()
        (path.parent / path.name.replace("-cpu.", "-cuda.")).write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
