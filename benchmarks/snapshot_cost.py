"""What submit's code snapshot (driver.snapshot) costs on a checkout: wall time, files, bytes.

    python benchmarks/snapshot_cost.py CHECKOUT [--runs N] [--base DIR]

Runs the snapshot step exactly as submit does (nrl_launch.jobs.snapshot.freeze: git's listing,
then the copy) N times into a fresh base dir each time, and prints the first run and the median
of all, with git's listing alone timed apart. Each copy is removed after it is measured.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from nrl_launch.jobs import snapshot
from nrl_launch.spec import LaunchSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--base", type=Path, default=None, help="where the copies go (tmp)")
    args = parser.parse_args()
    spec = LaunchSpec.model_validate({"driver": {"command": ["python", "x.py"]}})
    walls, listings, cpus = [], [], []
    files = size = 0
    for _ in range(args.runs):
        base = Path(tempfile.mkdtemp(dir=args.base, prefix="snapshot-bench-"))
        started = time.perf_counter()
        root = snapshot._toplevel(args.checkout)
        assert root is not None, f"{args.checkout} is not in a git checkout"
        snapshot._listed(root)
        listings.append(time.perf_counter() - started)
        started, cpu = time.perf_counter(), _cpu()
        _, copied, note = snapshot.freeze(spec, args.checkout, base)
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
        assert copied is not None, note
        files, size = copied.files, copied.bytes
        shutil.rmtree(base)
    print(f"checkout {args.checkout}: {files} files, {size / 2**20:.1f} MiB copied")
    print(
        f"snapshot step (freeze): first {walls[0] * 1000:.0f} ms, median "
        f"{statistics.median(walls) * 1000:.0f} ms, max {max(walls) * 1000:.0f} ms "
        f"({args.runs} runs)"
    )
    print(f"  CPU (this process and git): median {statistics.median(cpus) * 1000:.0f} ms")
    print(
        f"  of which git's listing (rev-parse + 2 ls-files): median "
        f"{statistics.median(listings) * 1000:.0f} ms"
    )


def _cpu() -> float:
    """CPU seconds of this process and its finished children (git): less swayed than wall
    time by a busy machine."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()
