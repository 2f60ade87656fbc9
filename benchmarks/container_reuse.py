"""Container start with and without container.reuse, on the dev cluster, with a multi-GB image.

Builds a big image from scripts/test-image's: a copy of it with PAD GiB of files appended
(mksquashfs appends in place; base64 of random bytes, so that they neither dedupe nor
compress away entirely: zstd gets them to ~75 %, and unpacking them costs CPU as a real
image's libraries do). Then, on 2 nodes (node0, node1), a driver that does nothing (`true`):

  today  (container.reuse false): a job (first start), then a chain of 2 (--chain 2: the link
         starts when the job before it ends)
  reuse  (container.reuse true):  a job with nothing kept (first start: unpacks, keeps), a
         second job (second start), then a chain of 2

and reports, from each job's timings.json and slurm-<id>.out: container start (the batch step
starting Ray's steps -> the head's step running in its container: pyxis's import or reuse,
plus the claim step's srun with reuse), Slurm's start -> driver started, and the whole job
(Slurm's start -> ended). The kept containers are removed before and after; the big image is
deleted at the end.

    scripts/dev-cluster up && scripts/test-image build
    python benchmarks/container_reuse.py [--pad-gib 2] [--nodes 2] [--keep-image]

Needs root and the dev cluster with pyxis (run it under /tmp/nrl-dev-cluster.lock when the
cluster is shared). Each node's enroot data dir is a tmpfs on this machine: the image unpacked
takes PAD+0.2 GiB of memory per node while a job runs (and while it is kept).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "nrl_launch"]
RACY_S = 3.5  # node/reuse.sh: an image changed less than 3 s ago is never kept


def sh(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def build_image(base: Path, work: Path, pad_gib: float) -> Path:
    image = work / "big.sqsh"
    shutil.copyfile(base, image)
    pad = work / "pad"
    pad.mkdir()
    files = max(1, int(pad_gib * 16))  # 64 MiB of base64 each
    for i in range(files):
        with (pad / f"blob-{i:03d}.txt").open("wb") as out:
            subprocess.run(
                ["bash", "-c", "head -c 50331648 /dev/urandom | base64 -w 76"],
                stdout=out,
                check=True,
            )
    sh("mksquashfs", str(pad), str(image), "-no-progress", "-quiet")
    shutil.rmtree(pad)
    time.sleep(RACY_S)
    return image


def node_roots() -> dict[str, Path]:
    run = Path(os.environ.get("DEV_CLUSTER_DIR", "/var/lib/nrl-dev-cluster")) / "run"
    roots = {}
    for pid_file in run.glob("node-*.pid"):
        children = Path(f"/proc/{pid_file.read_text().strip()}/task").glob("*/children")
        for c in children:
            for child in c.read_text().split():
                roots[pid_file.stem.removeprefix("node-")] = Path(f"/proc/{child}/root")
    return roots


def drop_kept() -> None:
    for root in node_roots().values():
        for path in (root / "var/lib/enroot/data").glob("user-*/nrl-cache-*"):
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def submit(job: list[str], *extra: str) -> list[str]:
    """Submits, waits for the last job to end, returns the job ids."""
    result = sh(*CLI, "submit", "--wait", *job, *extra, "--", "true", cwd=job_dir)
    ids = [line.strip() for line in result.stdout.splitlines() if line.strip().isdigit()]
    # --wait follows the last job; the chain's others ended before it started.
    return ids


def measure(job_id: str, logs: Path) -> dict[str, float | bool]:
    log_dir = logs / f"{job_id}-logs"
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    out = (logs / f"slurm-{job_id}.out").read_text()
    return {
        "container_start": phases["head_step"] - phases["ray_steps"],
        "start_to_driver": phases["driver_started"] - phases["started"],
        "start_to_end": phases["ended"] - phases["started"],
        "reused": "reusing the container kept" in out,
    }


def main() -> None:
    global job_dir
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pad-gib", type=float, default=2.0)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--keep-image", action="store_true")
    args = parser.parse_args()
    base = Path(sh(str(REPO / "scripts" / "test-image"), "build").stdout.strip())
    work = Path(tempfile.mkdtemp(prefix="nrl-reuse-bench-", dir="/var/tmp"))
    job_dir = work
    try:
        started = time.monotonic()
        image = build_image(base, work, args.pad_gib)
        built = time.monotonic() - started
        size = image.stat().st_size
        listing = sh("unsquashfs", "-s", str(image)).stdout
        logs = work / "logs"
        os.environ["NRL_LAUNCH_STATE_DIR"] = str(work / "state")
        exclude = [] if args.nodes > 2 else ["--set", "slurm.exclude=node[2-3]"]
        job = [
            "--nodes", str(args.nodes), *exclude, "--container", str(image),
            "--mount", f"{work}", "--set", f"container.workdir={work}",
            "--log-dir", str(logs), "--time", "20", "-q",
        ]  # fmt: skip
        rows: list[tuple[str, str, dict[str, float | bool]]] = []
        drop_kept()
        off = [*job, "--set", "container.reuse=false"]
        on = [*job, "--set", "container.reuse=true"]
        for label, spec, extra in [
            ("today: first start", off, ()),
            ("today: chain of 2", off, ("--chain", "2")),
            ("reuse: first start (nothing kept)", on, ()),
            ("reuse: second start", on, ()),
            ("reuse: chain of 2", on, ("--chain", "2")),
        ]:
            for job_id in submit(spec, *extra):
                rows.append((label, job_id, measure(job_id, logs)))
                print(label, job_id, rows[-1][2], file=sys.stderr)
        kept = {
            node: [p.name for p in (root / "var/lib/enroot/data").glob("user-*/nrl-cache-*")]
            for node, root in sorted(node_roots().items())
        }
        print(f"# {platform.node()}: {os.cpu_count()} CPUs, {args.nodes} nodes")
        print(f"# image: {size / 2**30:.2f} GiB .sqsh ({built:.0f} s to build)")
        print(
            "# "
            + "\n# ".join(x for x in listing.splitlines() if "Compression" in x or "inodes" in x)
        )
        print(f"# kept after the runs: {kept}")
        print("| run | job | reused | container start, s | start -> driver, s | start -> end, s |")
        print("|---|---|---|---|---|---|")
        for label, job_id, m in rows:
            reused = "yes" if m["reused"] else "no"
            spans = " | ".join(
                f"{m[k]:.2f}" for k in ("container_start", "start_to_driver", "start_to_end")
            )
            print(f"| {label} | {job_id} | {reused} | {spans} |")
    finally:
        drop_kept()
        if not args.keep_image:
            shutil.rmtree(work, ignore_errors=True)


job_dir = Path.cwd()

if __name__ == "__main__":
    main()
