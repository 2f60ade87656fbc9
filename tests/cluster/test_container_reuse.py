"""container.reuse on the dev cluster: a job keeps its unpacked image on each node, the next
job with the same image starts in it, and an image changed in place is never reused.

Real pyxis and enroot (scripts/dev-cluster), the test image copied to a file of the test's own.
The kept containers live in the user's enroot data dir on each node (a tmpfs here: memory),
removed before and after each test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import (
    ON_NODE0_AND_1,
    _node_pid1s,
    enroot_state,
    job_status,
    wait_for_clean_nodes,
)
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
NODES = ("node0", "node1")
RACY_S = 3  # node/reuse.sh's NRL_REUSE_RACY_S: an image newer than this is never kept


def kept(node: str) -> list[str]:
    """The containers kept for reuse on `node` (every user's)."""
    return [c for c in enroot_state(node)["containers"] if c.startswith("nrl-cache-")]


def _drop_kept() -> None:
    for node, pid in _node_pid1s().items():
        if node in NODES:
            for path in Path(f"/proc/{pid}/root/var/lib/enroot/data").glob("user-*/nrl-cache-*"):
                subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


@pytest.fixture
def image(container_job: list[str], test_image: Path, tmp_path: Path) -> Iterator[Path]:  # noqa: ARG001
    """A copy of the test image, older than the racy window, and no kept container anywhere."""
    _drop_kept()
    copy = tmp_path / "scratch" / "image.sqsh"
    shutil.copyfile(test_image, copy)
    time.sleep(RACY_S + 0.5)
    yield copy
    _drop_kept()


def run_job(cli: Cli, job: list[str], image: Path, *command: str) -> tuple[str, str, dict]:  # type: ignore[type-arg]
    """A 2-node job with reuse in `image`: its id, its batch output and its timeline."""
    result = cli(
        "submit",
        "--wait",
        "-q",
        *ON_NODE0_AND_1,
        *job,
        "--container",
        str(image),
        "--set",
        "container.reuse=true",
        "--",
        *(command or ("true",)),
    )
    job_id = result.out.strip().splitlines()[0]
    status = job_status(cli, job_id)
    log_dir = Path(status["log_dir"])
    out = (log_dir.parent / f"slurm-{job_id}.out").read_text()
    assert result.code == 0, result.err + out
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    wait_for_clean_nodes(60)
    return job_id, out, phases


def container_start(phases: dict) -> float:  # type: ignore[type-arg]
    """From the batch step starting Ray's steps to the head's step running in its container."""
    return float(phases["head_step"] - phases["ray_steps"])


def test_a_second_job_starts_in_the_container_the_first_kept(
    cli: Cli, container_job: list[str], image: Path
) -> None:
    first, out, phases = run_job(cli, container_job, image)
    for node in NODES:
        assert f"{node}: no container kept for this image" in out, out
        assert f"{node}: kept the job's container for the next job" in out, out
        assert len(kept(node)) == 1, enroot_state(node)
        assert not [c for c in enroot_state(node)["containers"] if f"nrl-{first}" in c]
    unpacked = container_start(phases)

    second, out, phases = run_job(cli, container_job, image)
    for node in NODES:
        assert f"{node}: reusing the container kept in" in out, out
        assert len(kept(node)) == 1
        assert not [c for c in enroot_state(node)["containers"] if f"nrl-{second}" in c]
    reused = container_start(phases)
    print(
        f"container start, 2 nodes, {image.stat().st_size >> 20} MiB image: "
        f"unpacked {unpacked:.2f} s, reused {reused:.2f} s",
        file=sys.__stderr__,
    )


def test_an_image_changed_in_place_is_never_reused(
    cli: Cli, container_job: list[str], image: Path, tmp_path: Path
) -> None:
    """The same path, the same inode: mksquashfs appends a file to the image. The next job
    unpacks the new image and sees the file; the container of the old one is dropped."""
    _, out, _ = run_job(cli, container_job, image)
    before = {node: kept(node) for node in NODES}
    assert all(len(k) == 1 for k in before.values()), before
    inode = image.stat().st_ino
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "nrl-reuse-mark").write_text("the new image\n")
    subprocess.run(
        ["mksquashfs", str(extra), str(image), "-no-progress", "-quiet"],
        check=True,
        capture_output=True,
    )
    assert image.stat().st_ino == inode
    time.sleep(RACY_S + 0.5)
    job_id, out, _ = run_job(
        cli, container_job, image, "bash", "-c", "cat /nrl-reuse-mark 2>&1 || true"
    )
    for node in NODES:
        assert f"{node}: no container kept for this image" in out, out
        assert f"{node}: removing the container kept for another image" in out, out
        now = kept(node)
        assert len(now) == 1 and now != before[node]
    assert "the new image" in cli("logs", job_id).out


def test_attach_enters_the_reused_container_which_is_read_only(
    cli: Cli, container_job: list[str], image: Path
) -> None:
    """A kept container taken by an interactive job: attach enters it (the job's own name), its
    root filesystem is read-only, and it is kept again when the job is stopped."""
    run_job(cli, container_job, image)
    result = cli(
        "submit",
        "--interactive",
        "-q",
        *ON_NODE0_AND_1,
        *container_job,
        "--container",
        str(image),
        "--set",
        "container.reuse=true",
    )
    assert result.code == 0, result.err
    job_id = result.out.strip()
    try:
        wait_until(lambda: "all 2 nodes joined" in job_status(cli, job_id)["detail"])
        done = subprocess.run(
            [*CLI, "attach", job_id, "--node", "1", "--", "bash", "-c", ATTACH_PROBE],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["node1", "read-only", "tmp-ok"], done.stdout
        assert [c for c in enroot_state("node1")["containers"] if job_id in c] == [
            f"pyxis_nrl-{job_id}"
        ]
        assert not kept("node1")  # taken by the job
    finally:
        cli("stop", job_id, "--wait")
    wait_for_clean_nodes(60)
    out = (Path(job_status(cli, job_id)["log_dir"]).parent / f"slurm-{job_id}.out").read_text()
    assert "node1: reusing the container kept in" in out, out
    assert len(kept("node1")) == 1, out


CLI = [sys.executable, "-m", "nrl_launch"]
ATTACH_PROBE = (
    "hostname; touch /nrl-write-test 2>/dev/null && echo writable || echo read-only;"
    " echo x >/tmp/nrl-attach && echo tmp-ok"
)
