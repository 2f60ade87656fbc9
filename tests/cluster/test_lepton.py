"""The Lepton backend's run command for real: what `render --backend lepton` puts in the job's
container command runs on the dev cluster's nodes as Lepton runs it on its workers.

Each worker is a process in one node's namespaces (network, PID, mounts) with a hostname of its
own (`<name>-<K>`, as Lepton's pods have), the environment Lepton gives it (LEPTON_JOB_WORKER_INDEX,
LEPTON_JOB_TOTAL_WORKERS, LEPTON_JOB_NAME, LEPTON_JOB_SERVICE_PREFIX, LEPTON_SUBDOMAIN,
LEPTON_RESOURCE_ACCELERATOR_NUM) plus the job spec's envs, and `<name>-<K>.<name>-job-svc`
resolving to node K, as Lepton's DNS does. No Slurm is involved: the workers find each other
through those names and the shared log dir only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.conftest import _node_pid1s, node_pids, node_processes, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

GPUS = 2  # what each worker declares to Ray (LEPTON_RESOURCE_ACCELERATOR_NUM)
HOSTS = Path("/etc/hosts")
DRIVER = """\
import os
import ray
ray.init(address="auto")
alive = [n for n in ray.nodes() if n["Alive"]]
hosts = sorted(n["NodeManagerHostname"] for n in alive)
gpus = int(ray.cluster_resources().get("GPU", 0))
print(f"cluster: {len(alive)} nodes, {gpus} GPUs on {' '.join(hosts)}", flush=True)
nccl = {k: os.environ.get(k, "unset") for k in ("NCCL_SOCKET_IFNAME", "NCCL_IGNORE_CPU_AFFINITY")}
print(f"nccl: {nccl}", flush=True)
"""


@dataclass
class Job:
    name: str
    nodes: int
    command: list[str]  # the Lepton container's command, from the rendered job spec
    envs: dict[str, str]  # the job spec's plain envs
    log_dir: Path  # <logs.base_dir>/<name>-logs
    shared: Path  # the storage every worker mounts


def _set_hosts_block(tag: str, lines: list[str]) -> None:
    """Rewrite /etc/hosts in place (the nodes see this very file) with `lines` in a block of
    its own, or without it when `lines` is empty."""
    begin, end = f"# BEGIN {tag}", f"# END {tag}"
    kept, inside = [], False
    for line in HOSTS.read_text().splitlines():
        if line == begin:
            inside = True
        elif line == end:
            inside = False
        elif not inside:
            kept.append(line)
    block = [begin, *lines, end] if lines else []
    with HOSTS.open("w") as f:  # same inode: a bind-mounted /etc/hosts stays the one seen
        f.write("\n".join(kept + block) + "\n")


@pytest.fixture
def lepton_dns(dev_cluster: None) -> Iterator[Callable[[str, int], None]]:  # noqa: ARG001
    """`resolve(name, n)`: worker K's name resolves to node K's address, as on Lepton."""
    tag = f"nrl-launch lepton test {os.getpid()}"

    def resolve(name: str, nodes: int) -> None:
        _set_hosts_block(
            tag, [f"10.77.0.{10 + k} {name}-{k}.{name}-job-svc {name}-{k}" for k in range(nodes)]
        )

    yield resolve
    _set_hosts_block(tag, [])


@pytest.fixture
def render_job(
    cli: Cli, ray_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Job]:
    """`render --backend lepton` of a job of `nodes` workers that runs DRIVER (or `driver`)."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NRL_LAUNCH_PROFILE", "")
    shared = tmp_path / "shared"
    (shared / "logs").mkdir(parents=True)
    (shared / "driver.py").write_text(DRIVER)

    def render(name: str, nodes: int, *sets: str, driver: str = "python driver.py") -> Job:
        job_file = tmp_path / f"{name}.yaml"
        job_file.write_text(
            json.dumps(
                {
                    "backend": "lepton",
                    "slurm": {"job_name": name, "nodes": nodes, "gpus_per_node": GPUS},
                    "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0"},
                    "logs": {"base_dir": str(shared / "logs")},
                    "setup": f"source {ray_venv}/bin/activate",
                    "driver": {"workdir": str(shared)},
                    "ray": {"timeouts": {"head_start_s": 20, "join_s": 60}},
                    "lepton": {
                        "resource_shape": f"gpu.{GPUS}xh100-80gb",
                        "node_group": "dev-cluster",
                        "mounts": [{"source": "node-nfs:dev", "mount_path": str(shared)}],
                    },
                }
            )
        )
        result = cli("render", "-f", str(job_file), "--json", *sets, "--", "bash", "-c", driver)
        assert result.code == 0, result.err
        spec = json.loads(result.out)["job_spec"]["spec"]
        envs = {e["name"]: e["value"] for e in spec.get("envs", []) if "value" in e}
        return Job(
            name, nodes, spec["container"]["command"], envs, shared / f"logs/{name}-logs", shared
        )

    return render


def start_workers(job: Job, tmp_path: Path, **lepton: str) -> list[subprocess.Popen[bytes]]:
    """Every worker of `job`, started as Lepton starts them: node K runs worker K (once an
    earlier test's Ray has left the nodes: these workers take the nodes without Slurm)."""
    wait_for_clean_nodes(90)
    pid1s = _node_pid1s()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "NRL_", "RAY_"))}
    workers = []
    for k in range(job.nodes):
        env = (
            base
            | job.envs
            | {
                "LEPTON_JOB_WORKER_INDEX": str(k),
                "LEPTON_JOB_TOTAL_WORKERS": str(job.nodes),
                "LEPTON_JOB_NAME": job.name,
                "LEPTON_JOB_SERVICE_PREFIX": job.name,
                "LEPTON_SUBDOMAIN": f"{job.name}-job-svc",
                "LEPTON_RESOURCE_ACCELERATOR_NUM": str(GPUS),
            }
            | lepton
        )
        argv = [
            *("nsenter", "-t", str(pid1s[f"node{k}"]), "-m", "-n", "-p", "-u", "--"),
            *("unshare", "--uts", "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh"),
            f"{job.name}-{k}",
            *job.command,
        ]
        with (tmp_path / f"worker-{k}.out").open("wb") as log:  # the worker keeps its own copy
            workers.append(
                subprocess.Popen(
                    argv, env=env, cwd=job.shared, stdout=log, stderr=subprocess.STDOUT
                )
            )
    return workers


def finish(workers: list[subprocess.Popen[bytes]], timeout: float = 180) -> list[int]:
    """Every worker's exit code (a hang bound, not a target)."""
    deadline = time.monotonic() + timeout
    try:
        return [w.wait(timeout=max(1.0, deadline - time.monotonic())) for w in workers]
    except subprocess.TimeoutExpired:
        for w in workers:
            w.kill()
        raise


def no_ray_left() -> bool:
    return not any(
        comm in ("raylet", "gcs_server") for comms in node_processes().values() for comm in comms
    )


@pytest.mark.parametrize("nodes", [2, 4])
def test_the_run_command_brings_up_ray_over_every_worker(
    render_job: Callable[..., Job],
    lepton_dns: Callable[[str, int], None],
    tmp_path: Path,
    nodes: int,
) -> None:
    job = render_job(f"lt-up{nodes}", nodes)
    lepton_dns(job.name, nodes)
    # Lepton's interface name, meant for its 8-GPU nodes (seed 004 unsets it on others).
    codes = finish(start_workers(job, tmp_path, NCCL_SOCKET_IFNAME="ib0"))
    assert codes == [0] * nodes, (tmp_path / "worker-0.out").read_text()
    driver = (job.log_dir / "ray-driver.log").read_text()
    hosts = " ".join(sorted(f"{job.name}-{k}" for k in range(nodes)))
    # Every worker joined under its own name, every GPU Lepton gave it declared to Ray.
    assert f"cluster: {nodes} nodes, {nodes * GPUS} GPUs on {hosts}" in driver
    nccl = {"NCCL_SOCKET_IFNAME": "unset", "NCCL_IGNORE_CPU_AFFINITY": "1"}  # as seed 004 sets
    assert f"nccl: {nccl}" in driver
    assert (job.log_dir / "ENDED").read_text() == "driver exited with code 0\n"
    assert (job.log_dir / "exit_code").read_text() == "0\n"
    readiness = json.loads((job.log_dir / "readiness.json").read_text())
    assert (readiness["nodes"], readiness["gpus"]) == (nodes, nodes * GPUS)
    head_log = (job.log_dir / "ray-head.log").read_text()
    assert f"Number of actors online: {nodes * GPUS}/{nodes * GPUS}" in head_log
    for k in range(1, nodes):
        assert "joining 10.77.0.10:" in (job.log_dir / f"ray-worker-{k}.log").read_text()
    timings = json.loads((job.log_dir / "timings.json").read_text())["phases"]
    assert {"head_up", "all_joined", "driver_started", "driver_ended", "ended"} <= set(timings)
    wait_until(no_ray_left, 60)


def test_a_worker_that_fails_its_setup_fails_the_job_at_once(
    render_job: Callable[..., Job],
    lepton_dns: Callable[[str, int], None],
    ray_venv: Path,
    tmp_path: Path,
) -> None:
    # Worker 1's setup fails; the join timeout (300 s) must not be what ends the job.
    setup = f'[ "$LEPTON_JOB_WORKER_INDEX" != 1 ] && source {ray_venv}/bin/activate'
    job = render_job("lt-setup", 2, "--set", f"setup={setup}", "--set", "ray.timeouts.join_s=300")
    lepton_dns(job.name, 2)
    started = time.monotonic()
    codes = finish(start_workers(job, tmp_path), timeout=120)
    assert codes[0] == 1
    assert time.monotonic() - started < 100  # far below the join timeout
    ended = (job.log_dir / "ENDED").read_text()
    assert ended == f"the setup command failed on node 1 ({job.name}-1.{job.name}-job-svc)\n"
    assert (job.log_dir / "exit_code").read_text() == "1\n"
    wait_until(no_ray_left, 60)


def test_the_driver_s_exit_code_is_worker_0_s(
    render_job: Callable[..., Job], lepton_dns: Callable[[str, int], None], tmp_path: Path
) -> None:
    job = render_job("lt-exit", 2, driver="python driver.py && exit 3")
    lepton_dns(job.name, 2)
    codes = finish(start_workers(job, tmp_path))
    assert codes == [3, 0]  # the job's code is worker 0's; the others end cleanly with it
    assert (job.log_dir / "ENDED").read_text() == "driver exited with code 3\n"
    wait_until(no_ray_left, 60)


def test_lepton_stopping_the_job_stops_ray_on_every_worker(
    render_job: Callable[..., Job], lepton_dns: Callable[[str, int], None], tmp_path: Path
) -> None:
    job = render_job("lt-stop", 2, driver="python driver.py && sleep 600")
    lepton_dns(job.name, 2)
    workers = start_workers(job, tmp_path)
    driver_log = job.log_dir / "ray-driver.log"
    wait_until(lambda: driver_log.exists() and "cluster: 2 nodes" in driver_log.read_text(), 120)
    # Lepton stops a job with SIGTERM to each worker's first process: the script itself.
    for k in range(job.nodes):
        _signal_worker(f"node{k}", signal.SIGTERM)
    codes = finish(workers, timeout=150)
    assert codes[0] == 143
    assert (job.log_dir / "ENDED").read_text().startswith("Lepton stopped ")
    assert (job.log_dir / "exit_code").read_text() == "143\n"
    wait_until(no_ray_left, 60)


def test_a_head_name_that_never_resolves_fails_within_its_bound(
    render_job: Callable[..., Job],
    tmp_path: Path,
    dev_cluster: None,  # noqa: ARG001
) -> None:
    job = render_job("lt-nodns", 2, "--set", "ray.timeouts.head_start_s=5")
    started = time.monotonic()
    codes = finish(start_workers(job, tmp_path), timeout=90)  # no lepton_dns: no names at all
    assert codes == [1, 1]
    assert time.monotonic() - started < 60
    # Worker 0 and worker 1 each wait 5 s for the name: whichever gives up first ends the job,
    # and either way its reason names the head's name and the bound.
    head = re.escape(f"{job.name}-0.{job.name}-job-svc")
    reason = (job.log_dir / "ENDED").read_text()
    assert re.fullmatch(
        rf"(the head's name {head} did not resolve|"
        rf"worker 1 could not resolve the head's name {head}) within 5s\n",
        reason,
    ), reason


def _signal_worker(node: str, sig: signal.Signals) -> None:
    """Signal the worker on `node` as Lepton does: the container's first process (the run
    command execs `bash .../job.sh lepton`, which a worker K > 0 execs into its node step)."""
    for pid in node_pids(node, "bash"):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[2:3] in ([b"lepton"], [b"worker"]):  # a worker execs its node step
            os.kill(pid, sig)
            return
    raise AssertionError(f"no worker script running on {node}")
