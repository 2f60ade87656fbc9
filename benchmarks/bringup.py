"""How long the Ray bring-up takes on the dev cluster, without a container and in one.

Bring-up: for each node count, submits RUNS real jobs per container runtime whose driver
connects to Ray and exits, interleaved (none, container, none, container, ...) so that whatever
else loads the machine hits both alike, and reports, from each job's timings.json, the median
time from the job's start on its first node to the head's and every worker's step running
(their ray-*.log's birth time: for a container, once pyxis has created and started it), to
(a) the Ray head listening, (b) every node joined, (c) the driver started; also submission ->
start (Slurm's scheduling) and the whole job (sbatch -> gone). `none` takes Ray from RAY_VENV
(a setup command); `container` runs every node in IMAGE (pyxis/enroot, Ray from inside the
image, the repo mounted read-only as the workdir).

Attach (--attach-runs N): one 2-node interactive job per runtime, both up at once, then N
rounds of `nrl-launch attach JOBID --node K -- true` on nodes 0 and 1 of each, interleaved,
timed from the command to its exit; a bare `srun --overlap ... true` into the none job is the
baseline. Both jobs are stopped after.

Container start (--enroot-runs N): on node 1 of the none job, N times `enroot create` of IMAGE,
`enroot start` of it running `true`, and `enroot remove` (what pyxis runs for a named
container), and a step with `--container-image=IMAGE` (pyxis creates, starts and removes an
unnamed container) against the same step without it.

    scripts/dev-cluster up && scripts/test-image build
    python benchmarks/bringup.py [--ray-venv .venv] [--nodes 2 4] [--runs 3]
        [--runtimes none container] [--image X.sqsh] [--attach-runs 5] [--enroot-runs 3]
    python benchmarks/bringup.py --compare [--nodes 2 4] [--runs 5] [--ray-sub PATH]
        [--limit no-dashboard|dashboard] [--nrl-flags '--set ray.dashboard=false']

Needs root and the dev cluster (scripts/dev-cluster) with pyxis for the container runs; writes
nothing outside a temp dir. Other users' jobs are watched with squeue and named at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).with_name("nrl-launch")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "nrl_launch"]
DRIVER = "import ray; ray.init(address='auto'); print(len(ray.nodes()), 'nodes')"
# (label, phase it ends at, phase it starts from)
SPANS = [
    ("queued: submit -> job start", "started", "submitted"),
    ("start -> Ray head up", "head_up", "started"),
    ("start -> all nodes joined", "all_joined", "started"),
    ("start -> driver started", "driver_started", "started"),
]
HEAD_STEP = "start -> head's step running (its log created)"
WORKER_STEPS = "start -> every worker's step running"
WHOLE = "whole job: submit -> gone (as `submit --wait` sees it)"
RUNTIMES = ("none", "container")


class Bench:
    """What every job of one benchmark run shares: its temp dir, state dir, Ray and image."""

    def __init__(self, work: Path, ray_venv: Path, image: Path | None) -> None:
        self.work, self.ray_venv, self.image = work, ray_venv, image
        self.env = dict(os.environ, NRL_LAUNCH_STATE_DIR=str(work / "state"))
        self.our_jobs: set[str] = set()

    def job_flags(self, runtime: str) -> list[str]:
        """conftest's cluster_job (none) and container_job (container) flags."""
        common = ["--log-dir", str(self.work / "logs"), "--time", "10"]
        if runtime == "none":
            setup = f"setup=source {self.ray_venv}/bin/activate"
            return ["--container-runtime", "none", "--set", setup, *common]
        return [
            "--container",
            str(self.image),
            "--mount",
            f"{REPO}:{REPO}:ro",
            "--set",
            f"container.workdir={REPO}",
            *common,
        ]

    def cli(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def one_run(bench: Bench, nodes: int, runtime: str) -> dict[str, float]:
    """One `submit --wait` job whose driver connects to Ray and exits: its spans in seconds."""
    argv = ["submit", "--wait", "--json", "--nodes", str(nodes), *bench.job_flags(runtime)]
    start = time.monotonic()
    done = bench.cli(*argv, "--", "python", "-c", DRIVER)
    total = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{runtime} job failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    result = json.loads(done.stdout)
    bench.our_jobs.add(str(result["job_id"]))
    log_dir = Path(result["log_dir"])
    timings = json.loads((log_dir / "timings.json").read_text())
    phases = timings["phases"]
    spans = {label: phases[end] - phases[begin] for label, end, begin in SPANS}
    # A node's step creates its ray-*.log first thing (in its container, if any): the file's
    # birth time is when the step began to run there.
    started = timings["submitted_at"] + phases["started"]
    head = born(log_dir / "ray-head.log")
    spans[HEAD_STEP] = head - started
    spans[WORKER_STEPS] = max((born(p) for p in log_dir.glob("ray-worker-*.log")), default=head)
    spans[WORKER_STEPS] -= started
    spans[WHOLE] = total
    return spans


def born(path: Path) -> float:
    """The file's birth time (statx; ext4 on the dev cluster's machine), epoch seconds; NaN
    where the filesystem keeps none (stat prints 0)."""
    out = subprocess.run(
        ["stat", "-c", "%.9W", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return float(out) or float("nan")


class SqueueWatch:
    """Polls squeue every 2 s in a thread: every job seen (id -> name, user, nodes)."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(
                ["squeue", "-h", "-o", "%i|%j %u, %D node(s)"], capture_output=True, text=True
            ).stdout
            for line in out.splitlines():
                job_id, _, what = line.partition("|")
                self.seen.setdefault(job_id.strip(), what)
            self._stop.wait(2)

    def __enter__(self) -> SqueueWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def interactive_jobs(bench: Bench, runtimes: list[str]) -> Iterator[dict[str, str]]:
    """A 2-node interactive job per runtime, all up (every node joined); stopped after."""
    jobs: dict[str, str] = {}
    try:
        for runtime in runtimes:
            done = bench.cli(
                "submit", "--interactive", "-q", "--nodes", "2", *bench.job_flags(runtime)
            )
            if done.returncode != 0:
                sys.exit(f"interactive {runtime} job refused:\n{done.stderr}")
            jobs[runtime] = done.stdout.strip()
            bench.our_jobs.add(jobs[runtime])
        # Others' jobs may hold the nodes for a while (up to their time limit): be patient.
        deadline = time.monotonic() + 1800
        for runtime, job_id in jobs.items():
            said = ""
            while True:
                status = json.loads(bench.cli("status", job_id, "--json").stdout)["jobs"][0]
                if "all 2 nodes joined" in status["detail"]:
                    break
                if status["phase"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
                    sys.exit(f"interactive {runtime} job {job_id} ended: {status['detail']}")
                if time.monotonic() > deadline:
                    sys.exit(f"interactive {runtime} job {job_id} not up: {status['detail']}")
                if status["phase"] != said:
                    said = status["phase"]
                    print(f"interactive {runtime} job {job_id}: {said}", file=sys.stderr)
                time.sleep(1)
        yield jobs
    finally:
        for job_id in jobs.values():
            if bench.cli("stop", job_id, "--wait", timeout=180).returncode != 0:
                bench.cli("cancel", job_id)


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds from starting argv to its exit; it must succeed."""
    start = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL
    )
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took


def job_nodes(job_id: str) -> list[str]:
    node_list = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return subprocess.run(
        ["scontrol", "show", "hostnames", node_list], capture_output=True, text=True, check=True
    ).stdout.split()


def on_node(job_id: str, node: str, *extra: str) -> list[str]:
    """srun of one task on `node` inside the running job, beside its steps."""
    return ["srun", "--overlap", f"--jobid={job_id}", "-N1", "-n1", "-w", node, *extra]


def attach_latency(bench: Bench, jobs: dict[str, str], runs: int) -> dict[str, list[float]]:
    """N interleaved rounds of attach into each job's nodes 0 and 1, and the srun baseline."""
    rows: list[tuple[str, list[str]]] = []
    for runtime, job_id in jobs.items():
        for k in ("0", "1"):
            label = f"`attach --node {k} -- true`, {runtime}"
            rows.append((label, [*CLI, "attach", job_id, "--node", k, "--", "true"]))
    if "none" in jobs:
        nodes = job_nodes(jobs["none"])
        for index, node in enumerate(nodes[:2]):
            label = f"baseline: `srun --overlap -w <node {index}> true`, none"
            rows.append((label, on_node(jobs["none"], node, "true")))
    found: dict[str, list[float]] = {label: [] for label, _ in rows}
    for run in range(runs):
        for label, argv in rows:
            found[label].append(timed(argv, bench.env))
        print(f"attach round {run + 1}: done", file=sys.stderr)
    return found


ENROOT_STEPS = """
set -e
name=nrl-bench-$$
t0=$(date +%s.%N)
enroot create --name "$name" "$1" >/dev/null
t1=$(date +%s.%N)
enroot start "$name" true
t2=$(date +%s.%N)
enroot remove --force "$name" >/dev/null
t3=$(date +%s.%N)
echo "$t0 $t1 $t2 $t3"
"""


def container_start(bench: Bench, job_id: str, runs: int) -> dict[str, list[float]]:
    """enroot's steps for one container on one node, and a pyxis step against a plain one."""
    node = job_nodes(job_id)[1]
    image = str(bench.image)
    pyxis = [f"--container-image={image}", "--no-container-mount-home"]
    found: dict[str, list[float]] = {}
    for _ in range(runs):
        out = subprocess.run(
            on_node(job_id, node, "bash", "-c", ENROOT_STEPS, "enroot-steps", image),
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout.split()
        t = [float(x) for x in out[-4:]]
        for label, took in (
            (f"`enroot create` of the image on {node}", t[1] - t[0]),
            ("`enroot start NAME true`", t[2] - t[1]),
            ("`enroot remove --force NAME`", t[3] - t[2]),
        ):
            found.setdefault(label, []).append(took)
        plain = timed(on_node(job_id, node, "true"))
        contained = timed(on_node(job_id, node, *pyxis, "true"))
        found.setdefault("step `srun ... true`, no container", []).append(plain)
        found.setdefault("step `srun --container-image=IMAGE ... true`", []).append(contained)
    return found


def spread(values: list[float], digits: int = 1) -> str:
    low, mid, high = (
        f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )
    return f"{mid} ({low}-{high})"


def print_table(head: list[str], rows: dict[str, list[str]]) -> None:
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---|" * (len(head) - 1))
    for label, cells in rows.items():
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(flush=True)


def bringup(bench: Bench, node_counts: list[int], runtimes: list[str], runs: int) -> None:
    """RUNS jobs per node count and runtime, interleaved; prints the table of their spans."""
    results: dict[tuple[int, str], list[dict[str, float]]] = {}
    for nodes in node_counts:
        for run in range(runs):
            for runtime in runtimes:
                spans = one_run(bench, nodes, runtime)
                results.setdefault((nodes, runtime), []).append(spans)
                print(
                    f"{nodes} nodes, {runtime}, run {run + 1}: "
                    + ", ".join(f"{k.split(':')[0]} {v:.1f}s" for k, v in spans.items()),
                    file=sys.stderr,
                )
    print(
        f"# Ray bring-up on the dev cluster, median of {runs} runs, (min-max) "
        f"({platform.machine()}, {os.cpu_count()} cores)\n"
    )
    columns = [(n, r) for n in node_counts for r in runtimes]
    print_table(
        ["span (s)", *(f"{n} nodes, {r}" for n, r in columns)],
        {
            label: [spread([s[label] for s in results[c]]) for c in columns]
            for label in [
                SPANS[0][0],
                HEAD_STEP,
                WORKER_STEPS,
                *(x for x, _, _ in SPANS[1:]),
                WHOLE,
            ]
        },
    )


def default_image() -> Path | None:
    done = subprocess.run(
        [str(REPO / "scripts" / "test-image"), "path"], capture_output=True, text=True
    )
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ray-venv", type=Path, default=Path(sys.prefix))
    parser.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    parser.add_argument("--image", type=Path, help="default: `scripts/test-image path`")
    parser.add_argument("--attach-runs", type=int, default=5, help="0: no attach timings")
    parser.add_argument("--enroot-runs", type=int, default=3, help="0: no container breakdown")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="nrl-launch against the bare limit (and --ray-sub), job start -> driver's first "
        "line, interleaved (benchmarks/bringup_compare.py)",
    )
    parser.add_argument("--ray-sub", type=Path, help="with --compare: a ray.sub to run too")
    parser.add_argument(
        "--limit",
        choices=["no-dashboard", "dashboard"],
        default="no-dashboard",
        help="with --compare: the bare limit's head without Ray's dashboard (its raylet starts "
        "at once) or with it (Ray's default)",
    )
    parser.add_argument(
        "--nrl-flags",
        default="",
        help="with --compare: more flags for nrl-launch's job, e.g. '--set ray.dashboard=false'",
    )
    args = parser.parse_args()
    ray_venv = args.ray_venv.resolve()
    if args.compare:
        from bringup_compare import compare

        image = (args.image or default_image()) if args.ray_sub else None
        with tempfile.TemporaryDirectory(prefix="nrl-compare-") as tmp:
            compare(
                Path(tmp), ray_venv, args.nodes, args.runs, args.ray_sub, image, args.limit,
                tuple(shlex.split(args.nrl_flags)),
            )  # fmt: skip
        return 0
    if "none" in args.runtimes and not (ray_venv / "bin" / "ray").exists():
        sys.exit(f"{ray_venv} has no bin/ray: pip install -e '.[local]' there")
    image = (args.image or default_image()) if "container" in args.runtimes else None
    if "container" in args.runtimes and not (image and image.is_file()):
        sys.exit(f"no container image at {image}: run scripts/test-image build, or pass --image")

    with (
        tempfile.TemporaryDirectory(prefix="nrl-bringup-") as tmp,
        SqueueWatch() as watch,
    ):
        bench = Bench(Path(tmp), ray_venv, image.resolve() if image else None)
        print(f"Image: {bench.image}\n" if image else "No container runs.\n")
        bringup(bench, args.nodes, args.runtimes, args.runs)
        if args.attach_runs or (args.enroot_runs and image and "none" in args.runtimes):
            with interactive_jobs(bench, args.runtimes) as jobs:
                if args.attach_runs:
                    attach = attach_latency(bench, jobs, args.attach_runs)
                    print(
                        f"# Attach into a running 2-node interactive job, {args.attach_runs} runs\n"
                    )
                    print_table(
                        ["command", "wall s"], {k: [spread(v, 2)] for k, v in attach.items()}
                    )
                if args.enroot_runs and image and "none" in jobs:
                    start = container_start(bench, jobs["none"], args.enroot_runs)
                    print(f"# A container's start on one node, {args.enroot_runs} runs\n")
                    print_table(["step", "s"], {k: [spread(v, 2)] for k, v in start.items()})
    others = {job: what for job, what in watch.seen.items() if job not in bench.our_jobs}
    print(
        "Other users' jobs seen in squeue while it ran: "
        + (
            "; ".join(f"{j} ({w})" for j, w in sorted(others.items(), key=lambda x: int(x[0])))
            or "none"
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
