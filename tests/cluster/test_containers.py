"""Jobs in pyxis/enroot containers on the dev cluster, as users launch NeMo RL.

pyxis 0.24 and enroot 4.1.2 run in every node (scripts/dev-cluster), each node with its own
enroot state; the image is scripts/test-image's (Debian, Python, Ray and uv in /opt/venv), a
.sqsh on the shared filesystem. Ray comes from inside the image, never from the host. Every
test checks that the job leaves no container, enroot runtime dir or process on any node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cluster.conftest import (
    ON_NODE0_AND_1,
    enroot_state,
    job_status,
    no_container_of,
    node_pids,
    wait_for_clean_nodes,
)
from tests.cluster.test_failures import SLEEPER, ended_after, running
from tests.conftest import REPO, Cli, wait_until, without_warnings

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "nrl_launch"]
DRIVER = str(Path(__file__).with_name("container_driver.py").relative_to(REPO))
# Values a shell would mangle: the driver must get each one byte for byte.
HOSTILE_ARGV = ["--config", "a b.yaml", "x=$(whoami)", "'q'", 'y="${oc.env:USER}"', "", "*"]


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: attach replaces its process with srun."""
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=180
    )


def left_clean(job_id: str) -> None:
    """Nothing of the job on any node: no process, no named container, no runtime dir."""
    wait_for_clean_nodes(60)
    wait_until(lambda: no_container_of(job_id), 60)


@pytest.mark.slurm_smoke
@pytest.mark.parametrize("nodes", [2, 4])
def test_batch_job_runs_in_the_container_on_every_node(
    cli: Cli, container_job: list[str], test_image: Path, tmp_path: Path, nodes: int
) -> None:
    out = tmp_path / "scratch" / "driver.json"
    on_nodes = ON_NODE0_AND_1 if nodes == 2 else ["--nodes", "4"]
    result = cli(
        "submit",
        "--wait",
        "-q",
        *on_nodes,
        *container_job,
        "--env",
        f"DRIVER_OUT={out}",
        "--env",
        f"RO_MOUNT={REPO}",
        "--",
        "python",
        DRIVER,
        *HOSTILE_ARGV,
    )
    assert result.code == 0, result.out + result.err
    job_id = result.out.strip()
    seen = json.loads(out.read_text())
    # Inside the image: its Python and Ray (PATH from the image's /etc/environment), its label.
    assert seen["python"] == "/opt/venv/bin/python"
    assert seen["image"] and test_image.stem.removeprefix("nrl-test-") in seen["image"]
    assert seen["argv"] == HOSTILE_ARGV
    status = job_status(cli, job_id)
    # Where it was submitted: as frozen at submit (driver.snapshot), the snapshot's copy of the
    # repo, mounted in the container at its own path; the repo itself where git could not
    # freeze it (no git in the 24.11 root).
    code = status["code"]
    where = REPO if code is None else Path(code["snapshot"]) / REPO.relative_to(code["source"])
    assert seen["cwd"] == str(where)
    assert seen["ro_mount_writable"] is False
    assert seen["nodes"] == [f"node{k}" for k in range(nodes)]
    assert seen["gpus"] == 8 * nodes
    assert status["phase"] == "COMPLETED"
    log_dir = Path(status["log_dir"])
    assert (
        f"Number of actors online: {8 * nodes}/{8 * nodes}"
        in (log_dir / "ray-head.log").read_text()
    )
    left_clean(job_id)


@pytest.fixture
def interactive(cli: Cli, container_job: list[str]) -> str:
    """A 2-node interactive cluster in containers, up; cancelled after if still running."""
    result = cli("submit", "--interactive", "-q", *ON_NODE0_AND_1, *container_job)
    assert result.code == 0, result.err
    job_id = result.out.strip()
    wait_until(lambda: "all 2 nodes joined" in job_status(cli, job_id)["detail"])
    yield job_id  # type: ignore[misc]
    cli("cancel", job_id)


@pytest.mark.slurm_smoke
def test_attach_enters_the_live_container_on_each_node(
    cli: Cli, interactive: str, test_image: Path
) -> None:
    job_id = interactive
    label = test_image.stem.removeprefix("nrl-test-")
    for node in ("0", "1"):
        started = time.monotonic()
        done = run_cli(
            "attach",
            job_id,
            "--node",
            node,
            "--",
            "bash",
            "-c",
            f"hostname; cat /etc/nrl-test-image; ray status >/dev/null && echo ray-ok;"
            f" echo here >/tmp/attach-mark-{node}",
        )
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        lines = done.stdout.split()
        assert lines[0] == f"node{node}" and label in lines[1] and lines[2] == "ray-ok", lines
        print(f"attach --node {node}: {took:.2f} s to the command's end", file=sys.__stderr__)
    # The same container, not a fresh one from the image: its own /tmp (a tmpfs each container
    # has) still holds what the first attach wrote, and the node keeps one container.
    again = run_cli("attach", job_id, "--node", "1", "--", "cat", "/tmp/attach-mark-1")
    assert (again.returncode, again.stdout.strip()) == (0, "here"), again.stderr
    mine = [c for c in enroot_state("node1")["containers"] if f"nrl-{job_id}" in c]
    assert mine == [f"pyxis_nrl-{job_id}"]
    # The attach script writes the same srun; ray.sub's COMMAND= usage.
    script = Path(job_status(cli, job_id)["log_dir"]) / f"{job_id}-attach.sh"
    done = subprocess.run(
        ["bash", str(script), "1"],
        env={**os.environ, "COMMAND": "cat /tmp/attach-mark-1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "here"), done.stderr
    # stop ends it well, and the containers go with it.
    assert cli("stop", job_id, "--wait").code == 0
    assert job_status(cli, job_id)["phase"] == "COMPLETED"
    left_clean(job_id)


def submit(cli: Cli, job: list[str], *args: str) -> str:
    result = cli("submit", "-q", *ON_NODE0_AND_1, *job, *args)
    assert result.code == 0, result.err
    return result.out.strip()


def test_worker_raylet_killed_fails_the_job_and_cleans_every_node(
    cli: Cli, container_job: list[str]
) -> None:
    job_id = submit(cli, container_job, *SLEEPER)
    running(cli, job_id)
    pids = node_pids("node1", "raylet")
    assert pids
    fault_at = time.time()
    for pid in pids:
        os.kill(pid, 9)
    status = ended_after(cli, job_id, fault_at, "container: worker's raylet killed")
    assert status["phase"] == "FAILED"
    assert "Ray on node node1 exited" in status["detail"]
    left_clean(job_id)


def test_driver_crash_in_the_container_fails_the_job(cli: Cli, container_job: list[str]) -> None:
    crash = "import ray; ray.init(address='auto'); raise RuntimeError('the driver crashed')"
    job_id = submit(cli, container_job, "--", "python", "-c", crash)
    status = ended_after(cli, job_id, None, "container: driver crashes")
    assert (status["phase"], status["exit_code"]) == ("FAILED", 1)
    assert "driver exited with code 1" in status["detail"]
    assert "RuntimeError: the driver crashed" in cli("logs", job_id, "--tail", "1").out
    left_clean(job_id)


def test_an_image_without_ray_fails_naming_it(
    cli: Cli, container_job: list[str], tmp_path: Path
) -> None:
    """The image's Ray hidden under an empty mount: what a user's image without Ray does."""
    empty = tmp_path / "scratch" / "empty"
    empty.mkdir()
    job_id = submit(cli, [*container_job, "--mount", f"{empty}:/opt/venv"], *SLEEPER)
    status = ended_after(cli, job_id, None, "container: image without Ray")
    assert status["phase"] == "FAILED"
    assert "ray is not on PATH on node" in status["detail"]
    assert status["cause"].startswith("Ray is missing from the node's environment")
    left_clean(job_id)


def _gone_image(job: list[str], scratch: Path, image: Path) -> tuple[list[str], Path]:
    copy = scratch / "gone.sqsh"
    shutil.copyfile(image, copy)
    return [*job, "--container", str(copy)], copy


def _gone_mount(job: list[str], scratch: Path, image: Path) -> tuple[list[str], Path]:  # noqa: ARG001
    source = scratch / "data"
    source.mkdir()
    return [*job, "--mount", str(source)], source


@pytest.mark.parametrize("make", [_gone_image, _gone_mount], ids=["image", "mount source"])
def test_a_file_gone_after_submit_fails_with_pyxis_s_error_as_the_cause(
    cli: Cli,
    container_job: list[str],
    test_image: Path,
    tmp_path: Path,
    make: Callable[[list[str], Path, Path], tuple[list[str], Path]],
) -> None:
    """Submitted held (the checks before queueing pass), the image or a mount source removed,
    then released: pyxis fails the step on the node, and status names pyxis's error and path."""
    job, path = make(container_job, tmp_path / "scratch", test_image)
    job_id = submit(cli, [*job, "--set", "slurm.extra_args=[--hold]"], *SLEEPER)
    path.unlink() if path.is_file() else path.rmdir()
    subprocess.run(["scontrol", "release", job_id], check=True)
    status = ended_after(cli, job_id, None, f"container: {path.name} gone")
    assert status["phase"] == "FAILED"
    assert "pyxis" in status["cause"] and str(path) in status["cause"], status
    left_clean(job_id)


def test_what_users_get_wrong_is_refused_before_queueing(
    cli: Cli, container_job: list[str], tmp_path: Path
) -> None:
    """Each refused with one line naming the key, exit 2, nothing queued."""
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    cases = [
        (["--container", "images/nemo-rl.sqsh"], "container.image"),
        (["--container", str(tmp_path / "missing.sqsh")], "container.image"),
        (["--mount", str(tmp_path / "no-such-dir")], "container.mounts"),
    ]
    for flags, key in cases:
        result = cli("submit", "-q", *ON_NODE0_AND_1, *container_job, *flags, *SLEEPER)
        assert result.code == 2, (flags, result.out, result.err)
        said = without_warnings(result.err)
        assert key in said and len(said.strip().splitlines()) == 1, result.err
    after = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    assert after == before


def test_run_runs_a_plain_command_in_the_container_on_every_node(
    cli: Cli, container_job: list[str], test_image: Path
) -> None:
    result = cli(
        "run",
        "--wait",
        "-q",
        *ON_NODE0_AND_1,
        *container_job,
        "--",
        "bash",
        "-c",
        'echo "$(hostname) $(cat /etc/nrl-test-image) $(command -v ray)"',
    )
    assert result.code == 0, result.out + result.err
    job_id = result.out.strip().splitlines()[0]
    log = cli("logs", job_id).out
    label = test_image.stem.removeprefix("nrl-test-")
    for node in ("node0", "node1"):
        line = next(x for x in log.splitlines() if f"{node} " in x)
        assert label in line and line.endswith("/opt/venv/bin/ray"), line
    wait_for_clean_nodes(60)
    # Unnamed containers (pyxis_JOBID.STEP): pyxis removes them itself.
    for node in ("node0", "node1"):
        assert not [c for c in enroot_state(node)["containers"] if c.startswith(f"pyxis_{job_id}.")]


def test_containers_a_cancelled_job_left_go_with_the_next_job(
    cli: Cli, interactive: str, container_job: list[str]
) -> None:
    """scancel ends the job before it can remove its containers; the next nrl-launch job on
    those nodes removes them when it ends, so named containers do not pile up on node disks."""
    cancelled = interactive
    assert cli("cancel", cancelled).code == 0
    wait_until(lambda: job_status(cli, cancelled)["phase"] == "CANCELLED")
    wait_for_clean_nodes(60)
    assert not no_container_of(cancelled)  # left on the nodes, as pyxis keeps named ones
    result = cli("submit", "--wait", "-q", *ON_NODE0_AND_1, *container_job, "--", "true")
    assert result.code == 0, result.err
    left_clean(result.out.strip())
    assert no_container_of(cancelled)


def test_an_unmounted_submit_dir_fails_with_pyxis_s_chdir_as_the_cause(
    cli: Cli, test_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No container.workdir and a submit dir under no mount: refused before queueing; with
    --no-check it queues, and pyxis's `couldn't chdir` is the cause status gives."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    # The log dir is mounted, so a submit dir above it would exist in the container (empty).
    submit_dir = tmp_path / "submit"
    submit_dir.mkdir()
    monkeypatch.chdir(submit_dir)
    job = ["--container", str(test_image), "--log-dir", str(tmp_path / "logs"), "--time", "10"]
    refused = cli("submit", "-q", *ON_NODE0_AND_1, *job, *SLEEPER)
    assert refused.code == 2 and "container.workdir" in refused.err, refused.err
    job_id = submit(cli, [*job, "--no-check"], *SLEEPER)
    status = ended_after(cli, job_id, None, "container: submit dir not mounted")
    assert status["phase"] == "FAILED"
    assert "couldn't chdir" in status["cause"] and str(submit_dir) in status["cause"], status
    left_clean(job_id)
