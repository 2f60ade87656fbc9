"""`bringup.py --compare`: nrl-launch's bring-up against the bare limit (and ray.sub, given its
path), side by side on the dev cluster, interleaved runs.

Every job is queued with plain `sbatch` through one wrapper that writes the time its batch
script starts (Slurm's StartTime, to the millisecond) and then runs the launcher's script; each
driver prints `FIRST <epoch>` as soon as it has connected to Ray and sees every node. The
figure is the time from one to the other:

- bare: the least a launcher can do (benchmarks/bare_ray.sh): `ray start` on every node at
  once (the workers retry until the head's GCS port answers), and the driver started with the
  job, so that its Ray import and connect overlap the bring-up. No bounded waits, no readiness,
  no failure handling, no token auth, no log dir: a limit, not a launcher. By default its head
  starts no dashboard (`--limit no-dashboard`, the limit of ../shared/bench's side-by-side
  script and of issue 37): Ray starts a head's own raylet only once its dashboard answers, so
  this is the lower limit; `--limit dashboard` keeps Ray's default, as the launchers have it.
- nrl-launch: `nrl-launch render` of the same job (runtime none, Ray from --ray-venv), with
  the #SBATCH flags it renders passed to sbatch; the driver starts once every node has joined.
- ray.sub: the given ray.sub, with COMMAND set to the driver. It runs in a container (--image),
  so nrl-launch then runs a second time in the same image (`nrl-launch (container)`), and that
  pair is the like-for-like comparison. Two changes let ray.sub run on the dev cluster, neither
  on its bring-up path: its `--mpi=pmix` is dropped (PMIx's step setup times out in the dev
  cluster's namespace nodes, and only MPI programs use it; Ray does not), and pyxis is told to
  make its containers writable (PYXIS_CONTAINER_WRITABLE=1: ray.sub writes /launch-head.sh,
  as sites with writable enroot roots allow). pyxis 0.24 keeps named containers after a job
  (container_scope=global, its default) and a later step of that name reuses one: ray.sub's
  `ray-head` and `ray-worker-K` would then skip the image's unpacking, which a job's first run
  on a node pays (and nrl-launch's per-job names always pay). So before each ray.sub run its
  containers are removed from the nodes, and every launcher starts from the image.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
_SCRIPT = Path(sys.executable).with_name("nrl-launch")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "nrl_launch"]
GPUS = 8  # the dev cluster's fake GPUs per node
# Connects, waits until every node is alive (at once for a launcher that waits itself), then
# prints its first line.
DRIVER = (
    "import sys, time, ray\n"
    "ray.init(address='auto', logging_level='ERROR', log_to_driver=False)\n"
    "while len([n for n in ray.nodes() if n['Alive']]) < int(sys.argv[1]): time.sleep(0.05)\n"
    "print('FIRST', time.time(), flush=True)\n"
)
# Writes when the batch script starts, then runs the launcher's script in its place.
WRAPPER = '#!/usr/bin/env bash\ndate +%s.%N >"$BENCH_OUT/$SLURM_JOB_ID.start"\nexec bash "$1"\n'


class Compare:
    def __init__(
        self,
        work: Path,
        ray_venv: Path,
        image: Path | None,
        limit: str = "no-dashboard",
        nrl_flags: tuple[str, ...] = (),
    ) -> None:
        self.work, self.ray_venv, self.image = work, ray_venv, image
        self.nrl_flags = nrl_flags  # more flags for nrl-launch's render (--set ray.dashboard=false)
        self.head_args = "--include-dashboard=false" if limit == "no-dashboard" else ""
        self.out = work / "out"
        self.out.mkdir(parents=True, exist_ok=True)
        (work / "logs").mkdir()  # sbatch opens --output there (submit would have made it)
        (work / "driver.py").write_text(DRIVER)
        (work / "wrapper.sh").write_text(WRAPPER)
        self.env = dict(os.environ, BENCH_OUT=str(self.out), NRL_LAUNCH_STATE_DIR=str(work))
        self.jobs: set[str] = set()

    def sbatch(self, flags: list[str], script: Path, env: dict[str, str] | None = None) -> str:
        argv = ["sbatch", "--parsable", *flags, str(self.work / "wrapper.sh"), str(script)]
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env or self.env, cwd=self.work, check=False
        )
        if done.returncode != 0:
            sys.exit(f"sbatch failed: {done.stderr.strip()}")
        job_id = done.stdout.strip().split(";")[0]
        self.jobs.add(job_id)
        return job_id

    def wait_gone(self, job_id: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
            if not out.stdout.strip():
                return
            time.sleep(0.5)
        subprocess.run(["scancel", job_id], check=False)
        sys.exit(f"job {job_id} still queued or running after {timeout:.0f}s")

    def span(self, job_id: str, driver_log: Path) -> float:
        """Start of the batch script -> the driver's first line, seconds."""
        start = float((self.out / f"{job_id}.start").read_text())
        for line in driver_log.read_text(errors="replace").splitlines():
            if line.startswith("FIRST "):
                return float(line.split()[1]) - start
        sys.exit(f"job {job_id}: no FIRST line in {driver_log}")

    def bare(self, nodes: int) -> float:
        flags = [f"--nodes={nodes}", "--exclusive", "--time=10", f"--output={self.out}/%j.out"]
        env = dict(self.env, RAY_VENV=str(self.ray_venv), DRIVER=str(self.work / "driver.py"))
        env["BARE_HEAD_ARGS"] = self.head_args
        job_id = self.sbatch(flags, HERE / "bare_ray.sh", env)
        self.wait_gone(job_id)
        return self.span(job_id, self.out / f"{job_id}.driver")

    def nrl_launch(self, nodes: int, container: bool = False) -> float:
        script = self.work / f"nrl-{nodes}.sbatch"
        if container:  # Ray from the image, the work dir mounted as ray.sub's is
            where = ["--container", str(self.image), "--mount", f"{self.work}:{self.work}"]
        else:
            where = ["--container-runtime", "none"]
            where += ["--set", f"setup=source {self.ray_venv}/bin/activate"]
        render = subprocess.run(
            [
                *CLI,
                *("render", "--json", "-o", str(script), "--nodes", str(nodes)),
                *where,
                *("--time", "10", "--log-dir", str(self.work / "logs")),
                *self.nrl_flags,
                *("--", "python", str(self.work / "driver.py"), str(nodes)),
            ],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if render.returncode != 0:
            sys.exit(f"nrl-launch render failed: {render.stderr.strip()}")
        argv = json.loads(render.stdout)["argv"]
        flags = [a for a in argv[1:-1] if a.startswith("--") and a != "--parsable"]
        job_id = self.sbatch(flags, script)
        self.wait_gone(job_id)
        return self.span(job_id, self.work / "logs" / f"{job_id}-logs" / "ray-driver.log")

    def ray_sub(self, ray_sub: Path, nodes: int) -> float:
        command = f"python {shlex.quote(str(self.work / 'driver.py'))} {nodes}"
        env = dict(
            self.env,
            COMMAND=command,
            CONTAINER=str(self.image),
            MOUNTS=f"{self.work}:{self.work},{REPO}:{REPO}",
            BASE_LOG_DIR=str(self.work / "raysub-logs"),
            GPUS_PER_NODE=str(GPUS),
            CPUS_PER_WORKER="1",
            PYXIS_CONTAINER_WRITABLE="1",
        )
        # Its containers from the last run would skip the image's unpacking (see above): gone
        # from every node first.
        every = subprocess.run(["sinfo", "-h", "-o", "%D"], capture_output=True, text=True)
        subprocess.run(
            [
                *("srun", f"--nodes={max(int(n) for n in every.stdout.split())}"),
                *("--ntasks-per-node=1", "--exclusive", "--time=2", "bash", "-c"),
                "enroot list | grep -E '^pyxis_ray-(head|worker)' | xargs -r enroot remove -f",
            ],
            capture_output=True,
            env=self.env,
            check=False,
        )
        script = self.work / "ray.sub"
        text = ray_sub.read_text()
        script.write_text(text.replace('COMMON_SRUN_ARGS+=" --mpi=pmix"', ": no PMIx here"))
        flags = [f"--nodes={nodes}", "--exclusive", "--time=10", f"--output={self.out}/%j.out"]
        # ray.sub passes `-A $SLURM_JOB_ACCOUNT` to its steps: the job needs one.
        job_id = self.sbatch([*flags, "--account=bench"], script, env)
        self.wait_gone(job_id)
        return self.span(job_id, self.work / "raysub-logs" / f"{job_id}-logs" / "ray-driver.log")


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def compare(
    work: Path,
    ray_venv: Path,
    node_counts: list[int],
    runs: int,
    ray_sub: Path | None,
    image: Path | None,
    limit: str = "no-dashboard",
    nrl_flags: tuple[str, ...] = (),
) -> None:
    """RUNS of each launcher per node count, interleaved; prints the table and the ratios."""
    bench = Compare(work, ray_venv, image, limit, nrl_flags)
    launchers: dict[str, Callable[[int], float]] = {
        "bare limit": bench.bare,
        "nrl-launch": bench.nrl_launch,
    }
    if ray_sub is not None:
        launchers["nrl-launch (container)"] = lambda n: bench.nrl_launch(n, container=True)
        launchers["ray.sub"] = lambda n: bench.ray_sub(ray_sub, n)
    results: dict[tuple[str, int], list[float]] = {}
    for nodes in node_counts:
        for run in range(runs):
            for name, launch in launchers.items():
                seconds = launch(nodes)
                time.sleep(3)  # let the last job's Ray finish exiting on the nodes
                results.setdefault((name, nodes), []).append(seconds)
                print(f"{nodes} nodes, run {run + 1}: {name} {seconds:.2f}s", file=sys.stderr)
    print(
        f"# Job start -> the driver's first line with every node, median of {runs} interleaved "
        f"runs (min-max), seconds ({os.cpu_count()} cores; the bare limit's head: {limit}; "
        f"nrl-launch's flags: {' '.join(nrl_flags) or 'none'})\n"
    )
    print("| launcher | " + " | ".join(f"{n} nodes" for n in node_counts) + " |")
    print("|---|" + "---|" * len(node_counts))
    for name in launchers:
        print(f"| {name} | " + " | ".join(_median(results[(name, n)]) for n in node_counts) + " |")
    print()
    pairs = [(name, "bare limit") for name in launchers if name != "bare limit"]
    if ray_sub is not None:  # the like-for-like pair: both in the same image
        pairs.append(("nrl-launch (container)", "ray.sub"))
    for name, base in pairs:
        ratios = [
            statistics.median(results[(name, n)]) / statistics.median(results[(base, n)])
            for n in node_counts
        ]
        print(
            f"{name} / {base}: "
            + ", ".join(f"{r:.2f}x at {n} nodes" for r, n in zip(ratios, node_counts, strict=True))
        )
    print(flush=True)
