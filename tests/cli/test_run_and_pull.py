"""`run` and `pull`: plain Slurm jobs (no Ray) against fake Slurm commands: the sbatch argv, the
script's values as bash reads them, image references, every refusal, and status, logs and the
Ray-only commands on their records. The same jobs run for real in
tests/cluster/test_utility_jobs.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from nrl_launch import enroot
from nrl_launch.jobs import record
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.golden_cases import PYXIS_FLAGS, container_args
from tests.helpers import HOSTILE, bash_values, imported, roots

IMAGE = "nvcr.io/nvidia/nemo-rl:v0.6.0"
URI = "docker://nvcr.io#nvidia/nemo-rl:v0.6.0"


def submitted_script(tmp_path: Path, job_id: str) -> str:
    rec = record.load(job_id, tmp_path / "state")
    return Path(rec.script_path).read_text()


def driver_argv(script: str) -> list[str]:
    return bash_values(script, 'printf "%s\\0" "${NRL_DRIVER[@]}"')


# ---- image references ----


@pytest.mark.parametrize(
    ("reference", "uri", "file_name"),
    [
        (IMAGE, URI, "nemo-rl+v0.6.0.sqsh"),
        (URI, URI, "nemo-rl+v0.6.0.sqsh"),
        (
            "docker://nvcr.io/nvidia/nemo-rl:v0.6.0.nemotron_3_nano",
            "docker://nvcr.io#nvidia/nemo-rl:v0.6.0.nemotron_3_nano",
            "nemo-rl+v0.6.0.nemotron_3_nano.sqsh",
        ),
        ("ubuntu:22.04", "docker://ubuntu:22.04", "ubuntu+22.04.sqsh"),
        ("nvidia/cuda:12.4.1-devel", "docker://nvidia/cuda:12.4.1-devel", "cuda+12.4.1-devel.sqsh"),
        ("localhost:5000/team/img:1", "docker://localhost:5000#team/img:1", "img+1.sqsh"),
        ("ghcr.io/a/b", "docker://ghcr.io#a/b", "b.sqsh"),
        (
            "docker://$oauthtoken@nvcr.io#nvidia/nemo-rl:v0.6.0",
            "docker://$oauthtoken@nvcr.io#nvidia/nemo-rl:v0.6.0",
            "nemo-rl+v0.6.0.sqsh",
        ),
        (
            "nvcr.io/nvidia/x@sha256:" + "ab" * 32,
            "docker://nvcr.io#nvidia/x@sha256:" + "ab" * 32,
            "x+abababababab.sqsh",
        ),
    ],
)
def test_image_references_become_enroot_uris(reference: str, uri: str, file_name: str) -> None:
    image = enroot.parse(reference)
    assert (image.uri, image.file_name) == (uri, file_name)


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("", "must not be empty"),
        ("/images/nemo-rl.sqsh", "is a file, not a registry image"),
        ("nemo-rl.sqsh", "is a file, not a registry image"),
        ("dockerd://nemo-rl:v1", "dockerd:// images cannot be pulled here"),
        ("nvcr.io/NVIDIA/NeMo", "image name 'NVIDIA/NeMo' must be lowercase"),
        ("nemo rl", "image name 'nemo rl' must be lowercase"),
        ("nemo-rl:v 1", "tag 'v 1' must be letters"),
        ("nemo-rl@sha256:xyz", "digest 'sha256:xyz' must be sha256: and 64 hex digits"),
        ("docker://a user@nvcr.io#x", "user 'a user' holds characters"),
        ("nvcr.io!/x", "registry 'nvcr.io!' is not a host name"),
        ("nvcr.io/", "image name '' must be lowercase"),
    ],
)
def test_bad_image_references_say_what_is_wrong(reference: str, reason: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(reason)) as info:
        enroot.parse(reference)
    assert "\n" not in str(info.value)


# ---- pull ----


def test_pull_submits_one_import_task_whatever_the_profile_says(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, isolated: Path
) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "slurm: {account: acct, gpus_per_node: 8, nodes: 4, exclusive: true}\n"
        "container: {image: /images/train.sqsh, mounts: [/lustre]}\n"
        "caches: {enroot: /lustre/enroot-cache}\n"
    )
    slurm.answer("sbatch", stdout="77\n")
    result = cli("pull", IMAGE, "--profile", str(profile), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    target = str(isolated / "nemo-rl+v0.6.0.sqsh")
    assert (data["job_id"], data["image"], data["output"]) == ("77", URI, target)
    (call,) = slurm.calls()
    flags = call.split()
    assert {"--nodes=1", "--ntasks-per-node=1", "--account=acct"} <= set(flags)
    assert "--job-name=enroot-import" in flags
    assert not [f for f in flags if f.startswith(("--gres", "--gpus", "--exclusive"))]
    script = submitted_script(tmp_path, "77")
    assert driver_argv(script) == ["enroot", "import", "-o", target, URI]
    assert bash_values(script, 'job_env; printf "%s\\0" "$ENROOT_CACHE_PATH"') == [
        "/lustre/enroot-cache"
    ]
    # No container: the script's own set_container_args gives srun nothing.
    probe = 'NRL_SUBMIT_DIR=/s; set_container_args ""; printf "%s\\0" "${#NRL_CONTAINER_ARGS[@]}"'
    assert bash_values(script, probe) == ["0"]
    assert "NRL_REMOVE_FIRST" not in script
    assert record.load("77", tmp_path / "state").kind == "plain"
    assert not Path(target).exists()  # the job writes it, on a node


def test_pull_force_replaces_the_file_on_the_node_not_here(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    target = tmp_path / "images" / "nemo rl.sqsh"
    target.parent.mkdir()
    target.write_text("the old image")
    slurm.answer("sbatch", stdout="78\n")
    result = cli("pull", IMAGE, "-o", str(target), "--force", "-q")
    assert (result.code, result.out) == (0, "78\n"), result.err
    script = submitted_script(tmp_path, "78")
    assert bash_values(script, 'printf "%s\\0" "$NRL_REMOVE_FIRST"') == [str(target)]
    assert target.read_text() == "the old image"  # still usable until the import starts


def test_pull_makes_a_relative_output_absolute(cli: Cli, slurm: FakeSlurm, isolated: Path) -> None:
    (isolated / "images").mkdir()
    slurm.answer("sbatch", stdout="79\n")
    result = cli("pull", IMAGE, "-o", "images/../images/nemo.sqsh", "--json")
    assert json.loads(result.out)["output"] == str(isolated / "images" / "nemo.sqsh")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [IMAGE],
            "-o: nemo-rl+v0.6.0.sqsh (the default for IMAGE): {work}/nemo-rl+v0.6.0.sqsh "
            "already exists; pass --force to replace it",
        ),
        ([IMAGE, "-o", "existing.sqsh"], "-o existing.sqsh: {work}/existing.sqsh already exists"),
        (["NVIDIA/NeMo"], "IMAGE 'NVIDIA/NeMo': image name 'NVIDIA/NeMo' must be lowercase"),
        (["/images/x.sqsh"], "IMAGE '/images/x.sqsh': is a file, not a registry image"),
        ([IMAGE, "-o", "x.img"], "-o x.img: expected a .sqsh file name"),
        ([IMAGE, "-o", "nowhere/x.sqsh"], "-o nowhere/x.sqsh: directory {work}/nowhere does not"),
        ([IMAGE, "-o", "adir"], "-o adir: {work}/adir is a directory"),
        ([IMAGE, "-o", "n.sqsh", "--set", "slurm.nodes=2"], "--set slurm.nodes: pull always runs"),
        ([IMAGE, "-o", "n.sqsh", "--set", "slurm.gpus_per_node=8"], "--set slurm.gpus_per_node"),
        ([IMAGE, "-o", "n.sqsh", "--set", "container.image=x"], "--set container.image"),
        ([IMAGE, "-o", "n.sqsh", "--set", "slurm={nodes: 2}"], "--set slurm: pull always runs"),
        ([IMAGE, "-o", "n.sqsh", "--set", "driver.command=[ls]"], "--set driver.command"),
        ([IMAGE, "-o", "n.sqsh", "--dry-run", "--wait"], "--dry-run and --wait cannot be"),
        ([IMAGE, "-o", "n.sqsh", "--nodes", "2"], "No such option: --nodes"),
        ([IMAGE, "-o", "n.sqsh", "--time", "25:00:61"], "slurm.time: minutes and seconds"),
        ([IMAGE, "extra"], "Got unexpected extra argument(s) (extra)"),
        ([], "Missing argument 'IMAGE'"),
    ],
)
def test_pull_refuses_bad_input_in_one_line_and_submits_nothing(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, isolated: Path, args: list[str], expected: str
) -> None:
    (isolated / "nemo-rl+v0.6.0.sqsh").write_text("image")
    (isolated / "existing.sqsh").write_text("image")
    (isolated / "adir").mkdir()
    before = sorted(isolated.rglob("*"))
    result = cli("pull", *args)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and result.err.startswith("nrl-launch: error: ")
    assert expected.replace("{work}", str(isolated)) in result.err
    assert (result.out, slurm.calls()) == ("", [])
    assert sorted(isolated.rglob("*")) == before
    assert not (tmp_path / "state").exists()


def test_pull_dry_run_prints_the_script_and_writes_nothing(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, isolated: Path
) -> None:
    result = cli("pull", IMAGE, "--dry-run")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[2].startswith("# Submit with: sbatch --parsable ")
    assert f"'{URI}'" in result.out
    data = json.loads(cli("pull", IMAGE, "--dry-run", "--json").out)
    assert data["argv"][:2] == ["sbatch", "--parsable"] and data["image"] == URI
    assert data["script"] == result.out.removesuffix("\n") + "\n"
    assert (slurm.calls(), list(isolated.iterdir())) == ([], [])
    assert not (tmp_path / "state").exists()


# ---- run ----

RUN = ["--nodes", "2", "--gpus-per-node", "0", "--container-runtime", "none"]


def test_run_submits_the_command_once_per_node(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")  # --secret makes it required at submit
    command = ["python", "prepare.py", "--out", "/data dir/$(x)"]
    slurm.answer("sbatch", stdout="81\n")
    result = cli("run", *RUN, "--env", "DATA=/d", "--secret", "HF_TOKEN", "--", *command)
    assert result.code == 0, result.err
    assert result.out.startswith("Submitted job 81: python prepare.py --out '/data dir/$(x)' on ")
    (call,) = slurm.calls()
    assert "--nodes=2" in call.split() and "--gres" not in call
    rec = record.load("81", tmp_path / "state")
    assert (rec.kind, rec.nodes) == ("plain", 2)
    script = submitted_script(tmp_path, "81")
    assert driver_argv(script) == command
    step = bash_values(script, 'printf "%s\\0" "${NRL_STEP_ARGS[@]}"')
    assert step == [
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--label",  # several nodes write job.log: each line says which
    ]
    assert bash_values(script, 'job_env; printf "%s\\0" "$DATA"') == ["/d"]


def test_run_values_reach_bash_unchanged() -> None:
    from nrl_launch.backends import slurm
    from tests.helpers import spec

    job = spec(
        driver={"command": ["tool", *HOSTILE]}, env={f"V{i}": v for i, v in enumerate(HOSTILE)}
    )
    script = slurm.plan_plain(job, remove_first="/x/" + HOSTILE[4]).script
    assert driver_argv(script) == ["tool", *HOSTILE]
    probe = "job_env\n" + "".join(f'printf "%s\\0" "$V{i}"\n' for i in range(len(HOSTILE)))
    assert bash_values(script, probe) == HOSTILE
    assert bash_values(script, 'printf "%s\\0" "$NRL_REMOVE_FIRST"') == ["/x/" + HOSTILE[4]]


def test_run_in_a_container_uses_the_ray_job_s_pyxis_flags(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "run.sbatch"
    result = cli(
        "run", "--dry-run", "--container", IMAGE, "--mount", "/lustre:/lustre", "--", "nvidia-smi"
    )
    assert result.code == 0, result.err
    script.write_text(result.out)
    args = container_args(script, "job")
    assert set(args) <= PYXIS_FLAGS
    assert args["--container-image"] == IMAGE
    assert args["--container-mounts"] == "/lustre:/lustre,/shared/logs/77-logs:/shared/logs/77-logs"


def test_run_in_a_container_mounts_the_caches_it_exports(cli: Cli, tmp_path: Path) -> None:
    """UV_CACHE_DIR (and HF_HOME...) point into the caches: the container must see them, as a Ray
    job's does, or uv fails on a read-only image or fills the container's own disk."""
    script = tmp_path / "run.sbatch"
    result = cli(
        "run", "--dry-run", "--container", IMAGE, "--mount", "/lustre:/lustre",
        "--set", "caches.uv=/scratch/uv", "--", "uv", "pip", "install", ".",
    )  # fmt: skip
    assert result.code == 0, result.err
    script.write_text(result.out)
    mounts = container_args(script, "job")["--container-mounts"].split(",")
    assert "/scratch/uv:/scratch/uv" in mounts
    assert "export UV_CACHE_DIR=/scratch/uv" in result.out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--interactive"], "--interactive: run runs one command and ends"),
        (["--interactive", "--", "hostname"], "--interactive: run runs one command and ends"),
        ([], "no command: give it after --"),
        (["--backend", "local", "--", "hostname"], "No such option: --backend"),
        (
            ["--set", "backend=local", "--container-runtime", "none", "--", "hostname"],
            "backend: run submits to Slurm, not 'local' (from --set backend)",
        ),
        (["--dry-run", "--wait", "--", "hostname"], "--dry-run and --wait cannot be combined"),
        (["--nodes", "0", "--", "hostname"], "slurm.nodes: input should be greater than"),
        (["--env", "SLURM_X=1", "--", "hostname"], "cannot be set: SLURM_X is set by Slurm"),
        (["--mount", "relative:/x", "--", "hostname"], "container.mounts"),
    ],
)
def test_run_refuses_bad_input_in_one_line_and_submits_nothing(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, isolated: Path, args: list[str], expected: str
) -> None:
    result = cli("run", *args)
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1 and result.err.startswith("nrl-launch: error: ")
    assert expected in result.err
    assert (result.out, slurm.calls(), list(isolated.iterdir())) == ("", [], [])
    assert not (tmp_path / "state").exists()


def test_run_wait_exits_with_the_command_s_exit_code(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="82\n")
    slurm.answer("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    slurm.answer("sacct", stdout="82|FAILED|3:0\n")
    result = cli("run", "--wait", *RUN, "--", "false")
    assert result.code == 3, result.err
    assert "82  FAILED     exit code 3" in result.out


# ---- status, logs and the Ray-only commands on a plain job ----


def test_status_and_logs_of_a_plain_job_read_job_log(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    slurm.answer("sbatch", stdout="83\n")
    cli("run", "-q", *RUN, "--log-dir", str(tmp_path / "logs"), "--", "hostname")
    log_dir = tmp_path / "logs" / "83-logs"
    log_dir.mkdir(parents=True)
    (log_dir / "timeline").write_text("submitted 1.0\nstarted 2.0\ncommand_started 2.1\n")
    (log_dir / "job.log").write_text("0: node0\n1: node1\n")
    (log_dir / "ray-driver.log").write_text("not this one\n")
    slurm.answer("squeue", stdout="83|RUNNING|None|2|node[0-1]\n")
    status = json.loads(cli("status", "83", "--json").out)["jobs"][0]
    assert (status["phase"], status["detail"]) == ("RUNNING", "command running on 2 node(s)")
    assert status["driver_tail"] == ["0: node0", "1: node1"]
    assert cli("logs", "83").out == "0: node0\n1: node1\n"
    refused = cli("logs", "83", "--node", "1")
    assert refused.code == 2
    assert refused.err == (
        "nrl-launch: error: --node '1': job 83 runs a plain command (nrl-launch run or pull), "
        "whose one log, job.log, holds every node's output\n"
    )


def test_attach_stop_dashboard_refuse_a_plain_job(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="84\n")
    cli("run", "-q", *RUN, "--", "sleep", "60")
    for command in (["attach", "84", "--", "hostname"], ["stop", "84"], ["dashboard", "84"]):
        result = cli(*command)
        assert result.code == 2, (command, result.err)
        assert result.err.startswith(
            "nrl-launch: error: job 84 runs a plain command (nrl-launch run or pull), without Ray: "
            f"nrl-launch {command[0]} works on Ray jobs only"
        )
    assert slurm.calls()[1:] == []  # nothing was asked of Slurm after sbatch


def test_records_written_before_kind_existed_are_ray_jobs(tmp_path: Path) -> None:
    old = {
        "schema_version": 1,
        "job_id": "5",
        "backend": "slurm",
        "job_name": "j",
        "nodes": 2,
        "submitted_at": 1.0,
        "submit_dir": "/s",
        "log_dir": "/s/5-logs",
        "script_path": "/x.sbatch",
        "argv": ["sbatch"],
        "spec": {},
    }
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "5.json").write_text(json.dumps(old))
    assert record.load("5", tmp_path).kind == "ray"


def test_run_and_pull_help_import_no_heavy_library() -> None:
    heavy = {"ray", "jinja2", "yaml", "omegaconf", "rich"}
    for command in ("run", "pull"):
        assert not roots(imported(command, "--help")) & heavy, command


def test_plain_script_runs_the_command_and_records_how_it_ended(tmp_path: Path) -> None:
    """The task step in a real bash, with srun's variables: the command's output, ENDED and
    the exit code, and the missing-program check that pull's enroot relies on."""
    from nrl_launch.backends import slurm
    from tests.helpers import spec

    log_dir = tmp_path / "1-logs"
    log_dir.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "NRL_LOG_DIR": str(log_dir),
        "NRL_SUBMIT_DIR": str(tmp_path),
        "SLURM_NODEID": "1",
        "SLURMD_NODENAME": "node1",
    }

    def task(*command: str) -> int:
        script = tmp_path / "job.sbatch"
        script.write_text(slurm.plan_plain(spec(driver={"command": list(command)})).script)
        for name in ("ENDED", "exit_code"):
            (log_dir / name).unlink(missing_ok=True)
        done = subprocess.run(["bash", str(script), "task"], env=env, capture_output=True)
        return done.returncode

    assert task("bash", "-c", "echo hi; exit 3") == 3
    assert (log_dir / "ENDED").read_text() == "the command exited with code 3 on node 1 (node1)\n"
    assert (log_dir / "exit_code").read_text() == "3\n"
    assert task("true") == 0 and not (log_dir / "ENDED").exists()
    assert task("enroot-is-not-here", "import") == 127
    assert (
        (log_dir / "ENDED")
        .read_text()
        .startswith("enroot-is-not-here is not installed on node 1 (node1): no such command")
    )
    env["NRL_SUBMIT_DIR"] = str(tmp_path / "gone")
    assert task("true") == 1
    assert (log_dir / "ENDED").read_text() == (
        f"the workdir {tmp_path}/gone does not exist on node 1 (node1)\n"
    )
