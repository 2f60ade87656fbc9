"""Container mistakes refused or warned about before the job is written or queued."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nrl_launch import backends, container_checks, storage
from nrl_launch.container_checks import Finding, findings
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli
from tests.fakes import FakeSlurm

REGISTRY = "nvcr.io/nvidia/nemo-rl:v0.6.0"
CMD = ["--", "python", "-c", "pass"]


@pytest.fixture(autouse=True)
def shared_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The test's tmp dir stands for shared storage (it is under /tmp, which is node-local on
    a cluster), and this machine's enroot config is not read."""
    monkeypatch.setattr(storage, "NODE_LOCAL_ROOTS", ("/var/tmp", "/dev/shm", "/local"))
    monkeypatch.setenv("ENROOT_SYSCONF_PATH", str(tmp_path / "no-enroot"))
    monkeypatch.delenv("ENROOT_CONFIG_PATH", raising=False)


def spec(**container: Any) -> LaunchSpec:
    driver = container.pop("driver", {"command": ["python", "-c", "pass"]})
    extra = container.pop("extra", {})
    return LaunchSpec.model_validate(
        {"container": {"image": REGISTRY, **container}, "driver": driver, **extra}
    )


def found(
    job: LaunchSpec,
    submit_dir: Path | str,
    *,
    on_host: bool = True,
    env: dict[str, str] | None = None,
    **environ: str,
) -> list[Finding]:
    environ = {"HOME": "/home/nobody", **(env or {}), **environ}
    return findings(job, str(submit_dir), environ, on_host=on_host)


def keys(items: list[Finding]) -> list[tuple[str, bool]]:
    return [(f.key, f.error) for f in items]


# ---- container.image ----


@pytest.mark.parametrize("image", ["images/x.sqsh", "x.squashfs", "~/x.sqsh"])
def test_a_relative_sqsh_is_refused_even_at_render(tmp_path: Path, image: str) -> None:
    (problem,) = found(spec(image=image, mounts=[str(tmp_path)]), tmp_path, on_host=False)
    assert problem.error and problem.key == "container.image"
    assert problem.message.startswith(f"container.image {image!r}: pyxis takes an image")
    expected = "/home/nobody/x.sqsh" if image.startswith("~") else f"{tmp_path}/{image}"
    assert problem.message.endswith(f"give the absolute path, e.g. {expected}")
    assert "\n" not in problem.message


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("Bad Image", "image name 'Bad Image' must be lowercase letters"),
        ("nvcr.io/NVIDIA/nemo-rl", "image name 'NVIDIA/nemo-rl' must be lowercase letters"),
        ("docker://nvcr.io#nvidia/x:v 1", "tag 'v 1' must be letters, digits"),
        ("nvidia/x@sha256:abc", "digest 'sha256:abc' must be sha256: and 64 hex digits"),
    ],
)
def test_a_registry_image_enroot_could_not_pull_is_refused_at_render(
    tmp_path: Path, image: str, problem: str
) -> None:
    """pyxis would fail it on every node after the queue: one line naming the key now."""
    (found_one,) = found(spec(image=image, mounts=[str(tmp_path)]), tmp_path, on_host=False)
    assert found_one.error and found_one.key == "container.image"
    assert found_one.message.startswith(f"container.image {image!r}: {problem}")
    assert found_one.message.endswith("or a .sqsh file's path starting with / or .")


@pytest.mark.parametrize(
    "image",
    [
        REGISTRY,
        "docker://nvcr.io#nvidia/nemo-rl:v0.6.0",
        "ubuntu",
        "./x.sqsh",
        "$oauthtoken@nvcr.io#nvidia/nemo-rl:v0.6.0",  # pyxis's USER@REGISTRY#IMAGE
        "dockerd://MyLocalImage",  # a local daemon's own names
    ],
)
def test_registry_images_and_dot_paths_are_not_refused_at_render(
    tmp_path: Path, image: str
) -> None:
    assert found(spec(image=image, mounts=[str(tmp_path)]), tmp_path, on_host=False) == []


def test_an_image_file_must_exist_at_submit(tmp_path: Path) -> None:
    image = tmp_path / "rl.sqsh"
    job = spec(image=str(image), mounts=[str(tmp_path)])
    assert found(job, tmp_path, on_host=False) == []  # render: this machine is not the cluster
    (missing,) = found(job, tmp_path)
    assert missing.error and missing.message.startswith(f"container.image {image}: no such file")
    image.write_bytes(b"hsqs")
    assert found(job, tmp_path) == []
    relative = spec(image="./rl.sqsh", mounts=[str(tmp_path)])
    assert found(relative, tmp_path) == []  # relative to the submit dir, as the steps start
    assert keys(found(relative, tmp_path / "elsewhere")) == [("container.image", True)]


def test_an_image_dir_is_refused(tmp_path: Path) -> None:
    (problem,) = found(spec(image=str(tmp_path), mounts=[str(tmp_path)]), tmp_path)
    assert problem.error and "a directory, not a .sqsh file" in problem.message


def test_an_image_on_node_local_disk_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    image = tmp_path / "local" / "rl.sqsh"
    image.parent.mkdir()
    monkeypatch.setattr(storage, "NODE_LOCAL_ROOTS", (str(tmp_path / "local"),))
    job = spec(image=str(image), mounts=[str(tmp_path)])
    assert keys(found(job, tmp_path)) == [("container.image", True)]  # missing here: an error
    image.write_bytes(b"hsqs")
    for on_host in (False, True):
        (problem,) = found(job, tmp_path, on_host=on_host)
        assert not problem.error
        assert problem.message.startswith(f"container.image {image}: {image.parent} is local")


# ---- container.mounts ----


def test_a_mount_source_must_exist_at_submit(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    job = spec(mounts=[str(tmp_path), f"{gone}:/data:ro"])
    assert found(job, tmp_path, on_host=False) == []
    (problem,) = found(job, tmp_path)
    assert problem.error and problem.key == "container.mounts"
    assert problem.message.startswith(f"container.mounts {gone}:/data:ro: source {gone} does not")
    gone.mkdir()
    assert found(job, tmp_path) == []


def test_a_node_local_mount_source_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    local = tmp_path / "local"
    job = spec(mounts=[str(tmp_path), f"{local}/nvme:/scratch"])
    monkeypatch.setattr(storage, "NODE_LOCAL_ROOTS", (str(local),))
    # missing on this machine: refused, as any mount source (--no-check lets it through)
    (missing,) = found(job, tmp_path)
    assert missing.error and "--no-check if only the compute nodes have it" in missing.message
    (local / "nvme").mkdir(parents=True)
    for on_host in (False, True):
        (problem,) = found(job, tmp_path, on_host=on_host)
        assert not problem.error and problem.key == "container.mounts"
        assert f"each node mounts its own copy of {local}/nvme" in problem.message


# ---- container.workdir and the submit dir ----


def test_a_workdir_under_no_mount_is_a_warning(tmp_path: Path) -> None:
    (problem,) = found(spec(workdir="/opt/nemo-rl", mounts=[str(tmp_path)]), tmp_path)
    assert not problem.error
    assert problem.message.startswith(
        "container.workdir /opt/nemo-rl is under no container.mounts destination: it must "
        "exist inside the image"
    )


@pytest.mark.parametrize(
    ("workdir", "extra"),
    [
        ("/data/rl", {}),  # under the mount's destination
        ("/cache/uv", {"caches": "/cache"}),  # caches are mounted
        ("/logs/17-logs", {"logs": {"base_dir": "/logs"}}),  # so is the job's log dir
        ("/logs/17-2-logs/x", {"logs": {"base_dir": "/logs"}}),  # a requeued run's too
    ],
)
def test_a_workdir_under_a_mount_is_fine(
    tmp_path: Path, workdir: str, extra: dict[str, Any]
) -> None:
    job = spec(workdir=workdir, mounts=[f"{tmp_path}:/data"], extra=extra)
    assert found(job, "/data") == []


def test_the_log_base_dir_itself_is_not_mounted(tmp_path: Path) -> None:
    job = spec(workdir="/logs", mounts=[str(tmp_path)], extra={"logs": {"base_dir": "/logs"}})
    assert keys(found(job, tmp_path)) == [("container.workdir", False)]


def test_an_unmounted_submit_dir_without_workdir_is_refused_at_submit(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    job = spec(mounts=[f"{tmp_path}/data:/data"])
    (problem,) = found(job, tmp_path)
    assert problem.error and problem.key == "container.workdir"
    assert problem.message == (
        f"container.workdir is not set, so every step starts in the submit dir {tmp_path}, "
        "which is under no container.mounts destination: in the container it is missing "
        f"(pyxis fails each task: \"couldn't chdir to {tmp_path}\") or holds only the job's "
        'log dir; mount it (--mount "$PWD") or set container.workdir to a dir inside the '
        "container"
    )
    # render runs where CI checks out, not where the job is submitted from
    assert found(job, tmp_path, on_host=False) == []


@pytest.mark.parametrize(
    "how",
    ["mount", "workdir", "mount_home", "caches", "enroot-site", "enroot-user", "pwd-symlink"],
)
def test_a_submit_dir_the_container_sees_is_fine(tmp_path: Path, how: str) -> None:
    submit = tmp_path / "home" / "me" / "rl"
    submit.mkdir(parents=True)
    home = str(tmp_path / "home" / "me")
    environ = {"HOME": home}
    container: dict[str, Any] = {"mounts": ["/lustre:/lustre"]}
    if how == "mount":
        container["mounts"] = [f"{tmp_path}/home"]
    elif how == "workdir":
        container["workdir"] = "/lustre"
    elif how == "mount_home":
        container["mount_home"] = True
    elif how == "caches":
        container["extra"] = {"caches": {"uv": home}}
    elif how.startswith("enroot"):
        site = tmp_path / ("sysconf" if how == "enroot-site" else "config")
        (site / "mounts.d").mkdir(parents=True)
        (site / "mounts.d" / "50-home.fstab").write_text(
            "# the site's shared storage\n"
            "${HOME} ${HOME} none x-create=dir,rbind,rw,nosuid 0 0\n"
            "tmpfs /tmp tmpfs x-create=dir,rw 0 -1\n"
        )
        environ["ENROOT_SYSCONF_PATH" if how == "enroot-site" else "ENROOT_CONFIG_PATH"] = str(site)
    else:
        (tmp_path / "link").symlink_to(submit)
        container["mounts"] = [f"{tmp_path}/link"]
        environ["PWD"] = str(tmp_path / "link")
    job = spec(**container)
    assert [f for f in found(job, submit, env=environ) if f.key == "container.workdir"] == []
    if how == "pwd-symlink":  # the symlink's name alone is not the submit dir
        assert keys(found(job, submit, HOME=home)) == [("container.workdir", True)]


def test_an_enroot_mount_of_what_only_a_node_knows_is_skipped(tmp_path: Path) -> None:
    sysconf = tmp_path / "sysconf"
    (sysconf / "mounts.d").mkdir(parents=True)
    (sysconf / "mounts.d" / "x.fstab").write_text(
        "${ENROOT_ROOTFS}/a /a none bind 0 0\n/b /b none bind,ro\n/c /c none ro\n"
    )
    assert container_checks.site_mounts(
        {"HOME": "/h", "ENROOT_SYSCONF_PATH": str(sysconf), "ENROOT_CONFIG_PATH": "/none"}
    ) == [("/b", "/b")]


def test_a_driver_workdir_under_no_mount_is_a_warning(tmp_path: Path) -> None:
    job = spec(mounts=[str(tmp_path)], driver={"command": ["python"], "workdir": "/opt/x"})
    (problem,) = found(job, tmp_path)
    assert not problem.error and problem.key == "driver.workdir"
    assert problem.message.startswith("driver.workdir /opt/x is under no container.mounts")


# ---- the driver's script ----


def test_a_host_script_under_no_mount_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "job"
    work.mkdir()
    script = tmp_path / "train.py"
    script.write_text("")
    job = spec(mounts=[str(work)], driver={"command": ["python", str(script), "--lr", "1"]})
    (problem,) = found(job, work)
    assert problem.error and problem.key == "driver command"
    assert problem.message.startswith(
        f"driver command: {script} exists on this machine but is under no container.mounts "
        "destination"
    )
    assert problem.message.endswith(f"mount its dir (--mount {tmp_path})")
    # render cannot tell: the script may be inside the image
    (maybe,) = found(job, work, on_host=False)
    assert not maybe.error and "must exist inside the image" in maybe.message


def test_a_config_file_on_the_host_under_no_mount_is_refused(tmp_path: Path) -> None:
    work, config = tmp_path / "job", tmp_path / "c.yaml"
    work.mkdir()
    config.write_text("")
    job = spec(
        mounts=[str(work)], driver={"command": ["python", "-c", "x", "--config", str(config)]}
    )
    assert keys(found(job, work)) == [("driver command", True)]
    config.unlink()  # it may be inside the image, or made by the job: not a script, not said
    assert found(job, work) == []


@pytest.mark.parametrize(
    "command",
    [
        ["/usr/bin/python3", "-c", "pass"],  # the image's own
        ["python", "/opt/nemo-rl/examples/run_grpo.py"],  # NeMo RL's image has it: a warning
        ["python", "-m", "x", "out=/tmp/x.py"],  # an override, not a path
        ["bash", "-c", "source env.sh"],  # code, not a path
        ["python", "-c", "pass", "--tmp", "/var/tmp"],  # a node-local dir: each has its own
    ],
)
def test_paths_inside_the_image_are_not_refused(tmp_path: Path, command: list[str]) -> None:
    job = spec(mounts=[str(tmp_path)], driver={"command": command})
    assert [f for f in found(job, tmp_path) if f.error] == []


def test_a_mounted_script_must_exist_at_submit(tmp_path: Path) -> None:
    host = tmp_path / "src"
    host.mkdir()
    job = spec(mounts=[f"{host}:/code"], driver={"command": ["bash", "/code/run.sh"]})
    (problem,) = found(job, "/code")
    assert problem.error and problem.message.startswith(
        f"driver command: /code/run.sh is not there ({host}/run.sh does not exist"
    )
    (host / "run.sh").write_text("")
    assert found(job, "/code") == []


def test_a_relative_script_is_looked_for_in_the_driver_s_working_dir(tmp_path: Path) -> None:
    checkout = tmp_path / "RL"
    (checkout / "examples").mkdir(parents=True)
    command = ["uv", "run", "examples/run_grpo.py", "--config", "c.yaml", "a.b=1"]
    job = spec(mounts=[f"{checkout}:/workspace"], workdir="/workspace", driver={"command": command})
    (problem,) = found(job, tmp_path)
    assert problem.error and problem.message.startswith(
        f"driver command: examples/run_grpo.py is not there (no {checkout}/examples/run_grpo.py "
        "in /workspace"
    )
    (checkout / "examples" / "run_grpo.py").write_text("")
    assert found(job, tmp_path) == []
    # driver.workdir wins over container.workdir, relative to it
    moved = spec(
        mounts=[f"{checkout}:/workspace"],
        workdir="/workspace",
        driver={"command": ["python", "run_grpo.py"], "workdir": "examples"},
    )
    assert found(moved, tmp_path) == []


def test_a_missing_script_the_setup_command_may_make_is_a_warning(tmp_path: Path) -> None:
    job = spec(
        mounts=[str(tmp_path)],
        driver={"command": ["python", "x.py"]},
        extra={"setup": "git clone https://example.com/x.git ."},
    )
    (problem,) = found(job, tmp_path)
    assert not problem.error and "unless the setup command makes it" in problem.message


def test_a_relative_script_in_a_workdir_inside_the_image_is_not_looked_for(
    tmp_path: Path,
) -> None:
    job = spec(mounts=[str(tmp_path)], workdir="/opt/nemo-rl", driver={"command": ["x.py"]})
    assert keys(found(job, tmp_path)) == [("container.workdir", False)]


# ---- container.mount_home ----


def test_mount_home_on_node_local_disk_is_a_warning(tmp_path: Path) -> None:
    job = spec(mounts=[str(tmp_path)], mount_home=True)
    (problem,) = found(job, tmp_path, HOME="/local/home/me")
    assert not problem.error and problem.message.startswith(
        "container.mount_home: $HOME (/local/home/me) is on /local, local to each node"
    )
    assert found(job, tmp_path, HOME="/local/home/me", on_host=False) == []


@pytest.mark.parametrize(("kind", "warned"), [("tmpfs", True), ("xfs", True), ("nfs4", False)])
def test_mount_home_on_a_local_filesystem_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str, warned: bool
) -> None:
    seen: list[str] = []

    def fs_type(path: str) -> str:
        seen.append(path)
        return kind

    monkeypatch.setattr(container_checks, "filesystem_type", fs_type)
    job = spec(mounts=[str(tmp_path)], mount_home=True)
    problems = found(job, tmp_path, HOME="/home/me")
    assert seen == ["/home/me"]
    assert [p.message for p in problems] == (
        [
            f"container.mount_home: $HOME (/home/me) is on a {kind} filesystem local to this "
            "machine, so each node mounts its own $HOME, not this one; keep what the job needs "
            "on shared storage, or turn mount_home off"
        ]
        if warned
        else []
    )


def test_no_container_no_findings(tmp_path: Path) -> None:
    job = LaunchSpec.model_validate({"driver": {"command": ["python", "/x.py"]}})
    assert found(job, tmp_path) == []


# ---- storage ----


def test_mountinfo_gives_the_filesystem_of_the_deepest_mount() -> None:
    text = (
        "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "30 22 0:40 / /home rw shared:5 - nfs4 srv:/home rw,vers=4.2\n"
        "31 30 0:41 / /home/a\\040b rw - tmpfs tmpfs rw\n"
        "32 22 0:42 / /home2 rw - lustre 10.0.0.1@o2ib:/fs rw\n"
        "garbage line\n"
    )
    mounts = storage.parse_mountinfo(text)
    assert mounts[2] == ("/home/a b", "tmpfs")
    assert storage.filesystem_type("/home/me", mounts) == "nfs4"
    assert storage.filesystem_type("/home/a b/x", mounts) == "tmpfs"
    assert storage.filesystem_type("/home2x", mounts) == "ext4"
    assert storage.filesystem_type("/home2/x", mounts) == "lustre"
    assert storage.filesystem_type("/x", []) is None


def test_this_machine_s_mountinfo_is_read() -> None:
    assert storage.filesystem_type("/") is not None


# ---- the commands ----


def test_submit_refuses_with_one_line_and_queues_nothing(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    result = cli("submit", "--container", "images/rl.sqsh", "--mount", str(tmp_path), *CMD)
    assert result.code == 2, result.err
    (line,) = result.err.splitlines()
    assert line.startswith("nrl-launch: error: container.image 'images/rl.sqsh': ")
    assert slurm.calls() == []
    assert not (tmp_path / "state" / "scripts").exists()


def test_submit_refuses_an_unmounted_submit_dir(
    cli: Cli, slurm: FakeSlurm, isolated: Path, tmp_path: Path
) -> None:
    result = cli("submit", "--container", REGISTRY, "--mount", f"{tmp_path}/home:/h", *CMD)
    assert result.code == 2
    assert result.err.startswith(
        f"nrl-launch: error: container.workdir is not set, so every step starts in the submit "
        f"dir {isolated},"
    )
    assert slurm.calls() == []


def test_submit_with_no_check_warns_and_queues(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="42\n")
    result = cli("submit", "--container", REGISTRY, "--no-check", *CMD)
    assert result.code == 0, result.err
    assert "nrl-launch: warning: container.workdir is not set" in result.err
    assert [c.split()[0] for c in slurm.calls()] == ["sbatch"]


def test_submit_of_a_job_that_fits_says_nothing(cli: Cli, slurm: FakeSlurm, isolated: Path) -> None:
    slurm.answer("sbatch", stdout="42\n")
    result = cli("submit", "--container", REGISTRY, "--mount", str(isolated), *CMD)
    assert result.code == 0, result.err
    assert "container" not in result.err


def test_render_refuses_a_relative_sqsh_and_warns_for_the_workdir(cli: Cli) -> None:
    refused = cli("render", "--container", "rl.sqsh", *CMD)
    assert refused.code == 2 and "container.image 'rl.sqsh'" in refused.err
    warned = cli("render", "--container", REGISTRY, "--set", "container.workdir=/opt/x", *CMD)
    assert warned.code == 0
    assert "nrl-launch: warning: container.workdir /opt/x is under no" in warned.err
    # no submit dir check at render: CI renders from its checkout
    assert cli("render", "--container", REGISTRY, *CMD).err == ""


def test_run_checks_as_submit_does_and_its_dry_run_as_render(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    args = ["--container", REGISTRY, "--mount", str(gone), "--", "hostname"]
    result = cli("run", *args)
    assert result.code == 2 and "container.mounts" in result.err
    assert "source" in result.err and str(gone) in result.err
    assert slurm.calls() == []
    assert cli("run", "--dry-run", *args).code == 0
    slurm.answer("sbatch", stdout="43\n")
    allowed = cli("run", "--no-check", *args)
    assert allowed.code == 0, allowed.err
    assert "nrl-launch: warning: container.mounts" in allowed.err


# ---- a job without a container: this machine's files, which its nodes share ----

SETUP = ["--set", "setup=source .venv/bin/activate"]
NEMO = Path(__file__).parent / "data" / "nemo_rl" / "examples" / "configs"


def _no_setup_file(isolated: Path) -> str:
    return (
        "nrl-launch: error: setup: sources .venv/bin/activate, which is not there (no "
        f"{isolated}/.venv/bin/activate; the job runs in this machine's files, as its nodes share "
        "them): make it first, or fix setup"
    )


@pytest.mark.parametrize("backend", [["--container-runtime", "none"], ["--backend", "local"]])
def test_a_setup_that_sources_a_missing_file_is_refused_at_submit(
    cli: Cli, slurm: FakeSlurm, isolated: Path, backend: list[str]
) -> None:
    result = cli("submit", *backend, *SETUP, *CMD)
    assert result.code == 2
    assert result.err.splitlines() == [_no_setup_file(isolated)]
    assert slurm.calls() == []


def test_a_setup_whose_file_is_there_is_submitted(
    cli: Cli, slurm: FakeSlurm, isolated: Path
) -> None:
    (isolated / ".venv" / "bin").mkdir(parents=True)
    (isolated / ".venv" / "bin" / "activate").write_text("")
    slurm.answer("sbatch", stdout="42\n")
    result = cli("submit", "--container-runtime", "none", *SETUP, *CMD)
    assert result.code == 0, result.err
    assert result.out.startswith("Submitted job 42 (1 node(s))")
    assert "setup:" not in result.err
    assert len(slurm.calls("sbatch")) == 1


def test_a_local_job_whose_setup_file_is_there_is_not_refused(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(A local job is checked as submit checks it; submitted, it would start Ray here.)"""
    (isolated / ".venv" / "bin").mkdir(parents=True)
    (isolated / ".venv" / "bin" / "activate").write_text("")
    job = LaunchSpec.model_validate(
        {"backend": "local", "setup": "source .venv/bin/activate", "driver": {"command": ["x"]}}
    )
    container_checks.check(job, backend=backends.get(job.backend), on_host=True)
    assert capsys.readouterr().err == ""


def test_a_setup_that_sources_after_a_cd_is_not_checked(cli: Cli, slurm: FakeSlurm) -> None:
    slurm.answer("sbatch", stdout="42\n")
    setup = "setup=cd /opt/elsewhere && source .venv/bin/activate"
    result = cli("submit", "--container-runtime", "none", "--set", setup, *CMD)
    assert result.code == 0, result.err
    assert "setup:" not in result.err
    assert len(slurm.calls("sbatch")) == 1


def test_render_does_not_look_for_the_setup_s_file(cli: Cli) -> None:
    assert cli("render", "--container-runtime", "none", *SETUP, *CMD).code == 0


def test_with_no_check_a_missing_setup_file_is_a_warning(
    cli: Cli, slurm: FakeSlurm, isolated: Path
) -> None:
    slurm.answer("sbatch", stdout="42\n")
    result = cli("submit", "--container-runtime", "none", "--no-check", *SETUP, *CMD)
    assert result.code == 0, result.err
    warning = _no_setup_file(isolated).replace("nrl-launch: error:", "nrl-launch: warning:")
    assert warning in result.err.splitlines()


def test_a_nemo_rl_driver_s_missing_script_is_found_in_the_submit_dir(tmp_path: Path) -> None:
    """What the check says of a job whose command runs a NeMo RL driver script (a recipe's,
    once its command is built, or the same path given by hand)."""
    command = ["uv", "run", "examples/run_grpo.py", "--config", "c.yaml"]
    job = LaunchSpec.model_validate({"driver": {"command": command}})
    (problem,) = found(job, tmp_path)
    assert problem.error and problem.key == "driver command"
    assert problem.message == (
        "driver command: examples/run_grpo.py (a NeMo RL driver) is not there (no "
        f"{tmp_path}/examples/run_grpo.py): submit from the NeMo RL checkout that holds it, or "
        "set driver.workdir"
    )
    # A setup may make it (a git clone): a warning then.
    made = LaunchSpec.model_validate({"driver": {"command": command}, "setup": "git clone x ."})
    assert keys(found(made, tmp_path)) == [("driver command", False)]
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "run_grpo.py").write_text("")
    assert found(job, tmp_path) == []


def test_submit_refuses_a_recipe_whose_script_is_not_in_the_submit_dir(
    cli: Cli, slurm: FakeSlurm, isolated: Path
) -> None:
    slurm.answer("sbatch", stdout="42\n")
    result = cli("submit", "grpo", "--config", str(NEMO / "grpo_math_1B.yaml"))
    assert result.code == 2, result.err
    (line,) = [x for x in result.err.splitlines() if x.startswith("nrl-launch: error:")]
    assert line == (
        "nrl-launch: error: driver command: examples/run_grpo.py (a NeMo RL driver) is not "
        f"there (no {isolated}/examples/run_grpo.py): submit from the NeMo RL checkout that holds "
        "it, or set driver.workdir"
    )
    assert slurm.calls("sbatch") == []
