"""`nrl-launch doctor` on the dev cluster: real Slurm answers, real probe jobs on real nodes.

Each dev-cluster node mounts a /tmp/ray of its own (scripts/dev-cluster, start_slurmd) while the
rest of the file system is shared: /tmp/ray is this machine's "node-local disk", the place a
job's cache must not be.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import nrl_launch
from tests.cluster.conftest import ON_NODE0_AND_1, enroot_state, node_pids, wait_for_clean_nodes
from tests.conftest import Cli, wait_until, without_warnings

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]
# The checks doctor makes before it submits anything, in order, on the dev cluster.
SLURM_CHECKS = [
    "slurm",
    "slurm.partition",
    "slurm.time",
    "slurm.account",
    "slurm.nodes",
    "slurm.gpus_per_node",
    "sbatch --test-only",
]
# Other jobs on the dev cluster may hold node0 and node1 for minutes.
PATIENT = ["--probe-timeout", "900"]


def checks(out: str) -> dict[str, list[str]]:
    """Each check's lines (`STATUS  NAME: DETAIL`), by name, in the order printed."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line[:6] in ("ok    ", "warn  ", "FAIL  "):
            found.setdefault(line[6:].split(": ", 1)[0], []).append(line)
    return found


@pytest.fixture(autouse=True)
def secrets_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (optional) secrets set, as a user's shell would have them: else doctor warns
    that the job runs without them (submit's own warning), and a job that fits is not all ok."""
    for name in ("HF_TOKEN", "WANDB_API_KEY"):
        monkeypatch.setenv(name, "set")


@pytest.fixture
def login_only(dev_cluster: None) -> Iterator[Path]:  # noqa: ARG001 - the nodes must be up
    """A dir that exists on this machine only: no node sees it. Under /var/lib/enroot, where
    each dev-cluster node mounts a disk of its own (not /tmp/ray, which is node-local too but
    which Ray leaves writable by every user: doctor fails a log dir there first)."""
    path = Path("/var/lib/enroot") / f"nrl-doctor-test-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    yield path
    path.rmdir()


def leftovers(*dirs: Path) -> list[Path]:
    return [p for d in dirs if d.is_dir() for p in d.glob(".nrl-doctor-*")]


def test_a_job_that_fits_passes_on_its_nodes(
    cli: Cli, cluster_job: list[str], tmp_path: Path
) -> None:
    hf = tmp_path / "hf"
    hf.mkdir()
    started = time.monotonic()
    result = cli(
        "doctor", "--on-nodes", *ON_NODE0_AND_1, *cluster_job, *PATIENT,
        "--set", f"caches.hf_home={hf}",
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.code == 0, result.out + result.err
    found = checks(result.out)
    assert list(found)[: len(SLURM_CHECKS)] == SLURM_CHECKS
    assert all(line.startswith("ok") for lines in found.values() for line in lines), result.out
    assert "  slurm.nodes = 2  (from --nodes)" in result.out
    assert "  setup = source " in result.out  # --on-nodes runs the setup: it is listed
    logs = tmp_path / "logs"  # does not exist yet: probed where submit will create it
    assert found["logs.base_dir"] == [
        f"ok    logs.base_dir: {logs} does not exist yet; submit creates it in {tmp_path} "
        "(writable)"
    ]
    for node in ("node0", "node1"):
        (line,) = found[node]
        assert line.startswith(f"ok    {node}: hostname {node}; 8 GPUs (CUDA_VISIBLE_DEVICES=")
        assert "; ray, version " in line
    assert found["caches.hf_home on nodes"] == [
        f"ok    caches.hf_home on nodes: all 2 nodes wrote a file in {hf} and saw each other's"
    ]
    assert not logs.exists()  # doctor created nothing
    assert leftovers(tmp_path, hf) == []
    wait_for_clean_nodes(60)
    print(f"doctor --on-nodes, 2 nodes: {took:.1f} s", file=sys.__stderr__)


@pytest.mark.parametrize(
    ("flags", "failed"),
    [
        (
            ["--partition", "nope"],
            {
                "slurm.partition": "'nope' (from --partition) does not exist; partitions: batch, "
                "debug, urgent",
                "sbatch --test-only": "Slurm refuses the request: sbatch: error: invalid "
                "partition specified: nope; allocation failure: Invalid partition name specified",
            },
        ),
        (
            ["--gpus-per-node", "16"],
            {
                "slurm.gpus_per_node": "16 (from --gpus-per-node), but partition batch's nodes "
                "have at most 8 GPUs (gres: gpu:8)",
                "sbatch --test-only": "Slurm refuses the request: allocation failure: Requested "
                "node configuration is not available",
            },
        ),
        (
            ["--partition", "debug", "--time", "2:00:00"],
            {
                "slurm.time": "2:00:00 (from --time) is longer than partition debug's time limit "
                "01:00:00",
                "sbatch --test-only": "Slurm refuses the request: allocation failure: Requested "
                "time limit is invalid (missing or exceeds some limit)",
            },
        ),
        (
            [
                "--container",
                "nvcr.io/nvidia/nemo-rl:v0.6.0",
                "--mount",
                "/nonexistent/nrl-doctor:/data",
                "--set",
                "container.workdir=/data",
            ],
            {  # submit's own line (doctor reports what submit would refuse, as submit says it)
                "container.mounts": "/nonexistent/nrl-doctor:/data: source /nonexistent/"
                "nrl-doctor does not exist, and pyxis refuses a mount without one on every node; "
                "create it or fix the mount (--no-check if only the compute nodes have it)"
            },
        ),
    ],
    ids=["no-such-partition", "16-gpus-per-node", "time-limit", "missing-mount-source"],
)
def test_a_check_that_fails_names_the_problem_and_exits_6(
    cli: Cli,
    dev_cluster: None,  # noqa: ARG001 - the cluster must be up
    tmp_path: Path,
    flags: list[str],
    failed: dict[str, str],
) -> None:
    result = cli("doctor", "--log-dir", str(tmp_path), *flags)
    assert result.code == 6, result.out + result.err
    fails = {
        name: line
        for name, lines in checks(result.out).items()
        for line in lines
        if line.startswith("FAIL")
    }
    assert fails == {name: f"FAIL  {name}: {detail}" for name, detail in failed.items()}
    count = f"{len(failed)} check" + ("s" if len(failed) > 1 else "")
    assert without_warnings(result.err) == (
        f"nrl-launch: error: doctor: {count} failed: {', '.join(failed)}\n"
    )


def test_on_nodes_finds_dirs_the_nodes_do_not_share(
    cli: Cli, cluster_job: list[str], login_only: Path
) -> None:
    """caches.hf_home exists on this machine only: no node can write there. caches.uv is
    /tmp/ray, which every node has, each its own: each node writes, none sees the others'."""
    result = cli(
        "doctor",
        "--on-nodes",
        *ON_NODE0_AND_1,
        *cluster_job,
        *PATIENT,
        "--set",
        f"caches.hf_home={login_only}",
        "--set",
        "caches.uv=/tmp/ray",
    )
    assert result.code == 6, result.out + result.err
    fails = [line for line in result.out.splitlines() if line.startswith("FAIL")]
    assert fails == [
        f"FAIL  caches.hf_home on node0: cannot write in {login_only}: No such file or directory",
        f"FAIL  caches.hf_home on node1: cannot write in {login_only}: No such file or directory",
        "FAIL  caches.uv on node0: does not see the files node1 wrote in /tmp/ray: it is not the "
        "same dir on every node (not shared storage)",
        "FAIL  caches.uv on node1: does not see the files node0 wrote in /tmp/ray: it is not the "
        "same dir on every node (not shared storage)",
    ]
    # This machine sees both dirs and can write in them: only the nodes tell.
    assert f"ok    caches.hf_home: {login_only} is writable" in result.out
    assert "ok    caches.uv: /tmp/ray is writable" in result.out
    assert without_warnings(result.err).startswith(
        "nrl-launch: error: doctor: 4 checks failed: caches.hf_home on "
    )
    assert leftovers(login_only, Path("/tmp/ray")) == []
    wait_for_clean_nodes(60)


def test_on_nodes_with_a_log_dir_the_nodes_cannot_see(
    cli: Cli, cluster_job: list[str], login_only: Path
) -> None:
    """The report goes to the log dir: the probe job fails there (not the node: its own
    --output is /dev/null), and doctor says where it looked."""
    job = [*cluster_job]
    job[job.index("--log-dir") + 1] = str(login_only)
    result = cli("doctor", "--on-nodes", *ON_NODE0_AND_1, *job, *PATIENT)
    assert result.code == 6, result.out + result.err
    fails = [line for line in result.out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1, result.out
    job_id = fails[0].removeprefix("FAIL  on nodes: probe job ").split()[0]
    assert fails[0] == (
        f"FAIL  on nodes: probe job {job_id} ended (FAILED, exit code 1) without writing its "
        f"report {login_only}/.nrl-doctor-{job_id}.out: can the nodes write in {login_only} "
        "(logs.base_dir)?"
    )
    drained = subprocess.run(
        ["sinfo", "-h", "-N", "-t", "drain,down", "-o", "%N"], capture_output=True, text=True
    )
    assert drained.stdout.strip() == ""  # the failed probe took no node out of service
    wait_for_clean_nodes(60)


def probe_job(out: str) -> str:
    return out.split("probe job ", 1)[1].split()[0]


def no_container_left(job_id: str) -> bool:
    """No node keeps a container (or its runtime dir) of the probe job: pyxis removes an
    unnamed one when its step ends."""
    ours = re.compile(rf"(?<![0-9]){job_id}(?![0-9])")
    return not any(
        ours.search(name)
        for node in ("node0", "node1")
        for names in enroot_state(node).values()
        for name in names
    )


def test_on_nodes_with_a_container_checks_inside_it(
    cli: Cli, container_job: list[str], tmp_path: Path
) -> None:
    """The setup command, Ray and the shared dirs are checked in the job's container, with the
    job's pyxis flags and mounts; the hostname and GPUs on the node. Only the image has
    /etc/nrl-test-image and /opt/venv (this machine's Ray is 2.60.0 too, elsewhere), and the
    cache is written at /shared/hf, where the container sees it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    assert not Path("/etc/nrl-test-image").exists() and not Path("/opt/venv").exists()
    started = time.monotonic()
    result = cli(
        "doctor", "--on-nodes", *ON_NODE0_AND_1, *container_job, *PATIENT,
        "--mount", f"{shared}:/shared",
        "--set", "caches.hf_home=/shared/hf",
        "--set", "setup=test -f /etc/nrl-test-image",
    )  # fmt: skip
    took = time.monotonic() - started
    assert result.code == 0, result.out + result.err
    found = checks(result.out)
    assert all(line.startswith("ok") for lines in found.values() for line in lines), result.out
    for node in ("node0", "node1"):
        (line,) = found[node]
        assert line.startswith(f"ok    {node}: hostname {node}; 8 GPUs (CUDA_VISIBLE_DEVICES="), (
            line
        )
        assert "; container: Debian GNU/Linux 12 (bookworm); " in line
        assert line.endswith("; ray, version 2.60.0 (/opt/venv/bin/ray)"), line
    assert found["logs.base_dir on nodes"] == [
        f"ok    logs.base_dir on nodes: all 2 nodes wrote a file in {tmp_path} and saw each other's"
    ]
    assert found["caches.hf_home on nodes"] == [
        f"ok    caches.hf_home on nodes: all 2 nodes wrote a file in {shared} and saw each other's"
    ]
    assert leftovers(tmp_path, shared) == []
    assert no_container_left(probe_job(result.out))
    print(f"doctor --on-nodes in a container, 2 nodes: {took:.1f} s", file=sys.__stderr__)


@pytest.mark.parametrize("case", ["image-not-squashfs", "mount-source-on-this-machine-only"])
def test_on_nodes_a_container_that_does_not_start_fails_on_each_node(
    cli: Cli,
    container_job: list[str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    case: str,
) -> None:
    """What passes the checks on this machine but not pyxis on the nodes: a file that is no
    squashfs image, or a mount source that only this machine has. Each node fails once, under
    the key, in pyxis's words."""
    job = [*container_job]
    if case == "image-not-squashfs":
        bad = tmp_path / "bad.sqsh"
        bad.write_bytes(os.urandom(64 * 1024))
        job[job.index("--container") + 1] = str(bad)
        key = "container.image"
        said = (
            f"container.image {bad} is not a squashfs image pyxis can start on {{node}}: "
            f'"pyxis: [ERROR] Invalid image format: {bad}"; make one with nrl-launch pull '
            "(enroot import)"
        )
    else:
        login_only: Path = request.getfixturevalue("login_only")
        job += ["--mount", f"{login_only}:/data"]
        key = "container.mounts"
        said = (
            f"the container.mounts source {login_only} does not exist on {{node}}: "
            f'"pyxis: --container-mounts: source path does not exist: {login_only}"; create it '
            "on storage every node sees, or fix container.mounts"
        )
    started = time.monotonic()
    result = cli("doctor", "--on-nodes", *ON_NODE0_AND_1, *job, *PATIENT)
    took = time.monotonic() - started
    assert result.code == 6, result.out + result.err
    assert [line for line in result.out.splitlines() if line.startswith("FAIL")] == [
        f"FAIL  {key} on {node}: {said.format(node=node)}" for node in ("node0", "node1")
    ]
    assert f"ok    {key}: " in result.out  # this machine's check passed
    assert without_warnings(result.err) == (
        f"nrl-launch: error: doctor: 2 checks failed: {key} on node0, {key} on node1\n"
    )
    assert leftovers(tmp_path) == []
    assert no_container_left(probe_job(result.out))
    print(f"doctor --on-nodes, {case}, 2 nodes: {took:.1f} s", file=sys.__stderr__)


def read_until(proc: subprocess.Popen[str], text: str, timeout: float = 120.0) -> str:
    """stdout lines of `proc` up to the first holding `text` (fails after `timeout` s)."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout:.0f} s; got:\n{seen}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        line = proc.stdout.readline() if ready else ""
        assert line or not ready, f"doctor ended before {text!r}:\n{seen}"
        seen += line
    return seen


def test_ctrl_c_cancels_the_probe_job(cluster_job: list[str], tmp_path: Path) -> None:
    # The probe's setup step hangs, so the job is running when Ctrl-C comes.
    job = [*cluster_job, "--set", "setup=sleep 600"]
    env = {**os.environ, "PYTHONPATH": str(Path(nrl_launch.__file__).parents[1])}
    proc = subprocess.Popen(
        [*CLI, "doctor", "--on-nodes", *ON_NODE0_AND_1, *job],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        # As from a terminal: a test run started in the background (`cmd &` without job
        # control) passes SIGINT on ignored, and Ctrl-C would then never reach doctor.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        seen = read_until(proc, ": RUNNING")
        job_id = seen.split("probe job ")[1].split()[0]
        # Ctrl-C once the setup hangs on both nodes, not while its step is still starting:
        # the dev cluster's Slurm tracks a step's processes by their parents
        # (proctrack/linuxproc), and a `sleep` forked just as the cancel's SIGTERM reaches its
        # bash is orphaned out of its reach (with proctrack/cgroup, as sites run, it is not).
        wait_until(lambda: all(node_pids(node, "sleep") for node in ("node0", "node1")), 60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert f"nrl-launch: warning: cancelled probe job {job_id}" in err
    assert "Traceback" not in err

    def state() -> str:
        return subprocess.run(
            ["squeue", "-h", "-j", job_id, "--states=all", "-o", "%T"],
            capture_output=True,
            text=True,
        ).stdout.strip()

    wait_until(lambda: state() in ("CANCELLED", ""), 60)
    assert leftovers(tmp_path) == []
    wait_for_clean_nodes(60)
