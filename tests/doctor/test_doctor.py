"""`nrl-launch doctor`: the parsers and verdicts on output captured from the dev cluster's Slurm
22.05 (tests/data/slurm-22.05), and the command against fake Slurm commands that answer with
that output. The same checks run for real in tests/cluster/test_doctor.py."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
from pathlib import Path

import pytest

import nrl_launch
from nrl_launch import doctor
from nrl_launch.backends.slurm import container_mounts
from nrl_launch.doctor import Check, NodeGroup, Partition
from nrl_launch.doctor import probe as node_probe
from nrl_launch.jobs.launch import log_base_findings
from nrl_launch.runner import Completed
from nrl_launch.shell import sourced
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.layers import Resolved, Setting, resolve
from tests.conftest import Cli, shellcheck, source_job
from tests.fakes import FakeSlurm
from tests.helpers import TEST_DATA, bash_values, imported, roots

DATA = TEST_DATA / "slurm-22.05"
CONFIG = doctor.parse_config((DATA / "scontrol-show-config.txt").read_text())
PARTITIONS = doctor.parse_partitions((DATA / "scontrol-show-partition.txt").read_text())
BATCH, DEBUG = PARTITIONS
IDLE = doctor.parse_node_groups((DATA / "sinfo-partition-idle.txt").read_text())


def resolved(**values: object) -> Resolved:
    """A spec from dotted keys (`slurm__nodes=2` is slurm.nodes), each labelled as a flag."""
    settings = [Setting("interactive", True, "doctor")]
    settings += [Setting(k.replace("__", "."), v, f"--{k}") for k, v in values.items()]
    return resolve([settings])


def spec(**values: object) -> LaunchSpec:
    return resolved(**values).spec


NO_SOURCES: dict[str, str] = {}


# ---- Parsers ----


def test_parse_partitions_from_scontrol() -> None:
    assert Partition("batch", True, "UP", "1-00:00:00", 4) == BATCH
    assert Partition("debug", False, "UP", "01:00:00", 4) == DEBUG


def test_parse_config_reads_accounting_and_select_type() -> None:
    assert CONFIG["AccountingStorageType"] == "accounting_storage/none"
    assert CONFIG["SelectType"] == "select/cons_tres"
    assert CONFIG["ClusterName"] == "nrl-dev"


def test_parse_node_groups_idle_and_busy() -> None:
    assert [NodeGroup(4, "gpu:8", 8, "idle")] == IDLE
    busy = doctor.parse_node_groups((DATA / "sinfo-partition-busy.txt").read_text())
    assert [(g.count, g.state, g.usable) for g in busy] == [(1, "mix", True), (3, "idle", True)]


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("gpu:8", 8),  # captured (the dev cluster)
        # Slurm's other forms (sinfo %G): typed, with sockets, mixed types, none.
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:h100:4(S:0,1),gpu:a100:4(S:1)", 8),
        ("gpu:a100:4,shard:a100:16", 4),
        ("(null)", 0),
        ("mps:100", 0),
    ],
)
def test_parse_gpus(gres: str, gpus: int) -> None:
    assert doctor.parse_gpus(gres) == gpus


@pytest.mark.parametrize(
    ("state", "usable"),
    [("idle", True), ("mix", True), ("alloc", True), ("idle~", True), ("drain", False),
     ("drng", False), ("down*", False), ("inval", False)],
)  # fmt: skip
def test_node_states_that_take_no_new_job(state: str, usable: bool) -> None:
    assert NodeGroup(1, "gpu:8", 8, state).usable is usable


# ---- Verdicts ----


def test_tools_found_with_their_version() -> None:
    version = (DATA / "sbatch-version.txt").read_text().strip()
    found = {tool: f"/usr/bin/{tool}" for tool in doctor.SLURM_TOOLS}
    check = doctor.tools_check(found, dict.fromkeys(doctor.SLURM_TOOLS, version))
    assert check == Check(
        "slurm", "ok", "sbatch, srun, squeue, scontrol, sinfo found (slurm-wlm 22.05.8)"
    )
    found["srun"] = None
    assert doctor.tools_check(found, {}).detail.startswith("srun not found on PATH")
    assert doctor.tools_check(found, {}).failed


def test_no_partition_set_means_the_default_one() -> None:
    check, found = doctor.partition_check(PARTITIONS, None, NO_SOURCES)
    assert found == BATCH
    assert check.status == "ok"
    assert check.detail.startswith("batch (not set: the cluster's default partition): UP")


def test_unknown_partition_fails_naming_where_it_came_from() -> None:
    check, found = doctor.partition_check(PARTITIONS, "nope", {"slurm.partition": "--partition"})
    assert found is None
    assert check == Check(
        "slurm.partition",
        "fail",
        "'nope' (from --partition) does not exist; partitions: batch, debug",
    )


@pytest.mark.parametrize(("state", "status"), [("DOWN", "warn"), ("DRAIN", "fail")])
def test_a_partition_that_does_not_run_jobs(state: str, status: str) -> None:
    down = Partition("batch", True, state, "1-00:00:00", 4)
    assert doctor.partition_check([down], "batch", NO_SOURCES)[0].status == status


def test_time_limit_of_the_partition() -> None:
    too_long = doctor.time_check(spec(slurm__time="2:00:00"), DEBUG, {"slurm.time": "--time"})
    assert too_long.failed
    assert too_long.detail == (
        "2:00:00 (from --time) is longer than partition debug's time limit 01:00:00"
    )
    assert doctor.time_check(spec(slurm__time="60"), DEBUG, NO_SOURCES).detail == (
        "60 min is within partition debug's time limit 01:00:00"
    )
    unlimited = Partition("long", False, "UP", "UNLIMITED", 1)
    assert doctor.time_check(spec(slurm__time="30-00"), unlimited, NO_SOURCES).status == "ok"


def test_account_is_not_checked_where_accounting_is_off() -> None:
    check = doctor.account_check("my_account", CONFIG, "alice", None, NO_SOURCES)
    assert check == Check("slurm.account", "ok", "not checked: accounting is off on this cluster")


def test_account_against_sacctmgr_s_associations() -> None:
    on = {**CONFIG, "AccountingStorageType": "accounting_storage/slurmdbd"}
    source = {"slurm.account": "profile /p.yaml"}
    found = Completed(0, "my_account|alice\n", "")
    assert doctor.account_check("my_account", on, "alice", found, source).status == "ok"
    missing = doctor.account_check("other", on, "alice", Completed(0, "", ""), source)
    assert missing.failed
    assert missing.detail.startswith("'other' (from profile /p.yaml): user alice has no assoc")
    # What sacctmgr says without slurmdbd (captured): the check cannot be done, it is not failed.
    refused = Completed(1, "", (DATA / "sacctmgr-accounting-off.txt").read_text())
    check = doctor.account_check("my_account", on, "alice", refused, source)
    assert check.status == "warn"
    assert "You are not running a supported accounting_storage plugin" in check.detail


def test_nodes_against_the_partition() -> None:
    sources = {"slurm.nodes": "--nodes"}
    assert doctor.nodes_check(spec(slurm__nodes=2), BATCH, IDLE, sources).detail == (
        "2 of partition batch's 4 nodes (4 up)"
    )
    too_many = doctor.nodes_check(spec(slurm__nodes=5), BATCH, IDLE, sources)
    assert too_many == Check(
        "slurm.nodes", "fail", "5 (from --nodes), but partition batch has 4 nodes"
    )
    drained = [NodeGroup(2, "gpu:8", 8, "idle"), NodeGroup(2, "gpu:8", 8, "drain")]
    assert doctor.nodes_check(spec(slurm__nodes=4), BATCH, drained, sources).status == "warn"
    small = [NodeGroup(2, "gpu:8", 8, "idle"), NodeGroup(2, "gpu:4", 4, "idle")]
    assert doctor.nodes_check(spec(slurm__nodes=3), BATCH, small, sources).detail == (
        "3 (from --nodes), but only 2 nodes of partition batch have 8 GPUs"
    )


def test_more_gpus_per_node_than_any_node_has_fails() -> None:
    sources = {"slurm.gpus_per_node": "--gpus-per-node"}
    check = doctor.gpus_check(spec(slurm__gpus_per_node=16), BATCH, IDLE, CONFIG, sources)
    assert check == Check(
        "slurm.gpus_per_node",
        "fail",
        "16 (from --gpus-per-node), but partition batch's nodes have at most 8 GPUs (gres: gpu:8)",
    )
    fits = doctor.gpus_check(spec(), BATCH, IDLE, CONFIG, NO_SOURCES)
    assert fits.detail == "8 as --gres=gpu:8; partition batch's nodes: gpu:8"


def test_gpu_request_styles() -> None:
    style = spec(slurm__gpu_request="gpus-per-node")
    assert doctor.gpus_check(style, BATCH, IDLE, CONFIG, NO_SOURCES).status == "ok"
    old = {**CONFIG, "SelectType": "select/cons_res"}
    refused = doctor.gpus_check(style, BATCH, IDLE, old, NO_SOURCES)
    assert refused.failed and "needs SelectType=select/cons_tres" in refused.detail
    none = doctor.gpus_check(spec(slurm__gpu_request="none"), BATCH, IDLE, CONFIG, NO_SOURCES)
    assert none.status == "ok" and none.detail.startswith("no GPUs requested")
    no_gres = [NodeGroup(4, "(null)", 0, "idle")]
    assert doctor.gpus_check(spec(), BATCH, no_gres, CONFIG, NO_SOURCES).failed


def test_sbatch_test_only_accepted() -> None:
    check = doctor.submission_check(0, (DATA / "sbatch-test-only-accepted.txt").read_text())
    assert check == Check(
        "sbatch --test-only",
        "ok",
        "Slurm accepts the request: it would start at 2026-11-23T13:15:47 on node[0-1]",
    )


@pytest.mark.parametrize(
    ("captured", "reason"),
    [
        ("too-many-gpus", "allocation failure: Requested node configuration is not available"),
        ("too-many-nodes", "allocation failure: Node count specification invalid"),
        (
            "no-partition",
            "sbatch: error: invalid partition specified: nope; "
            "allocation failure: Invalid partition name specified",
        ),
        ("time-limit", "Requested time limit is invalid (missing or exceeds some limit)"),
    ],
)
def test_sbatch_test_only_refused(captured: str, reason: str) -> None:
    check = doctor.submission_check(1, (DATA / f"sbatch-test-only-{captured}.txt").read_text())
    assert check.failed
    assert check.detail.startswith("Slurm refuses the request: ")
    assert reason in check.detail


# ---- Files and dirs ----


def test_container_image_path_and_registry(tmp_path: Path) -> None:
    image = tmp_path / "nemo-rl.sqsh"
    image.write_bytes(b"hsqs")
    checks = doctor.container_checks(spec(container__image=str(image)), tmp_path)
    assert checks == [Check("container.image", "ok", f"{image}: a readable file")]
    missing = doctor.container_checks(spec(container__image="./gone.sqsh"), tmp_path)
    assert missing == [Check("container.image", "fail", "./gone.sqsh: no such file")]
    pulled = doctor.container_checks(
        spec(container__image="nvcr.io/nvidia/nemo-rl:v0.6.0"), tmp_path
    )
    assert pulled[0].status == "ok" and "pulled by pyxis at job start" in pulled[0].detail
    assert doctor.container_checks(spec(), tmp_path) == []  # no container: nothing to check


def test_each_missing_mount_source_fails(tmp_path: Path) -> None:
    mounts = [f"{tmp_path}:/work", "/nonexistent/data:/data:ro", "/nonexistent/ckpt:/ckpt"]
    checks = doctor.container_checks(
        spec(container__image="nvcr.io/nvidia/nemo-rl:v0.6.0", container__mounts=mounts), tmp_path
    )
    assert [c.status for c in checks] == ["ok", "ok", "fail", "fail"]
    assert (
        checks[2].detail
        == "source /nonexistent/data does not exist (mount /nonexistent/data:/data:ro)"
    )
    ignored = doctor.container_checks(spec(container__mounts=mounts[:1]), tmp_path)
    assert [c.status for c in ignored] == ["warn"]  # no container: the mounts do nothing


def test_cache_dirs_are_the_set_ones() -> None:
    assert doctor._cache_dirs(spec()) == []
    both = spec(caches__hf_home="/lustre/hf", caches__uv="/lustre/uv")
    assert doctor._cache_dirs(both) == [
        ("caches.hf_home", "/lustre/hf"),
        ("caches.uv", "/lustre/uv"),
    ]


def test_cache_dirs_inside_a_container_are_checked_where_they_are_mounted_from(
    tmp_path: Path,
) -> None:
    """A cache under no mount is mounted by the job at its own path (container_mounts): it is
    checked there, as a host dir like any other."""
    job = spec(
        container__image="nvcr.io/nvidia/nemo-rl:v0.6.0",
        container__mounts=[f"{tmp_path}/shared:/shared"],
        caches__hf_home="/shared/hf",
        caches__uv="/root/.cache/uv",
    )
    assert doctor.shared_dirs(job, tmp_path) == [
        ("logs.base_dir", tmp_path / "."),
        ("caches.hf_home", tmp_path / "shared/hf"),
        ("caches.uv", Path("/root/.cache/uv")),
    ]
    assert "/root/.cache/uv:/root/.cache/uv" in container_mounts(job)


def test_writable_dir_leaves_nothing_behind(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    assert doctor.dir_check("logs.base_dir", logs, "submit") == Check(
        "logs.base_dir", "ok", f"{logs} is writable"
    )
    assert list(logs.iterdir()) == []


def test_dir_that_does_not_exist_yet_is_not_created(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    logs = base / "runs" / "logs"
    check = doctor.dir_check("logs.base_dir", logs, "submit")
    assert check.status == "ok"
    assert check.detail == f"{logs} does not exist yet; submit creates it in {base} (writable)"
    assert list(base.iterdir()) == []


def test_dirs_that_cannot_be_written(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    assert (
        doctor.dir_check("caches.uv", a_file, "x").detail
        == f"{a_file} exists but is not a directory"
    )
    under_file = doctor.dir_check("caches.uv", a_file / "uv", "x")
    assert under_file.failed and "is not a directory" in under_file.detail
    # /proc takes no new files, even from root (chmod would not stop root).
    proc = doctor.dir_check("caches.uv", Path("/proc/nrl-doctor/uv"), "its first use")
    assert proc.failed and proc.detail.startswith(
        "/proc/nrl-doctor/uv does not exist, and /proc is"
    )


# ---- Settings ----


def test_settings_name_the_source_of_each_value() -> None:
    found = {key: (value, source) for key, value, source in doctor.settings(
        resolved(slurm__partition="debug", container__image="img", container__mounts=["/a:/b"]),
        on_nodes=False,
    )}  # fmt: skip
    assert found["slurm.partition"] == ("debug", "--slurm__partition")
    assert found["slurm.nodes"] == (1, "default")
    assert found["container.mounts"] == (["/a:/b"], "--container__mounts")
    assert "setup" not in found and "interactive" not in found and "ray.ports.gcs" not in found
    on_nodes = {key for key, _, _ in doctor.settings(resolved(setup="true"), on_nodes=True)}
    assert "setup" in on_nodes


# ---- The probe job's report ----


def report(name: str) -> node_probe.ProbeReport:
    return node_probe.parse_probe((DATA / f"doctor-probe-{name}.txt").read_text())


def lines(checks: list[Check]) -> list[str]:
    return [f"{c.status} {c.name}: {c.detail}" for c in checks]


def test_probe_finds_a_node_local_cache() -> None:
    """Captured with caches.hf_home=/tmp/ray, which each dev-cluster node mounts privately."""
    found = report("node-local-cache")
    assert found.nodes == ["node0", "node1"] and found.done
    dirs = [("logs.base_dir", Path("/tmp/dr")), ("caches.hf_home", Path("/tmp/ray"))]
    assert lines(node_probe.probe_checks(spec(slurm__nodes=2), found, dirs)) == [
        "ok node0: hostname node0; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)"
        "; ray, version 2.60.0",
        "ok node1: hostname node1; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)"
        "; ray, version 2.60.0",
        "ok logs.base_dir on nodes: all 2 nodes wrote a file in /tmp/dr and saw each other's",
        "fail caches.hf_home on node0: does not see the files node1 wrote in /tmp/ray: it is not "
        "the same dir on every node (not shared storage)",
        "fail caches.hf_home on node1: does not see the files node0 wrote in /tmp/ray: it is not "
        "the same dir on every node (not shared storage)",
    ]


def test_probe_names_the_node_and_dir_that_cannot_be_written() -> None:
    """Captured with caches.hf_home in a dir that exists on the login host only, and a setup
    command that fails."""
    dirs = [("logs.base_dir", Path("/tmp/dr")), ("caches.hf_home", Path("/tmp/ray/x"))]
    failed = [
        c
        for c in node_probe.probe_checks(
            spec(slurm__nodes=2), report("setup-and-write-failed"), dirs
        )
        if c.failed
    ]
    assert lines(failed) == [
        "fail setup on node0: the setup command failed (exit 1: environment: line 18: "
        "/nonexistent/venv/bin/activate: No such file or directory)",
        "fail setup on node1: the setup command failed (exit 1: environment: line 18: "
        "/nonexistent/venv/bin/activate: No such file or directory)",
        # Not also "does not see node1's file": node1 wrote none.
        "fail caches.hf_home on node0: cannot write in /tmp/ray/x: No such file or directory",
        "fail caches.hf_home on node1: cannot write in /tmp/ray/x: No such file or directory",
    ]


def test_probe_blames_only_the_node_that_could_not_write() -> None:
    """node0 wrote (the captured report, edited), node1 could not: node0 not seeing node1's
    file is the same problem, said once."""
    text = (DATA / "doctor-probe-setup-and-write-failed.txt").read_text()
    edited = text.replace(
        "node0|write|caches.hf_home|failed|No such file or directory",
        "node0|write|caches.hf_home|ok|",
    )
    assert edited != text
    dirs = [("caches.hf_home", Path("/tmp/ray/x"))]
    checks = node_probe.probe_checks(spec(slurm__nodes=2), node_probe.parse_probe(edited), dirs)
    assert lines([c for c in checks if c.name.startswith("caches.")]) == [
        "fail caches.hf_home on node1: cannot write in /tmp/ray/x: No such file or directory"
    ]


def test_probe_fails_when_ray_is_not_on_the_nodes() -> None:
    found = node_probe.probe_checks(
        spec(slurm__nodes=2), report("no-ray"), [("logs.base_dir", Path("/tmp/dr"))]
    )
    failed = [c for c in found if c.failed]
    assert [c.name for c in failed] == ["ray on node0", "ray on node1"]
    assert failed[0].detail.startswith("ray is not on PATH after the setup command (PATH=")


# Captured on the dev cluster with the test image (scripts/test-image), 2 nodes: the report and,
# where a node's container did not start, that node's info step stderr (pyxis's words; the
# paths shortened, most of enroot's unsquashfs lines left out).
IN_CONTAINER = """\
nrl-probe|-|nodes|-|ok|node0 node1
nrl-probe|node1|host|-|ok|node1
nrl-probe|node0|host|-|ok|node0
nrl-probe|node0|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
nrl-probe|node1|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
nrl-probe|node1|container|-|ok|Debian GNU/Linux 12 (bookworm)
nrl-probe|node0|container|-|ok|Debian GNU/Linux 12 (bookworm)
nrl-probe|node1|setup|-|ok|
nrl-probe|node1|ray|-|ok|ray, version 2.60.0 (/opt/venv/bin/ray)
nrl-probe|node1|write|logs.base_dir|ok|
nrl-probe|node1|write|caches.hf_home|ok|
nrl-probe|node1|write|caches.uv|ok|
nrl-probe|node0|setup|-|ok|
nrl-probe|node0|ray|-|ok|ray, version 2.60.0 (/opt/venv/bin/ray)
nrl-probe|node0|write|logs.base_dir|ok|
nrl-probe|node0|write|caches.hf_home|ok|
nrl-probe|node0|write|caches.uv|ok|
nrl-probe|node1|read|logs.base_dir|ok|
nrl-probe|node1|read|caches.hf_home|ok|
nrl-probe|node1|read|caches.uv|failed|node0
nrl-probe|node0|read|logs.base_dir|ok|
nrl-probe|node0|read|caches.hf_home|ok|
nrl-probe|node0|read|caches.uv|failed|node1
nrl-probe|-|done|-|ok|
"""
NO_CONTAINER = """\
nrl-probe|-|nodes|-|ok|node0 node1
nrl-probe|node0|host|-|ok|node0
nrl-probe|node1|host|-|ok|node1
nrl-probe|node1|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
nrl-probe|node0|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
srun: error: node0: task 0: Exited with exit code 1
srun: error: node1: task 1: Exited with exit code 1
nrl-probe|-|step|info|failed|srun exited with 1
nrl-probe|-|done|-|ok|
"""
BAD_IMAGE = """\
slurmstepd-{node}: error: pyxis: child 15212 failed with error code: 1
slurmstepd-{node}: error: pyxis: failed to create container filesystem for image: /tmp/cap/bad.sqsh
slurmstepd-{node}: error: pyxis: printing enroot log file:
slurmstepd-{node}: error: pyxis:     [ERROR] Invalid image format: /tmp/cap/bad.sqsh
slurmstepd-{node}: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1
slurmstepd-{node}: error: Failed to invoke spank plugin stack
slurmstepd-{node}: error: pyxis: child 15230 failed with error code: 1
"""
MOUNT_MISSING = """\
slurmstepd-{node}: error: pyxis: --container-mounts: source path does not exist: /tmp/ray/x
slurmstepd-{node}: error: pyxis: couldn't create enroot start configuration script
slurmstepd-{node}: error: pyxis: printing enroot log file:
slurmstepd-{node}: error: pyxis:     [INFO] Extracting squashfs filesystem...
slurmstepd-{node}: error: pyxis:     Parallel unsquashfs: Using 2 processors
slurmstepd-{node}: error: pyxis:     created 17515 files
slurmstepd-{node}: error: pyxis: container was not started successfully by another task
slurmstepd-{node}: error: spank: required plugin spank_pyxis.so: task_init() failed with rc=-1
slurmstepd-{node}: error: Failed to invoke spank plugin stack
"""
IMAGE = spec(slurm__nodes=2, container__image="/tmp/cap/bad.sqsh")
LOGS = [("logs.base_dir", Path("/tmp/cap"))]


def test_probe_in_the_container_reports_the_image_s_ray() -> None:
    """Captured with the test image, caches.hf_home under a mount and caches.uv=/tmp/ray,
    which the job mounts at its own path: node-local on the dev cluster, inside or not."""
    dirs = [*LOGS, ("caches.hf_home", Path("/tmp/cap")), ("caches.uv", Path("/tmp/ray"))]
    errors = {"node0": "", "node1": ""}
    found = node_probe.probe_checks(IMAGE, node_probe.parse_probe(IN_CONTAINER), dirs, errors)
    assert lines(found) == [
        "ok node0: hostname node0; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)"
        "; container: Debian GNU/Linux 12 (bookworm); ray, version 2.60.0 (/opt/venv/bin/ray)",
        "ok node1: hostname node1; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)"
        "; container: Debian GNU/Linux 12 (bookworm); ray, version 2.60.0 (/opt/venv/bin/ray)",
        "ok logs.base_dir on nodes: all 2 nodes wrote a file in /tmp/cap and saw each other's",
        "ok caches.hf_home on nodes: all 2 nodes wrote a file in /tmp/cap and saw each other's",
        "fail caches.uv on node0: does not see the files node1 wrote in /tmp/ray: it is not the "
        "same dir on every node (not shared storage)",
        "fail caches.uv on node1: does not see the files node0 wrote in /tmp/ray: it is not the "
        "same dir on every node (not shared storage)",
    ]


@pytest.mark.parametrize(
    ("stderr", "name", "detail"),
    [
        (
            BAD_IMAGE,
            "container.image on {node}",
            "container.image /tmp/cap/bad.sqsh is not a squashfs image pyxis can start on {node}:"
            ' "pyxis: [ERROR] Invalid image format: /tmp/cap/bad.sqsh"; make one with nrl-launch '
            "pull (enroot import)",
        ),
        (
            MOUNT_MISSING,
            "container.mounts on {node}",
            'the container.mounts source /tmp/ray/x does not exist on {node}: "pyxis: '
            '--container-mounts: source path does not exist: /tmp/ray/x"; create it on storage '
            "every node sees, or fix container.mounts",
        ),
        # Another Slurm's words, without the node: the node is the file's.
        (
            BAD_IMAGE.replace("slurmstepd-{node}:", "slurmstepd:"),
            "container.image on {node}",
            "container.image /tmp/cap/bad.sqsh is not a squashfs image pyxis can start on {node}:"
            ' "pyxis: [ERROR] Invalid image format: /tmp/cap/bad.sqsh"; make one with nrl-launch '
            "pull (enroot import)",
        ),
        (
            None,
            "container on {node}",
            "the probe's info step did not start there: can {node} write in /tmp/cap "
            "(logs.base_dir)?",
        ),
        (
            "",
            "container on {node}",
            "no answer from inside the job's container (its stderr is empty)",
        ),
    ],
    ids=["not-squashfs", "mount-source-missing", "no-node-in-pyxis-line", "no-stderr", "empty"],
)
def test_a_container_that_does_not_start_fails_each_node_with_pyxis_s_line(
    stderr: str | None, name: str, detail: str
) -> None:
    """Only that: the steps it ended and the dirs no node wrote in are the same problem."""
    errors = {n: stderr.format(node=n) if stderr else stderr for n in ("node0", "node1")}
    found = node_probe.probe_checks(IMAGE, node_probe.parse_probe(NO_CONTAINER), LOGS, errors)
    assert [(c.name, c.detail) for c in found if c.failed] == [
        (name.format(node=n), detail.format(node=n)) for n in ("node0", "node1")
    ]
    assert len(found) == 4  # each node's own line, then its failure


def test_a_container_that_starts_on_some_nodes_only() -> None:
    """Captured with a mount source that node0 has and node1 does not (pyxis's lines in the
    report left out): node1 fails once, and the dirs are checked on node0 alone."""
    report = node_probe.parse_probe("""\
nrl-probe|-|nodes|-|ok|node0 node1
nrl-probe|node1|host|-|ok|node1
nrl-probe|node0|host|-|ok|node0
nrl-probe|node1|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
nrl-probe|node0|gpus|-|ok|8 (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)
nrl-probe|node0|container|-|ok|Debian GNU/Linux 12 (bookworm)
srun: error: node1: task 1: Exited with exit code 1
nrl-probe|node0|setup|-|ok|
nrl-probe|node0|ray|-|ok|ray, version 2.60.0 (/opt/venv/bin/ray)
nrl-probe|node0|write|logs.base_dir|ok|
nrl-probe|-|step|info|failed|srun exited with 1
nrl-probe|node0|read|logs.base_dir|failed|node1
srun: error: node1: task 1: Exited with exit code 1
nrl-probe|-|step|read|failed|srun exited with 1
nrl-probe|-|done|-|ok|
""")
    errors = {"node0": "", "node1": MOUNT_MISSING.format(node="node1")}
    found = node_probe.probe_checks(IMAGE, report, LOGS, errors)
    assert lines(found) == [
        "ok node0: hostname node0; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)"
        "; container: Debian GNU/Linux 12 (bookworm); ray, version 2.60.0 (/opt/venv/bin/ray)",
        "ok node1: hostname node1; 8 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7; 0 /dev/nvidia*)",
        "fail container.mounts on node1: the container.mounts source /tmp/ray/x does not exist on "
        'node1: "pyxis: --container-mounts: source path does not exist: /tmp/ray/x"; create it '
        "on storage every node sees, or fix container.mounts",
        "ok logs.base_dir on nodes: node0 wrote a file in /tmp/cap",
    ]


def test_without_a_container_no_node_is_blamed_for_one() -> None:
    """The same report, for a job without a container: no `container` line is expected."""
    job = spec(slurm__nodes=2)
    found = node_probe.probe_checks(job, node_probe.parse_probe(NO_CONTAINER), LOGS)
    assert lines([c for c in found if c.failed]) == [
        "fail logs.base_dir on node0: no answer from this node about /tmp/cap",
        "fail logs.base_dir on node1: no answer from this node about /tmp/cap",
        "fail on nodes: the probe's info step failed: srun exited with 1",
    ]


def test_probe_report_missing_a_node() -> None:
    text = (DATA / "doctor-probe-node-local-cache.txt").read_text()
    cut = "\n".join(
        line for line in text.splitlines() if "|node1|" not in line and "|done|" not in line
    )
    found = node_probe.parse_probe(cut)
    assert not found.done
    checks = node_probe.probe_checks(
        spec(slurm__nodes=2), found, [("logs.base_dir", Path("/tmp/dr"))]
    )
    assert lines([c for c in checks if c.failed]) == [
        "fail node1: no answer from this node: the probe's steps did not run there",
        "fail logs.base_dir on node1: no answer from this node about /tmp/dr",
    ]


def test_probe_request_is_the_job_s_own_request(tmp_path: Path) -> None:
    job = spec(
        slurm__nodes=2,
        slurm__partition="debug",
        slurm__dependency="afterok:12",
        slurm__extra_args=["--constraint=h100"],
        setup="source /venv/bin/activate",
        caches__hf_home="/shared/hf",
    )
    dirs = [("logs.base_dir", tmp_path / "logs dir"), ("caches.hf_home", Path("/shared/hf"))]
    argv, text = node_probe.probe_request(job, dirs, tmp_path / "probe.sbatch")
    assert argv == [
        "sbatch", "--parsable", "--exclusive", "--export=ALL", "--gres=gpu:8", "--nodes=2",
        "--ntasks-per-node=1", "--partition=debug", "--constraint=h100",
        "--job-name=nrl-launch-doctor", "--output=/dev/null", str(tmp_path / "probe.sbatch"),
    ]  # fmt: skip
    script = tmp_path / "probe.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout
    assert f"'{tmp_path}/logs dir'" in text


def test_probe_in_a_container_gets_the_job_s_pyxis_flags(tmp_path: Path) -> None:
    """The info and read steps run with set_container_args "" (the job's flags, no name): the
    user's mounts, each cache the job mounts at its own path (here where it would be created),
    and the log dir; they see each dir where the job's container does, the clean step where
    the node does."""
    shared = tmp_path / "shared"
    shared.mkdir()
    job = spec(
        slurm__nodes=2,
        container__image="/images/nemo-rl.sqsh",
        container__mounts=[f"{shared}:/shared:ro"],
        caches__hf_home="/shared/hf",
        caches__uv=f"{tmp_path}/uv/cache",
        logs__base_dir=f"{shared}/logs",
    )
    dirs = [(key, doctor._existing(path)) for key, path in doctor.shared_dirs(job, tmp_path)]
    assert dirs == [("logs.base_dir", shared), ("caches.hf_home", shared), ("caches.uv", tmp_path)]
    _, text = node_probe.probe_request(job, dirs, tmp_path / "probe.sbatch")
    script = tmp_path / "probe.sbatch"
    script.write_text(text)
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout
    # The script's definitions, then what the steps would get, in a real bash.
    steps = [
        f"NRL_LOG_DIR={shared} NRL_SUBMIT_DIR=/sub",
        'set_container_args ""',
        'printf "%s\\n" "${NRL_PROBE_DIRS[*]}" "${NRL_PROBE_HOST_DIRS[*]}"',
        'printf "%s\\n" "${NRL_CONTAINER_ARGS[@]}"',
    ]
    definitions = text.removesuffix("probe_main\n")
    run = subprocess.run(
        ["bash", "-c", "\n".join([definitions, *steps])], capture_output=True, text=True, check=True
    )
    assert run.stdout.splitlines() == [
        f"logs.base_dir {shared} caches.hf_home /shared caches.uv {tmp_path}",
        f"logs.base_dir {shared} caches.hf_home {shared} caches.uv {tmp_path}",
        "--container-image=/images/nemo-rl.sqsh",
        f"--container-mounts={shared}:/shared:ro,{tmp_path}:{tmp_path},{shared}:{shared}",
        "--container-workdir=/sub",
        "--no-container-mount-home",
    ]
    assert 'set_container_args ""' in text
    # pyxis's words, per node, where doctor reads them.
    assert '--error="${NRL_LOG_DIR//%/%%}/${NRL_PROBE_PREFIX}info-%N.err"' in text
    error = node_probe._error_path(shared, "77", "node0")
    assert error == shared / ".nrl-doctor-77-info-node0.err"


def test_probe_script_quotes_every_dir(tmp_path: Path) -> None:
    hostile = "/shared/$(touch pwned) x/hf"
    job = spec(caches__hf_home=hostile)
    _, text = node_probe.probe_request(job, [("caches.hf_home", Path(hostile))], tmp_path / "p")
    # The dir list alone, run: bash must read the path back unchanged, running nothing.
    script = tmp_path / "dirs.sh"
    script.write_text(source_job(text) + 'printf "%s\\n" "${NRL_PROBE_DIRS[@]}"\n')
    run = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert run.stdout.splitlines() == ["caches.hf_home", hostile]
    assert not (tmp_path / "pwned").exists()


# ---- The command, against fake Slurm commands ----


class FakeCluster:
    """Fake Slurm commands on PATH: each answers with the dev cluster's captured output and
    logs its argv. The probe job's sbatch writes a captured report where the job would."""

    def __init__(self, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
        self.slurm = slurm
        self.bin = slurm.bin_dir
        self.env = monkeypatch.setenv
        self.test_only("accepted")
        self.queue("77|COMPLETED|None|2|node[0-1]")
        self.probe_report("node-local-cache", Path("/nonexistent"))
        version = f"cat {DATA}/sbatch-version.txt"
        self.fake(
            "sbatch",
            f"""
            *--version*) {version} ;;
            *--test-only*) cat "$FAKE_TEST_ONLY" >&2; exit "$FAKE_TEST_ONLY_RC" ;;
            *) cp "${{@: -1}}" {self.bin}/probe.sbatch
               cp "$FAKE_REPORT" "$FAKE_REPORT_TO"; echo 77 ;;""",
        )
        self.fake("srun", f"*) {version} ;;")
        self.fake("squeue", f'*--version*) {version} ;;\n*) echo "$FAKE_SQUEUE" ;;')
        self.fake(
            "scontrol",
            f"""
            *--version*) {version} ;;
            *"show partition -o"*) cat {DATA}/scontrol-show-partition.txt ;;
            *"show config"*) cat {DATA}/scontrol-show-config.txt ;;""",
        )
        self.fake("sinfo", f"*--version*) {version} ;;\n*) cat {DATA}/sinfo-partition-idle.txt ;;")
        self.fake("scancel", "*) ;;")

    def fake(self, name: str, cases: str) -> None:
        self.slurm.script(name, f'case " $* " in\n{cases}\nesac')

    def test_only(self, captured: str, code: int = 0) -> None:
        self.env("FAKE_TEST_ONLY", str(DATA / f"sbatch-test-only-{captured}.txt"))
        self.env("FAKE_TEST_ONLY_RC", str(code))

    def queue(self, line: str) -> None:
        self.env("FAKE_SQUEUE", line)

    def probe_report(self, captured: str, log_dir: Path) -> None:
        self.env("FAKE_REPORT", str(DATA / f"doctor-probe-{captured}.txt"))
        self.env("FAKE_REPORT_TO", str(log_dir / ".nrl-doctor-77.out"))

    def calls(self) -> list[str]:
        return self.slurm.calls()


@pytest.fixture
def cluster(slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    """The one fake Slurm (conftest's), answering as the dev cluster did."""
    return FakeCluster(slurm, monkeypatch)


def test_doctor_passes_on_a_cluster_that_fits(
    cli: Cli, cluster: FakeCluster, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HF_TOKEN", "WANDB_API_KEY"):  # else submit's warning that they are not set
        monkeypatch.setenv(name, "set")
    result = cli("doctor", "--partition", "batch", "--nodes", "2")
    assert result.code == 0, result.out + result.err
    out = result.out.splitlines()
    assert out[0] == "Settings"
    assert "  slurm.partition = batch  (from --partition)" in out
    assert "  slurm.time = (not set)  (default)" in out
    checks = [line for line in out if line[:6] in ("ok    ", "warn  ", "FAIL  ")]
    assert [line.split(":")[0] for line in checks] == [
        "ok    slurm", "ok    slurm.partition", "ok    slurm.time", "ok    slurm.account",
        "ok    slurm.nodes", "ok    slurm.gpus_per_node", "ok    sbatch --test-only",
        "ok    logs.base_dir", "ok    ray.auth",
    ]  # fmt: skip
    assert out[-1] == "All 9 checks passed"
    test_only = next(c for c in cluster.calls() if "--test-only" in c)
    assert test_only == (
        "sbatch --test-only --exclusive --export=ALL --gres=gpu:8 --job-name=nrl-launch "
        "--nodes=2 --ntasks-per-node=1 --open-mode=append --output=./slurm-%j.out "
        "--partition=batch --wrap true"
    )
    assert list(isolated.iterdir()) == []  # the probe file is gone; nothing was created


@pytest.mark.usefixtures("cluster")
def test_doctor_needs_no_driver_but_keeps_one(cli: Cli, isolated: Path) -> None:
    (isolated / "job.yaml").write_text("driver:\n  command: [python, train.py]\n")
    assert cli("doctor", "-f", "job.yaml").code == 0
    assert cli("doctor", "--", "python", "train.py").code == 0
    assert cli("doctor", "--interactive").code == 0


@pytest.mark.usefixtures("cluster")
def test_doctor_json(cli: Cli) -> None:
    result = cli("doctor", "--json", "--gpus-per-node", "16")
    assert result.code == 6
    data = json.loads(result.out)
    assert (data["command"], data["ok"], data["nrl_launch_json"]) == ("doctor", False, 1)
    gpus = next(c for c in data["checks"] if c["name"] == "slurm.gpus_per_node")
    assert gpus["status"] == "fail"
    assert data["settings"]["slurm.gpus_per_node"] == {"value": 16, "source": "--gpus-per-node"}
    assert result.err.startswith("nrl-launch: error: doctor: 1 check failed: slurm.gpus_per_node")


def test_too_many_gpus_fails_with_exit_6(cli: Cli, cluster: FakeCluster) -> None:
    cluster.test_only("too-many-gpus", code=1)
    result = cli("doctor", "--gpus-per-node", "16")
    assert result.code == 6
    assert (
        "FAIL  slurm.gpus_per_node: 16 (from --gpus-per-node), but partition batch's nodes have "
        "at most 8 GPUs (gres: gpu:8)"
    ) in result.out.splitlines()
    assert (
        "FAIL  sbatch --test-only: Slurm refuses the request: allocation failure: Requested node "
        "configuration is not available"
    ) in result.out.splitlines()
    assert result.err == (
        "nrl-launch: error: doctor: 2 checks failed: slurm.gpus_per_node, sbatch --test-only\n"
    )
    assert "Traceback" not in result.out + result.err


def test_missing_slurm_commands_fail_without_asking_slurm(
    cli: Cli, cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    (cluster.bin / "srun").unlink()
    monkeypatch.setenv("PATH", str(cluster.bin))  # the fakes only, without srun
    result = cli("doctor")
    assert result.code == 6
    assert "FAIL  slurm: srun not found on PATH: run doctor on a Slurm login node" in result.out
    assert all(c.endswith("--version") for c in cluster.calls())


def test_bad_spec_is_exit_2_not_a_check(cli: Cli, cluster: FakeCluster) -> None:
    result = cli("doctor", "--nodes", "0")
    assert result.code == 2
    assert "slurm.nodes" in result.err and cluster.calls() == []


def test_on_nodes_reports_each_node_and_dir(cli: Cli, cluster: FakeCluster, isolated: Path) -> None:
    cluster.probe_report("node-local-cache", isolated)
    result = cli("doctor", "--on-nodes", "--nodes", "2", "--set", f"caches.hf_home={isolated}/hf")
    assert result.code == 6, result.err
    assert (
        f"FAIL  caches.hf_home on node0: does not see the files node1 wrote in {isolated}: it is "
        "not the same dir on every node (not shared storage)"
    ) in result.out.splitlines()
    assert (
        f"ok    logs.base_dir on nodes: all 2 nodes wrote a file in {isolated} and saw each other's"
        in result.out
    )
    assert "wait  probe job 77" not in result.out  # it had ended at the first look
    submit = next(c for c in cluster.calls() if "--parsable" in c)
    assert "--output=/dev/null" in submit and "--job-name=nrl-launch-doctor" in submit
    probe = (cluster.bin / "probe.sbatch").read_text()
    # Its report: <log dir>/.nrl-doctor-<JOBID>.out (the header's values; probe.sh joins them).
    where = 'printf "%s\\0" "$NRL_PROBE_REPORT_DIR/$NRL_PROBE_FILE_PREFIX"'
    assert bash_values(probe, where) == [f"{isolated}/.nrl-doctor-"]
    assert list(isolated.iterdir()) == []  # the report is removed once read


def test_on_nodes_gives_up_at_the_timeout_and_cancels(cli: Cli, cluster: FakeCluster) -> None:
    cluster.queue("77|PENDING|Resources|2|")
    result = cli("doctor", "--on-nodes", "--probe-timeout", "1")
    assert result.code == 6
    assert (
        "FAIL  on nodes: probe job 77 was still PENDING (Resources) after 1 s: cancelled it "
        "(raise --probe-timeout to wait longer)"
    ) in result.out.splitlines()
    assert "scancel 77" in cluster.calls()


def test_on_nodes_is_not_run_when_the_request_fails(cli: Cli, cluster: FakeCluster) -> None:
    cluster.test_only("too-many-nodes", code=1)
    result = cli("doctor", "--on-nodes", "--nodes", "5")
    assert result.code == 6
    assert "warn  on nodes: not run: fix the failed checks above first" in result.out
    assert not [c for c in cluster.calls() if "--parsable" in c]


def test_on_nodes_needs_slurm(cli: Cli) -> None:
    result = cli("doctor", "--on-nodes", "--backend", "local", "--container-runtime", "none")
    assert result.code == 2
    assert "--on-nodes" in result.err


def test_local_backend_checks_only_files(cli: Cli) -> None:
    result = cli("doctor", "--backend", "local", "--log-dir", "/proc/nrl-logs")
    assert result.code == 6
    assert (
        "FAIL  logs.base_dir: /proc/nrl-logs does not exist, and /proc is not writable"
        in result.out
    )
    assert "slurm:" not in result.out


# ---- Who else can write it: real dirs and files with real modes ----

# A group of other users (the dev machine's nrl-team: nrl-user, nrl-other), not the user's
# private one: what it can write, they can.
TEAM_GID = 2100


def team_writable(path: Path, mode: int) -> None:
    """Give `path` to group TEAM_GID with `mode` (skips where there is no such group)."""
    try:
        grp.getgrgid(TEAM_GID)
    except KeyError:
        pytest.skip(f"needs group {TEAM_GID} (nrl-team, a group of other users)")
    try:
        os.chown(path, -1, TEAM_GID)
    except PermissionError:
        pytest.skip(f"cannot give {path} to group {TEAM_GID} as this user")
    path.chmod(mode)


def check_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:6] in ("ok    ", "warn  ", "FAIL  ")]


def test_files_a_setup_command_sources() -> None:
    setup = (
        "module load cuda; source .venv/bin/activate && . /opt/env.sh || true\n"
        "if true; then source 'my env.sh'; fi; echo source x; source $HOME/y\n"
        "cd sub && source rel.sh; . /abs.sh"
    )
    assert sourced(setup) == [
        (".venv/bin/activate", False), ("/opt/env.sh", False), ("my env.sh", False),
        ("rel.sh", True), ("/abs.sh", True),
    ]  # fmt: skip
    assert sourced("source 'open") == []  # bash refuses it too


CACHE_WARNING = (
    "another user could put code there that your job runs (a uv wheel, a model's remote "
    "code); use a directory only you can write"
)


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        (0o777, "{hf} is writable by every user (mode 0777)"),
        (0o1777, "{hf} is writable by every user (mode 1777)"),  # sticky: still shared
        (0o755, None),
    ],
)
def test_cache_dirs_other_users_can_write_warn(
    cli: Cli, isolated: Path, mode: int, why: str | None
) -> None:
    hf = isolated / "hf"
    hf.mkdir()
    hf.chmod(mode)
    result = cli("doctor", "--backend", "local", "--set", f"caches.hf_home={hf}")
    assert result.code == 0, result.out + result.err
    lines = check_lines(result.out)
    assert f"ok    caches.hf_home: {hf} is writable" in lines
    warned = [line for line in lines if line.startswith("warn  caches.hf_home")]
    if why is None:
        assert warned == []
    else:
        assert warned == [f"warn  caches.hf_home: {hf}: {why.format(hf=hf)}: {CACHE_WARNING}"]


def test_a_cache_dir_not_made_yet_in_a_dir_others_can_replace_warns(
    cli: Cli, isolated: Path
) -> None:
    shared = isolated / "shared"
    shared.mkdir()
    team_writable(shared, 0o775)
    uv = shared / "uv"
    result = cli("doctor", "--backend", "local", "--set", f"caches.uv={uv}")
    assert result.code == 0, result.out + result.err
    assert (
        f"warn  caches.uv: {uv}: {shared} is writable by group nrl-team (mode 0775, no sticky "
        f"bit): {CACHE_WARNING}"
    ) in check_lines(result.out)


def test_relative_and_shared_path_entries_warn(
    cli: Cli, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_bin = isolated / "bin"
    open_bin.mkdir()
    open_bin.chmod(0o777)
    entries = [os.environ["PATH"], ".", str(open_bin), "/nonexistent/bin", ""]
    monkeypatch.setenv("PATH", os.pathsep.join(entries))
    result = cli("doctor", "--backend", "local")
    assert result.code == 0, result.out + result.err
    relative = (
        "is relative: the job's commands are looked up in the dir it runs in (the submit dir), "
        "where another user may put one; remove it from PATH"
    )
    assert [line for line in check_lines(result.out) if line.startswith("warn  PATH")] == [
        f"warn  PATH: '.' {relative}",
        f"warn  PATH: {open_bin}: {open_bin} is writable by every user (mode 0777, no sticky "
        "bit): another user could put a command there that your job runs as you; remove it "
        "from PATH, or make it writable by you alone",
        f"warn  PATH: '' (empty) {relative}",
    ]


def test_a_log_dir_others_can_write_fails_as_submit_refuses_it(cli: Cli, isolated: Path) -> None:
    logs = isolated / "logs"
    logs.mkdir()
    team_writable(logs, 0o775)
    result = cli("doctor", "--backend", "local", "--log-dir", "logs")
    assert result.code == 6
    problem = (
        f"logs.base_dir logs ({logs}): {logs} is writable by group nrl-team (mode 0775, no "
        "sticky bit): another user could make or replace this job's log dir, and so change what "
        "its nodes run (and read a Ray job's token); use a directory only you can write "
        "(--log-dir DIR)"
    )
    assert "FAIL  " + problem.replace("logs.base_dir ", "logs.base_dir: ", 1) in result.out
    assert f"ok    logs.base_dir: {logs} is writable" in result.out  # the write check stays
    assert result.err == "nrl-launch: error: doctor: 1 check failed: logs.base_dir\n"
    # Submit refuses the same dir with the same line.
    (refused,) = log_base_findings(spec(logs__base_dir="logs"), isolated)
    assert refused.error
    assert refused.message == problem


def test_a_log_dir_under_another_user_s_dir_warns(cli: Cli, isolated: Path) -> None:
    try:
        other = pwd.getpwnam("nrl-user").pw_uid
    except KeyError:
        pytest.skip("needs user nrl-user (another user)")
    theirs = isolated / "theirs"
    theirs.mkdir()
    os.chown(theirs, other, -1)
    result = cli("doctor", "--backend", "local", "--log-dir", "theirs/logs")
    assert result.code == 0, result.out + result.err
    assert (
        f"warn  logs.base_dir: theirs/logs ({theirs}/logs): {theirs} belongs to user nrl-user, "
        "who could replace what is under it (this job's log dir and its Ray token); use a "
        "directory of your own (--log-dir DIR)"
    ) in check_lines(result.out)


def test_a_submit_dir_others_can_write_warns(cli: Cli, isolated: Path, tmp_path: Path) -> None:
    team_writable(isolated, 0o770)
    result = cli("doctor", "--backend", "local", "--log-dir", str(tmp_path / "logs"))
    assert result.code == 0, result.out + result.err
    assert (
        f"warn  submit dir: {isolated}: {isolated} is writable by group nrl-team (mode 0770, no "
        "sticky bit): the job runs here, and relative paths in setup and the driver resolve "
        "here: another user could replace what it runs; submit from a directory only you can "
        "write"
    ) in check_lines(result.out)


def test_files_setup_sources_that_others_can_write_warn(cli: Cli, isolated: Path) -> None:
    env = isolated / "env.sh"
    env.write_text("export A=1\n")
    team_writable(env, 0o664)
    team = isolated / "team"
    team.mkdir()
    team_writable(team, 0o775)
    (team / "b.sh").write_text("")
    (isolated / "mine.sh").write_text("")  # 0644, the user's: nothing to say
    setup = "source env.sh && . team/b.sh; source mine.sh"
    result = cli("doctor", "--backend", "local", "--set", f"setup={setup}")
    assert result.code == 0, result.out + result.err
    then = (
        "another user could change what your job runs as you; keep the file, and the dirs it "
        "is in, writable by you alone"
    )
    assert [line for line in check_lines(result.out) if line.startswith("warn  setup")] == [
        f"warn  setup: source env.sh: {env} is writable by group nrl-team (mode 0664): {then}",
        f"warn  setup: source team/b.sh: {team} is writable by group nrl-team (mode 0775, no "
        f"sticky bit): {then}",
    ]


def test_doctor_help_imports_no_heavy_library(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI in a fresh process must be this one (PYTHONPATH=src is relative to the repo).
    monkeypatch.setenv("PYTHONPATH", str(Path(nrl_launch.__file__).parents[1]))
    assert not roots(imported("doctor", "--help")) & {"ray", "jinja2", "yaml", "rich"}


@pytest.mark.parametrize(
    ("auth", "version", "verdict"),
    [("token", "2.51.0", "fail"), ("token", "2.60.0", None), ("off", "2.40.0", None)],
)
def test_ray_auth_needs_ray_2_52_on_the_nodes(auth: str, version: str, verdict: str | None) -> None:
    from nrl_launch.doctor import auth_check, ray_auth_on_node
    from nrl_launch.spec import LaunchSpec

    spec = LaunchSpec.model_validate({"interactive": True, "ray": {"auth": auth}})
    found = ray_auth_on_node(spec, "node3", f"ray, version {version}")
    assert (found.status if found else None) == verdict
    if found:
        assert found.detail.startswith(f"Ray {version} has no token authentication")
    assert auth_check(spec).status == ("ok" if auth == "token" else "warn")
