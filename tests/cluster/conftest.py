"""The dev cluster (scripts/dev-cluster) and a Ray for its jobs.

Cluster tests run real jobs on a real Slurm with real Ray. Where the cluster cannot run (not
root, no namespaces) they skip with the reason; in CI they must run, so there they fail instead.
The jobs take Ray from the `ray_venv` fixture (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.login import LoginHost, make_login_host, process_children
from tests.conftest import REPO, Cli, unavailable
from tests.helpers import git

DEV_CLUSTER = REPO / "scripts" / "dev-cluster"
# What the repo's tiny-rl holds that a checkout of it would not (its runs' output, its env).
CHECKOUT_IGNORES = [
    ".venv",
    "__pycache__",
    "uv.lock",
    "logs",
    "results",
    "local-*",
    "code-snapshots",
]
# A 2-node job on node0 (the head) and node1, whichever nodes an earlier job still holds.
ON_NODE0_AND_1 = ["--nodes", "2", "--set", "slurm.exclude=node[2-3]"]
# tiny-rl's GRPO config, from its directory (the `project` fixture's cwd).
GRPO = "examples/configs/grpo_tiny.yaml"


def runs(where: Path) -> list[Path]:
    """The driver's log dirs under `where`/logs, one per run (exp_001, exp_002, ...)."""
    return sorted((where / "logs").glob("exp_*"))


def metrics(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="session")
def dev_cluster() -> Iterator[None]:
    # DEV_CLUSTER_SLURM=24.11: the cluster runs in a root filesystem with that Slurm, whose
    # clients alone talk to it; there (scripts/dev-cluster exec) /etc/nrl-dev-cluster-slurm says so.
    wanted = os.environ.get("DEV_CLUSTER_SLURM")
    marker = Path("/etc/nrl-dev-cluster-slurm")
    here = marker.read_text().strip() if marker.exists() else "22.05"
    if wanted and wanted != here:
        pytest.fail(
            f"DEV_CLUSTER_SLURM={wanted}: run the tests inside its root, where its clients are: "
            f"DEV_CLUSTER_SLURM={wanted} scripts/dev-cluster exec -- python -m pytest ..."
        )
    check = subprocess.run([str(DEV_CLUSTER), "check"], capture_output=True, text=True)
    if check.returncode != 0:
        unavailable(f"the dev cluster cannot run here: {check.stdout.strip()}")
    up = subprocess.run(
        [str(DEV_CLUSTER), "up"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if up.returncode != 0:
        pytest.fail(f"scripts/dev-cluster up failed:\n{up.stderr[-3000:]}")
    yield


@pytest.fixture(scope="session")
def login_host(
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LoginHost]:
    """The login host (tests/cluster/login.py): `ssh -F login_host.ssh_config login CMD` runs
    CMD there as nrl-user, with nrl-launch on PATH."""
    yield from make_login_host(tmp_path_factory.mktemp("laptop"))


@pytest.fixture
def cluster_job(
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    ray_venv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> list[str]:
    """The flags every cluster job shares: no container, Ray from the test venv, logs in tmp."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return [
        "--container-runtime",
        "none",
        "--set",
        f"setup=source {ray_venv}/bin/activate",
        "--log-dir",
        str(tmp_path / "logs"),
        "--time",
        "10",
    ]


@pytest.fixture
def project(
    tiny_rl: Path,
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> list[str]:
    """In examples/tiny-rl's directory (its nrl-launch.yaml: Ray and uv from its .venv);
    returns the job's flags and the overrides that put its logs and checkpoints in tmp."""
    monkeypatch.chdir(tiny_rl)
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return [
        "--container-runtime", "none",
        "--log-dir", str(tmp_path / "jobs"),
        "--time", "10",
        f"logger.log_dir={tmp_path / 'logs'}",
        f"checkpointing.checkpoint_dir={tmp_path / 'ckpt'}",
    ]  # fmt: skip


@pytest.fixture
def checkout(
    tiny_rl: Path,
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """tiny-rl as a checkout of its own (in tmp, which every dev node sees), committed, with
    the env the tiny_rl fixture made (its editable install is of the repo's tiny-rl, a third
    tree: a job that runs a snapshot of the checkout must import neither). The cwd is the
    checkout."""
    repo = tmp_path / "tiny-rl"
    shutil.copytree(tiny_rl, repo, ignore=shutil.ignore_patterns(*CHECKOUT_IGNORES))
    (repo / ".venv").symlink_to(tiny_rl / ".venv")
    (repo / ".gitignore").write_text("".join(f"{name}\n" for name in CHECKOUT_IGNORES))
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"../.."', f'"{tiny_rl.parents[1]}"'))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny-rl")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return repo


def _node_pid1s() -> dict[str, int]:
    """Each dev-cluster node's PID 1 as this machine sees it, by node name (from the pid files
    `up` writes)."""
    run = Path(os.environ.get("DEV_CLUSTER_DIR", "/var/lib/nrl-dev-cluster")) / "run"
    children = process_children()
    pid1s = {}
    for pid_file in run.glob("node-*.pid"):
        # The pid file names `unshare`; its child is PID 1 of the node's namespace.
        for child in children.get(int(pid_file.read_text()), []):
            pid1s[pid_file.stem.removeprefix("node-")] = child
    return pid1s


def _node_namespaces() -> dict[str, str]:
    """Each dev-cluster node's PID namespace, by node name."""
    return {
        name: str(Path(f"/proc/{pid}/ns/pid").readlink()) for name, pid in _node_pid1s().items()
    }


def _node_table() -> list[tuple[str, int, str]]:
    """(node, pid as this machine sees it, command name) of every process on every node."""
    spaces = {ns: name for name, ns in _node_namespaces().items()}
    table = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            name = spaces.get(str((proc / "ns" / "pid").readlink()))
            comm = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if name:
            table.append((name, int(proc.name), comm))
    return table


def node_pids(node: str, comm: str) -> list[int]:
    """The pids (as this machine sees them) of `comm` processes on `node`."""
    return [pid for name, pid, command in _node_table() if name == node and command == comm]


def _orphan_table() -> list[tuple[str, int, str]]:
    """The rows of `_node_table` besides the nodes themselves (each one's PID-1 shell and
    slurmd): after a job has ended, each is an orphan."""
    return [row for row in _node_table() if row[2] not in ("sh", "slurmd")]


def node_processes() -> dict[str, list[str]]:
    """What runs on each node besides the node itself, by node name."""
    found: dict[str, list[str]] = {name: [] for name in _node_namespaces()}
    for name, _, comm in _orphan_table():
        found[name].append(comm)
    return found


def _described(name: str, pid: int, comm: str) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        cmdline = "?"
    return f"{comm} (pid {pid} on {name}): {cmdline.strip()[:200]}"


def wait_for_clean_nodes(timeout: float = 60) -> None:
    """Wait until the nodes run nothing but themselves, as after a job's end they must (a hang
    bound, not a target). Past `timeout` s, fail naming what is left, killed first: one test's
    orphans fail that test, not every test after it."""
    deadline = time.monotonic() + timeout
    while left := _orphan_table():
        if time.monotonic() >= deadline:
            named = [_described(*row) for row in left]
            for _, pid, _ in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail(f"left on the nodes {timeout:.0f} s after the job (now killed): {named}")
        time.sleep(0.5)


def watched_phase(line: str, job_id: str) -> str | None:
    """The state `status --watch` shows for the job in one line of its output (piped: each
    redraw is a title line, then a tab-separated row per job); None for any other line."""
    columns = line.rstrip("\n").split("\t")
    return columns[2] if len(columns) > 2 and columns[0] == job_id else None


# The phases a job ends in.
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


def job_status(cli: Cli, job_id: str) -> dict:  # type: ignore[type-arg]
    """`status JOBID --json`'s object for the job."""
    result = cli("status", job_id, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)["jobs"][0]  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def test_image(dev_cluster: None) -> Path:  # noqa: ARG001 - asked for so that the cluster is up
    """The container image the container tests run (scripts/test-image: Debian with Python, Ray
    and uv in /opt/venv), built once and cached; needs pyxis loaded in the dev cluster."""
    srun_help = subprocess.run(["srun", "--help"], capture_output=True, text=True).stdout
    if "--container-image" not in srun_help:
        unavailable(
            "pyxis is not loaded in the dev cluster (its sources are not in ../shared/vendor, "
            "or it was started with --without-pyxis): restart it with scripts/dev-cluster"
        )
    built = subprocess.run(
        [str(REPO / "scripts" / "test-image"), "build"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if built.returncode != 0:
        pytest.fail(f"scripts/test-image build failed:\n{built.stderr[-3000:]}")
    return Path(built.stdout.strip())


@pytest.fixture
def container_job(test_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The flags every container job shares: the test image (Ray from inside it), the repo
    mounted read-only as the workdir, a scratch dir mounted read-write, logs in tmp."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.chdir(scratch)
    return [
        "--container",
        str(test_image),
        "--mount",
        f"{REPO}:{REPO}:ro",
        "--mount",
        str(scratch),
        "--set",
        f"container.workdir={REPO}",
        "--log-dir",
        str(tmp_path / "logs"),
        "--time",
        "10",
    ]


def enroot_state(node: str) -> dict[str, list[str]]:
    """What enroot keeps on a node's local disk (seen through the node's own mounts): its named
    containers (data) and runtime dirs, per user."""
    root = Path(f"/proc/{_node_pid1s()[node]}/root")
    return {
        kind: sorted(p.name for p in (root / path).glob("user-*/*"))
        for kind, path in (("containers", "var/lib/enroot/data"), ("runtime", "run/enroot"))
    }


def no_container_of(job_id: str) -> bool:
    """No node keeps a container or runtime dir of the job (pyxis_nrl-ID, pyxis_ID_nrl-ID)."""
    for node in _node_namespaces():
        state = enroot_state(node)
        if any(f"nrl-{job_id}" in name for names in state.values() for name in names):
            return False
    return True
