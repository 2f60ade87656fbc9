"""Which Ray an image holds, known before the job queues: an image whose Ray has no token
authentication (before 2.52) is refused while ray.auth is token, not once the job has waited in
the queue and its head starts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nrl_launch import storage
from nrl_launch.image_ray import image_ray, ray_in_listing
from tests.conftest import EXAMPLES, REPO, Cli
from tests.fakes import FakeSlurm

V040 = "nvcr.io/nvidia/nemo-rl:v0.4.0"
CMD = ["--", "python", "-c", "pass"]
# Found before a test puts its fake Slurm alone on PATH.
MKSQUASHFS = shutil.which("mksquashfs")
UNSQUASHFS = shutil.which("unsquashfs")
REFUSED_V040 = (
    f"nrl-launch: error: container.image {V040}: its Ray is 2.46.0 (NeMo RL v0.4 pins it), which "
    "has no token authentication (Ray 2.52 or later has; ray.auth is token): use an image with a "
    "newer Ray (NeMo RL v0.6.0 or later), or set ray.auth: off (--set ray.auth=off; then anyone "
    "who can reach the job's Ray ports can run code as you)"
)
AUTH_OFF = (
    "nrl-launch: warning: ray.auth is off: anyone who can reach the job's Ray ports can run code "
    "as you (turn it off only for Ray older than 2.52)"
)


@pytest.fixture(autouse=True)
def shared_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The test's tmp dir stands for shared storage (/tmp is node-local on a cluster), and this
    machine's enroot config is not read."""
    monkeypatch.setattr(storage, "NODE_LOCAL_ROOTS", ("/var/tmp", "/dev/shm", "/local"))
    monkeypatch.setenv("ENROOT_SYSCONF_PATH", str(tmp_path / "no-enroot"))
    monkeypatch.delenv("ENROOT_CONFIG_PATH", raising=False)


# ---- a registry image: the Ray its NeMo RL release pins ----


@pytest.mark.parametrize(
    ("image", "version", "has_auth"),
    [
        (V040, "2.46.0", False),
        ("nvcr.io/nvidia/nemo-rl:v0.5.0", "2.49.2", False),
        ("nvcr.io/nvidia/nemo-rl:v0.6.0", "2.54.0", True),
        ("nvcr.io/nvidia/nemo-rl:v0.7.0", "2.55.1", True),
        ("nvcr.io/nvidia/nemo-rl:v0.4.0.nemotron_3_nano", "2.46.0", False),  # a variant tag
        ("docker://nvcr.io#nvidia/nemo-rl:v0.4.0", "2.46.0", False),  # enroot's form
        ("docker://nvcr.io#nvidia/nemo-rl:v0.6.0", "2.54.0", True),
    ],
)
def test_a_nemo_rl_release_tag_gives_the_ray_it_pins(
    image: str, version: str, has_auth: bool
) -> None:
    found = image_ray(image)
    assert (found.version, found.has_auth) == (version, has_auth)
    release = image.rsplit(":v", 1)[1].split(".")[:2]
    assert found.how == f"NeMo RL v{release[0]}.{release[1]} pins it"


def test_a_release_after_the_newest_known_has_token_authentication() -> None:
    found = image_ray("nvcr.io/nvidia/nemo-rl:v0.9.1")
    assert found.has_auth is True
    assert found.how == "NeMo RL pins it from v0.7 on, or later"


@pytest.mark.parametrize("tag", ["v0.3.1", "v0.2.1"])
def test_a_release_before_v0_4_has_no_token_authentication(tag: str) -> None:
    assert image_ray(f"nvcr.io/nvidia/nemo-rl:{tag}").has_auth is False


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/nemo-rl:latest",
        "nvcr.io/nvidia/nemo-rl",
        "nvcr.io/nvidia/pytorch:25.01-py3",
        "nvcr.io/acme/custom:1",
        "ubuntu",
    ],
)
def test_an_image_that_is_no_nemo_rl_release_is_not_known(image: str) -> None:
    found = image_ray(image)
    assert (found.version, found.has_auth) == (None, None)
    assert found.how == "not a NeMo RL release image, nor a .sqsh file readable here"


# ---- a .sqsh file named after a NeMo RL release: the Ray that release pins ----


@pytest.mark.parametrize(
    ("image", "version", "how"),
    [
        (
            "/lustre/images/nemo-rl.v0.4.0.sqsh",
            "2.46.0",
            "its name says NeMo RL v0.4, which pins it",
        ),
        ("./nvidia+nemo-rl+v0.5.0.sqsh", "2.49.2", "its name says NeMo RL v0.5, which pins it"),
        (
            "/l/nemo-rl.v0.4.0.nemotron_3_nano.sqsh",
            "2.46.0",
            "its name says NeMo RL v0.4, which pins it",
        ),
        ("/l/nemo-rl+v0.6.0.sqsh", "2.54.0", "its name says NeMo RL v0.6, which pins it"),
        (
            "/l/nemo_rl-v0.3.1.squashfs",
            "2.46.0",
            "its name says NeMo RL v0.3; NeMo RL before v0.4 pins it, or older",
        ),
    ],
)
def test_a_sqsh_named_after_a_nemo_rl_release_gives_the_ray_it_pins(
    image: str, version: str, how: str
) -> None:
    found = image_ray(image)
    assert (found.version, found.how) == (version, how)


@pytest.mark.parametrize("image", ["/l/rl.sqsh", "/l/my-nemo-rl.sqsh", "/l/nemo-rl.v0.4.0/x.sqsh"])
def test_a_sqsh_whose_name_names_no_release_is_not_known(image: str) -> None:
    assert image_ray(image).version is None


# ---- a .sqsh file: its file listing names the installed package ----

SITE = "squashfs-root/opt/venv/lib/python3.10/site-packages"


def listing(*entries: str) -> str:
    """`unsquashfs -l`'s output for an image holding `entries` (paths under squashfs-root)."""
    dirs = ["squashfs-root", "squashfs-root/opt", "squashfs-root/opt/venv", SITE]
    return "\n".join([*dirs, *entries]) + "\n"


def test_the_listing_names_the_ray_package_installed() -> None:
    text = listing(
        f"{SITE}/ray",
        f"{SITE}/ray/__init__.py",
        f"{SITE}/ray-2.46.0.dist-info",
        f"{SITE}/ray-2.46.0.dist-info/METADATA",
        f"{SITE}/ray-2.46.0.dist-info/RECORD",
        f"{SITE}/raydp-1.6.0.dist-info",  # another package whose name starts with ray
        f"{SITE}/ray_cpp-2.60.0.dist-info",
        f"{SITE}/xray-9.9.9.dist-info",
        "squashfs-root/opt/docs/ray-2.60.0.dist-info",  # not under site-packages
    )
    assert ray_in_listing(text) == "2.46.0"
    found = image_ray("/lustre/rl.sqsh", text)
    assert (found.version, found.has_auth, found.how) == ("2.46.0", False, "its file listing")


def test_of_several_rays_in_one_image_the_newest_counts() -> None:
    text = listing(
        "squashfs-root/usr/lib/python3.10/site-packages/ray-2.9.3.dist-info",
        f"{SITE}/ray-2.54.0.dist-info",
        "squashfs-root/opt/old/lib/python3.10/site-packages/ray-2.46.0.dist-info",
    )
    assert ray_in_listing(text) == "2.54.0"  # by number: 2.54 after 2.9
    assert image_ray("/x.sqsh", text).has_auth is True


def test_a_listing_without_ray_knows_none() -> None:
    text = listing(f"{SITE}/torch", f"{SITE}/torch-2.7.0.dist-info")
    assert ray_in_listing(text) is None
    assert ray_in_listing("") is None
    found = image_ray("/x.sqsh", text)
    assert (found.version, found.has_auth) == (None, None)
    assert found.how == "its file listing shows no Ray"


def test_a_ray_in_dist_packages_is_found() -> None:
    text = "squashfs-root/usr/local/lib/python3.12/dist-packages/ray-2.46.0.dist-info\n"
    assert ray_in_listing(text) == "2.46.0"


# ---- the commands ----


def test_render_refuses_a_v0_4_image_in_one_line(cli: Cli) -> None:
    result = cli("render", "--container", V040, "--", "python", "x.py")
    assert result.code == 2
    assert result.err.splitlines() == [REFUSED_V040]
    assert result.out == ""


def test_with_ray_auth_off_a_v0_4_image_renders_with_its_warning(cli: Cli) -> None:
    result = cli("render", "--container", V040, "--set", "ray.auth=off", "--", "python", "x.py")
    assert result.code == 0, result.err
    assert result.err.splitlines() == [AUTH_OFF]
    assert result.out.startswith("#!/usr/bin/env bash\n")


def test_a_job_without_ray_may_use_any_image(cli: Cli) -> None:
    result = cli("run", "--dry-run", "--container", V040, "--", "hostname")
    assert result.code == 0, result.err
    assert "token authentication" not in result.err


def _sqsh(tmp_path: Path, ray: str) -> Path:
    """A real squashfs image whose venv holds `ray` (as ray-X.Y.Z.dist-info), made by
    mksquashfs as enroot makes one."""
    mksquashfs = MKSQUASHFS
    if mksquashfs is None:
        pytest.skip("mksquashfs is not installed (apt-get install squashfs-tools)")
    root = tmp_path / "rootfs"
    info = root / "opt/venv/lib/python3.10/site-packages" / f"ray-{ray}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ray\nVersion: {ray}\n")
    image = tmp_path / f"ray-{ray}.sqsh"
    subprocess.run(
        [mksquashfs, str(root), str(image), "-quiet", "-no-progress", "-noappend"],
        check=True,
        capture_output=True,
    )
    return image


@pytest.fixture
def fake(slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """The fake Slurm alone on PATH, with the real unsquashfs beside it (sbatch answers 42)."""
    if UNSQUASHFS is None:
        pytest.skip("unsquashfs is not installed (apt-get install squashfs-tools)")
    _alone(slurm, monkeypatch)
    (slurm.bin_dir / "unsquashfs").symlink_to(UNSQUASHFS)
    return slurm


def _alone(slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake Slurm alone on PATH, sbatch answering 42; the default secrets set (their warning
    is not what these tests look at)."""
    monkeypatch.setenv("PATH", str(slurm.bin_dir))
    slurm.answer("sbatch", stdout="42\n")
    monkeypatch.setenv("HF_TOKEN", "hf-test")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-test")


def _submit(cli: Cli, tmp_path: Path, image: str) -> tuple[int, list[str]]:
    result = cli("submit", "-q", "--container", image, "--mount", str(tmp_path), *CMD)
    return result.code, result.err.splitlines()


def test_submit_refuses_a_sqsh_whose_ray_has_no_token_authentication(
    cli: Cli, fake: FakeSlurm, tmp_path: Path
) -> None:
    image = _sqsh(tmp_path, "2.46.0")
    code, err = _submit(cli, tmp_path, str(image))
    assert code == 2
    assert err == [
        f"nrl-launch: error: container.image {image}: its Ray is 2.46.0 (its file listing), "
        "which has no token authentication (Ray 2.52 or later has; ray.auth is token): use an "
        "image with a newer Ray (NeMo RL v0.6.0 or later), or set ray.auth: off (--set "
        "ray.auth=off; then anyone who can reach the job's Ray ports can run code as you)"
    ]
    assert fake.calls("sbatch") == []


def test_submit_queues_a_sqsh_whose_ray_has_token_authentication(
    cli: Cli, fake: FakeSlurm, tmp_path: Path
) -> None:
    image = _sqsh(tmp_path, "2.60.0")
    code, err = _submit(cli, tmp_path, str(image))
    assert code == 0, err
    assert [line for line in err if "container.image" in line] == []
    (call,) = fake.calls("sbatch")
    assert call.startswith("sbatch --parsable ")


NAMED_V040 = "/lustre/fs1/users/alice/images/nemo-rl.v0.4.0.sqsh"
REFUSED_NAMED = (
    f"nrl-launch: error: container.image {NAMED_V040}: its Ray is 2.46.0 (its name says NeMo RL "
    "v0.4, which pins it), which has no token authentication (Ray 2.52 or later has; ray.auth is "
    "token): use an image with a newer Ray (NeMo RL v0.6.0 or later), or set ray.auth: off (--set "
    "ray.auth=off; then anyone who can reach the job's Ray ports can run code as you)"
)


def test_render_refuses_a_sqsh_named_after_v0_4_in_one_line(cli: Cli) -> None:
    """The file is on the cluster, not here (render runs in CI): its name says its Ray."""
    args = ["render", "--container", NAMED_V040, "--mount", "/lustre:/lustre"]
    result = cli(*args, "--log-dir", "/lustre/logs", *CMD)
    assert result.code == 2
    assert result.err.splitlines() == [REFUSED_NAMED]
    assert result.out == ""
    result = cli(*args, "--log-dir", "/lustre/logs", "--set", "ray.auth=off", *CMD)
    assert result.code == 0, result.err
    assert result.err.splitlines() == [AUTH_OFF]


def test_plan_says_submit_would_refuse_a_sqsh_named_after_v0_4(cli: Cli) -> None:
    config = REPO / "tests" / "data" / "nemo_rl" / "examples" / "configs" / "grpo_math_1B.yaml"
    args = ["--container", NAMED_V040, "--mount", "/lustre:/lustre", "--log-dir", "/lustre/logs"]
    result = cli("plan", "--config", str(config), *args)
    lines = result.out.splitlines()
    refused = lines[lines.index("Submit would refuse it here:") + 1 :]
    assert f"  {REFUSED_NAMED.removeprefix('nrl-launch: error: ')}" in refused


def test_submit_refuses_a_sqsh_named_after_v0_4_without_unsquashfs(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No unsquashfs to list it: the name speaks, and nothing is queued."""
    _alone(slurm, monkeypatch)
    image = tmp_path / "nemo-rl.v0.4.0.sqsh"
    image.write_bytes(b"hsqs")
    code, err = _submit(cli, tmp_path, str(image))
    assert code == 2
    assert err == [REFUSED_NAMED.replace(NAMED_V040, str(image))]
    assert slurm.calls("sbatch") == []


def test_the_listing_wins_over_the_name(cli: Cli, fake: FakeSlurm, tmp_path: Path) -> None:
    """A file named v0.4.0 that holds a newer Ray (rebuilt, say) is queued: what it holds counts."""
    image = _sqsh(tmp_path, "2.60.0").rename(tmp_path / "nemo-rl.v0.4.0.sqsh")
    code, err = _submit(cli, tmp_path, str(image))
    assert code == 0, err
    assert len(fake.calls("sbatch")) == 1


def test_the_example_job_names_an_image_whose_ray_has_token_authentication(cli: Cli) -> None:
    result = cli("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    assert result.code == 0, result.err
    assert "token authentication" not in result.err


def test_render_does_not_read_the_sqsh(cli: Cli, tmp_path: Path) -> None:
    """render runs where CI checks out, not where the job is submitted: the file is not read."""
    image = _sqsh(tmp_path, "2.46.0")
    result = cli("render", "--container", str(image), "--mount", str(tmp_path), *CMD)
    assert result.code == 0, result.err
    assert "Ray" not in result.err


def test_a_sqsh_that_cannot_be_listed_here_is_a_warning(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _alone(slurm, monkeypatch)  # alone on PATH: no unsquashfs
    image = tmp_path / "rl.sqsh"
    image.write_bytes(b"hsqs")
    code, err = _submit(cli, tmp_path, str(image))
    assert code == 0, err
    assert err == [
        f"nrl-launch: warning: container.image {image}: which Ray it holds cannot be known here "
        "(no unsquashfs here (Debian's squashfs-tools) to list it); the job checks it on the "
        "head when it starts (token authentication needs Ray 2.52)"
    ]
    assert len(slurm.calls("sbatch")) == 1


def test_a_registry_image_whose_ray_cannot_be_known_is_submitted_with_a_warning(
    cli: Cli, fake: FakeSlurm, tmp_path: Path
) -> None:
    code, err = _submit(cli, tmp_path, "nvcr.io/acme/custom:1")
    assert code == 0, err
    assert err == [
        "nrl-launch: warning: container.image nvcr.io/acme/custom:1: which Ray it holds cannot "
        "be known here (not a NeMo RL release image, nor a .sqsh file readable here); the job "
        "checks it on the head when it starts (token authentication needs Ray 2.52)"
    ]
    assert len(fake.calls("sbatch")) == 1


def test_submit_refuses_a_v0_4_registry_image_and_queues_nothing(
    cli: Cli, fake: FakeSlurm, tmp_path: Path
) -> None:
    code, err = _submit(cli, tmp_path, V040)
    assert code == 2
    assert err == [REFUSED_V040]
    assert fake.calls() == []
