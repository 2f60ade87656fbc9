"""status names pyxis's error as the cause when a container step could not start.

The texts are shaped as pyxis 0.24 and enroot 4.1.2 print them (pyxis_slurmstepd.c's
slurm_error lines, common.c's memfd_print_log relaying enroot's output as `pyxis:     LINE`,
enroot's common::err `[ERROR] MESSAGE`), as srun passes them on to the batch job's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nrl_launch.jobs.diagnose import diagnose
from nrl_launch.jobs.pyxis_errors import find
from tests.conftest import Cli
from tests.fakes import FakeSlurm

SPANK = (
    "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1\n"
    "slurmstepd: error: Failed to invoke spank plugin stack\n"
)
BATCH = "[nrl-launch 12:00:01] job 7: 2 node(s), head node0 (10.0.0.1), logs in /l/7-logs\n"

CHDIR = (
    BATCH
    + "slurmstepd: error: pyxis: couldn't chdir to /home/alice/rl: No such file or directory\n"
    f"{SPANK}srun: error: node0: task 0: Exited with exit code 1\n"
)
IMAGE_MISSING = (
    BATCH + "slurmstepd: error: pyxis: child 4242 failed with error code: 1\n"
    "slurmstepd: error: pyxis: failed to create container filesystem for image: "
    "/lustre/alice/rl.sqsh\n"
    "slurmstepd: error: pyxis: printing enroot log file:\n"
    "slurmstepd: error: pyxis:     [ERROR] No such file or directory: /lustre/alice/rl.sqsh\n"
    f"{SPANK}srun: error: node0: task 0: Exited with exit code 1\n"
)
MOUNT_MISSING = (
    "slurmstepd-node1: error: pyxis: --container-mounts: source path does not exist: /data/gone\n"
    "slurmstepd-node1: error: pyxis: couldn't create enroot start configuration script\n"
    "slurmstepd-node1: error: pyxis: printing enroot log file:\n"
    "slurmstepd-node1: error: pyxis:     [INFO] Extracting squashfs filesystem...\n"
    "srun: error: node1: task 0: Exited with exit code 1\n"
)
PULL_FAILED = (
    "pyxis: importing docker image: images/rl.sqsh\n"
    "slurmstepd: error: pyxis: child 77 failed with error code: 1\n"
    "slurmstepd: error: pyxis: failed to import docker image: images/rl.sqsh\n"
    "slurmstepd: error: pyxis: printing enroot log file:\n"
    "slurmstepd: error: pyxis:     [INFO] Querying registry for permission grant\n"
    "slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/images/rl.sqsh/"
    "manifests/latest returned error code: 401 Unauthorized\n"
    f"{SPANK}srun: error: node3: task 0: Exited with exit code 1\n"
)


@pytest.mark.parametrize(
    ("text", "line", "cause"),
    [
        (
            CHDIR,
            2,
            "pyxis could not enter the working directory /home/alice/rl in the container on "
            'node0: "pyxis: couldn\'t chdir to /home/alice/rl: No such file or directory"; set '
            "container.workdir to a dir inside the container, or mount the submit dir (e.g. "
            '--mount "$PWD")',
        ),
        (
            IMAGE_MISSING,
            5,
            'container.image /lustre/alice/rl.sqsh does not exist on node0: "pyxis: [ERROR] No '
            'such file or directory: /lustre/alice/rl.sqsh"; give the absolute path of a .sqsh '
            "file every node can read",
        ),
        (
            MOUNT_MISSING,
            1,
            'the container.mounts source /data/gone does not exist on node1: "pyxis: '
            '--container-mounts: source path does not exist: /data/gone"; create it on storage '
            "every node sees, or fix container.mounts",
        ),
        (
            PULL_FAILED,
            3,
            'pyxis could not import container.image images/rl.sqsh on node3: "pyxis: [ERROR] URL '
            "https://registry-1.docker.io/v2/images/rl.sqsh/manifests/latest returned error "
            'code: 401 Unauthorized"; check the reference (a .sqsh file must start with / or .) '
            "and the registry's credentials (~/.config/enroot/.credentials)",
        ),
    ],
    ids=["chdir", "image-missing", "mount-source-missing", "pull-failed"],
)
def test_each_known_failure_is_named_with_pyxis_s_line(text: str, line: int, cause: str) -> None:
    failure = find(text)
    assert failure is not None
    assert (failure.line, failure.cause) == (line, cause)


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        (
            'slurmstepd: error: pyxis: error: a container with name "pyxis_7_nrl-7" does not '
            "exist, and --container-image is not set\n",
            "pyxis found no container pyxis_7_nrl-7 on a node to enter",
        ),
        (
            'slurmstepd: error: pyxis: error: "create" flag was passed to --container-name but '
            "the container already exists\n",
            "a container of that name already exists on a node",
        ),
        (
            "slurmstepd: error: pyxis: container start failed with error code: 1\n"
            "slurmstepd: error: pyxis: printing enroot log file:\n"
            "slurmstepd: error: pyxis:     enroot-mount: failed to mount: /data at "
            "/run/enroot/rootfs/data: No such file or directory\n",
            'a container mount failed on a node: "pyxis: enroot-mount: failed to mount: /data',
        ),
        (
            "slurmstepd: error: pyxis: failed to create container filesystem for image: /i/x.img\n"
            "slurmstepd: error: pyxis: printing enroot log file:\n"
            "slurmstepd: error: pyxis:     [ERROR] Invalid image format: /i/x.img\n",
            "container.image /i/x.img is not a squashfs image pyxis can start on a node",
        ),
        (  # squashfuse: enroot start is given the file itself
            "slurmstepd: error: pyxis: container start failed with error code: 1\n"
            "slurmstepd: error: pyxis: printing enroot log file:\n"
            "slurmstepd: error: pyxis:     [ERROR] Invalid argument: /i/gone.squashfs\n",
            "container.image /i/gone.squashfs does not exist on a node",
        ),
    ],
    ids=["no-container", "name-taken", "enroot-mount", "image-format", "squashfuse"],
)
def test_container_names_mounts_and_images(text: str, starts: str) -> None:
    failure = find(text)
    assert failure is not None and failure.cause.startswith(starts), failure


def test_any_other_pyxis_failure_is_said_with_enroot_s_words() -> None:
    # pyxis issue #61's output, with srun --label's prefix and Slurm 23's slurmstepd-NODE
    text = (
        "1: slurmstepd-hpc-pg0-2: error: pyxis: container start failed with error code: 1\n"
        "1: slurmstepd-hpc-pg0-2: error: pyxis: printing enroot log file:\n"
        "1: slurmstepd-hpc-pg0-2: error: pyxis:     [INFO] Starting container\n"
        "1: slurmstepd-hpc-pg0-2: error: pyxis:     enroot-switchroot: failed to execute: "
        "/bin/bash: No such file or directory\n"
        "1: slurmstepd-hpc-pg0-2: error: pyxis: if the image has an unusual entrypoint, try "
        "using --no-container-entrypoint\n"
    )
    failure = find(text)
    assert failure is not None and failure.line == 1
    assert failure.cause == (
        'pyxis could not start the container on hpc-pg0-2: "pyxis: enroot-switchroot: failed '
        'to execute: /bin/bash: No such file or directory"'
    )


def test_an_older_pyxis_relaying_enroot_s_error_unindented() -> None:
    text = (
        "slurmstepd: error: pyxis: [ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return "
        "code 1\nslurmstepd: error: pyxis: couldn't start container\n"
        "srun: error: gpu01: tasks 0-7: Exited with exit code 1\n"
    )
    failure = find(text)
    assert failure is not None and failure.line == 2
    assert failure.cause == (
        'pyxis could not start the container on gpu01: "pyxis: [ERROR] '
        '/etc/enroot/hooks.d/98-nvidia.sh exited with return code 1"'
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pyxis: importing docker image: nvcr.io/nvidia/nemo-rl:v0.6.0\n"
        "pyxis: imported docker image: nvcr.io/nvidia/nemo-rl:v0.6.0\n",
        "slurmstepd: error: pyxis: received SIGTERM, forwarding to child 123\n"
        "slurmstepd: error: *** STEP 7.0 ON node0 CANCELLED AT 2025-01-01T00:00:00 ***\n",
        "slurmstepd: error: pyxis: ignoring --container-mounts because neither "
        "--container-image nor --container-name is set\n",
        "srun: error: node1: task 0: Exited with exit code 3\n",
    ],
    ids=["empty", "pulled", "cancelled", "ignoring", "not-pyxis"],
)
def test_lines_that_are_not_a_container_failure(text: str) -> None:
    assert find(text) is None


def test_diagnose_reads_the_batch_output_before_the_logs(tmp_path: Path) -> None:
    log_dir = tmp_path / "7-logs"
    log_dir.mkdir()
    (log_dir / "ENDED").write_text("the head step ended with exit code 1\n")
    (log_dir / "ray-head.log").write_text("Address already in use\n")
    output = tmp_path / "slurm-7.out"
    output.write_text(CHDIR)
    found = diagnose(log_dir, output)
    assert found is not None and found.where == "slurm-7.out line 2"
    assert str(found).startswith("pyxis could not enter the working directory /home/alice/rl")
    assert diagnose(None, output) == found  # the log dir may not even exist
    output.write_text(BATCH)
    assert str(diagnose(log_dir, output)).startswith("a port is already in use")
    assert diagnose(log_dir, tmp_path / "slurm-missing.out") is not None
    assert diagnose(None, tmp_path / "slurm-missing.out") is None


def test_status_names_pyxis_s_error_as_the_cause(
    cli: Cli, slurm: FakeSlurm, isolated: Path
) -> None:
    slurm.answer("sbatch", stdout="7\n")
    job = ["--nodes", "2", "--container-runtime", "none", "--", "python", "train.py"]
    assert cli("submit", "-q", *job).code == 0
    log_dir = isolated / "7-logs"
    log_dir.mkdir()
    (log_dir / "ENDED").write_text("the head step ended with exit code 1\n")
    (isolated / "slurm-7.out").write_text(IMAGE_MISSING)
    slurm.answer("squeue", stdout="7|FAILED|NonZeroExitCode|2|node[0-1]\n")
    slurm.answer("sacct", stdout="7|FAILED|1:0\n")
    status = json.loads(cli("status", "7", "--json").out)["jobs"][0]
    assert status["phase"] == "FAILED"
    assert status["cause"] == (
        'container.image /lustre/alice/rl.sqsh does not exist on node0: "pyxis: [ERROR] No '
        'such file or directory: /lustre/alice/rl.sqsh"; give the absolute path of a .sqsh '
        "file every node can read (see slurm-7.out line 5)"
    )
    assert status["detail"] == (
        f"exit code 1: the head step ended with exit code 1; likely cause: {status['cause']}"
    )
