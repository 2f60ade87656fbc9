"""A driver for the container tests: it runs inside the job's container on the head node and
writes what it saw there as JSON to the file named by $DRIVER_OUT: its argv, its Python, the
image it runs in, whether the read-only mount can be written, and the Ray cluster (nodes and
GPUs, each node's hostname as Ray reports it). Only the standard library and Ray."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import ray


def main() -> int:
    ray.init(address="auto", logging_level="ERROR")
    alive = [n for n in ray.nodes() if n["Alive"]]
    read_only = Path(os.environ["RO_MOUNT"]) / "written-by-the-driver"
    try:
        read_only.write_text("x")
        writable = True
    except OSError:
        writable = False
    label = Path("/etc/nrl-test-image")
    seen = {
        "argv": sys.argv[1:],
        "python": sys.executable,
        "cwd": str(Path.cwd()),
        "image": label.read_text().strip() if label.exists() else None,
        "ray": ray.__version__,
        "ro_mount_writable": writable,
        "nodes": sorted(n["NodeManagerHostname"] for n in alive),
        "gpus": int(sum(n["Resources"].get("GPU", 0) for n in alive)),
    }
    Path(os.environ["DRIVER_OUT"]).write_text(json.dumps(seen))
    print("driver saw", seen, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
