"""container.reuse on a node (node/reuse.sh), in a real bash from a rendered script: the key of
an image changes with any change to it, and a node takes, keeps and drops the containers it
kept as the job's image says (enroot faked: a data dir in tmp), and never one another user
could have planted (a real second user, through setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nrl_launch.backends import slurm
from tests.conftest import OTHER_UID, SYSTEM_TOOLS, as_other, setfacl
from tests.helpers import bash_values, spec

IMAGE_MIB = 3


def _script(image: str) -> str:
    return slurm.plan(spec(container={"image": image, "reuse": True})).script


def _key(image: Path | str, racy_s: int = 0) -> str:
    """image_key's output for `image` ('' when it names no key); an image changed less than
    `racy_s` seconds ago is racy (the tests' images are all new: 0, unless said)."""
    probe = f'NRL_REUSE_RACY_S={racy_s}; printf "%s\\0" "$(image_key {image!s} || true)"'
    return bash_values(_script(str(image)), probe)[0]


def _image(path: Path, fill: bytes = b"a") -> Path:
    path.write_bytes(fill * (IMAGE_MIB << 20))
    old = 1_700_000_000
    os.utime(path, (old, old))
    return path


def test_an_unchanged_image_keeps_its_key(tmp_path: Path) -> None:
    image = _image(tmp_path / "img.sqsh")
    first = _key(image)
    assert len(first) == 32 and first == _key(image)


def _rewrite_in_place(image: Path) -> None:
    """One byte in the middle changed, same size, same inode, its mtime put back."""
    st = image.stat()
    with image.open("r+b") as f:
        f.seek(st.st_size // 2)
        f.write(b"b")
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))


def _replaced(image: Path) -> None:
    """A new file moved over it (what `cp new tmp && mv tmp img.sqsh` does): a new inode."""
    new = image.with_suffix(".new")
    shutil.copyfile(image, new)
    st = image.stat()
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    new.replace(image)


def _grown(image: Path) -> None:
    st = image.stat()
    with image.open("ab") as f:
        f.write(b"x")
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))


def _touched(image: Path) -> None:
    os.utime(image, (1_700_000_100, 1_700_000_100))


@pytest.mark.parametrize(
    "change", [_rewrite_in_place, _replaced, _grown, _touched], ids=lambda f: f.__name__
)
def test_any_change_to_the_image_changes_its_key(tmp_path: Path, change: object) -> None:
    image = _image(tmp_path / "img.sqsh")
    before = _key(image)
    change(image)  # type: ignore[operator]
    after = _key(image)
    assert after and after.split()[0] != before.split()[0]


def test_an_image_written_seconds_ago_is_racy(tmp_path: Path) -> None:
    image = tmp_path / "img.sqsh"
    image.write_bytes(b"a" * 4096)
    assert _key(image, racy_s=60).endswith(" racy")
    assert not _key(image, racy_s=0).endswith(" racy")


def test_a_registry_tag_has_no_key_and_a_digest_has_one(tmp_path: Path) -> None:
    assert _key("nvcr.io/nvidia/nemo-rl:v0.4.0") == ""
    pinned = "nvcr.io/nvidia/nemo-rl@sha256:" + "0" * 64
    assert len(_key(pinned)) == 32
    assert _key(tmp_path / "missing.sqsh") == ""


# ---- Taking, keeping and dropping containers on a node ----


class Node:
    """A node's enroot (faked: its data dir under tmp) and the job's log dir."""

    def __init__(self, tmp_path: Path, image: Path) -> None:
        self.data = tmp_path / "data"
        self.data.mkdir(mode=0o700)
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.image = image
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "enroot").write_text(
            "#!/bin/bash\n# ---- BEGIN CONFIG ----\n"
            f"ENROOT_DATA_PATH={self.data}\n# ----- END CONFIG -----\n"
            "case $1 in remove) shift; while [[ $1 == -* ]]; do shift; done\n"
            f'  for n in "$@"; do rm -rf "{self.data}/$n"; done ;; esac\n'
        )
        plugstack = tmp_path / "plugstack.conf"
        plugstack.write_text("required /usr/lib/spank_pyxis.so\n")
        (self.bin / "scontrol").write_text(
            f"#!/bin/bash\necho 'PlugStackConfig         = {plugstack}'\n"
        )
        for tool in ("enroot", "scontrol"):
            (self.bin / tool).chmod(0o755)

    def run(self, steps: str, racy_s: int = 0) -> list[str]:
        """Runs `steps` on node `node0` of job 42; returns the data dir's entries and the log."""
        probe = (
            f"PATH={self.bin}:$PATH NRL_LOG_DIR={self.logs} SLURMD_NODENAME=node0 "
            f"SLURM_JOB_ID=42 NRL_CONTAINER_NAME=nrl-42 NRL_REUSE_RACY_S={racy_s}\n"
            "export PATH NRL_LOG_DIR SLURMD_NODENAME SLURM_JOB_ID NRL_CONTAINER_NAME\n"
            f"{{ {steps}; }} >{self.logs}/out 2>&1\n"
            f'ls -1 {self.data} | tr "\\n" "\\0"'
        )
        return bash_values(_script(str(self.image)), probe)

    def kept(self, name: str) -> Path:
        """A container directory `name` in the data dir, as enroot create leaves one."""
        (self.data / name / "etc").mkdir(parents=True)
        (self.data / name / "etc" / "image").write_text(name)
        return self.data / name

    @property
    def log(self) -> str:
        return (self.logs / "out").read_text()


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path, _image(tmp_path / "img.sqsh"))


def test_a_node_takes_the_container_kept_for_the_image(node: Node) -> None:
    key = _key(node.image)
    node.kept(f"nrl-cache-{key}")
    assert node.run("claim_container_node") == ["pyxis_nrl-42"]
    assert (node.data / "pyxis_nrl-42" / "etc" / "image").read_text() == f"nrl-cache-{key}"
    assert "reusing the container kept in" in node.log


def test_a_data_dir_others_can_write_is_never_reused(node: Node) -> None:
    """Another user could plant a nrl-cache-<KEY> there, for the job to run as its own."""
    key = _key(node.image)
    node.kept(f"nrl-cache-{key}")
    node.data.chmod(0o777)
    assert node.run("claim_container_node") == [f"nrl-cache-{key}"]
    assert "enroot's data dir is not this user's alone: no reuse" in node.log


def _plant(node: Node, name: str) -> None:
    """Another user makes a container dir `name` in the node's data dir, as enroot would."""
    for argv in (
        ["mkdir", "-p", str(node.data / name / "etc")],
        ["touch", str(node.data / name / "etc" / "planted")],
    ):
        made = as_other(*argv)
        assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("opened", ["sticky, writable by every user", "an ACL for another user"])
def test_a_data_dir_others_can_make_entries_in_is_never_reused(
    reachable: Path, opened: str
) -> None:
    """A sticky bit keeps entries their owner's, but another user can still plant a container of
    theirs there, named as the job's image's, for the job to run as its own."""
    node = Node(reachable, _image(reachable / "img.sqsh"))
    if opened.startswith("sticky"):
        node.data.chmod(0o1777)
    else:
        setfacl(node.data, f"u:{OTHER_UID}:rwx")
    key = _key(node.image)
    _plant(node, f"nrl-cache-{key}")
    assert node.run("claim_container_node") == [f"nrl-cache-{key}"]
    assert "enroot's data dir is not this user's alone: no reuse" in node.log


@pytest.mark.parametrize("planted", ["another user's dir", "a link"])
def test_a_kept_container_that_is_not_the_user_s_own_dir_is_never_taken(
    reachable: Path, planted: str
) -> None:
    """Planted while the data dir was open (it is the user's alone again now): a dir another
    user made, or a link to one, is not the user's container."""
    node = Node(reachable, _image(reachable / "img.sqsh"))
    key = _key(node.image)
    node.data.chmod(0o1777)
    if planted == "a link":
        theirs = reachable / "theirs"
        theirs.mkdir()
        os.chown(theirs, OTHER_UID, OTHER_UID)
        assert as_other("mkdir", str(theirs / "etc")).returncode == 0
        assert (
            as_other("ln", "-s", str(theirs), str(node.data / f"nrl-cache-{key}")).returncode == 0
        )
    else:
        _plant(node, f"nrl-cache-{key}")
    node.data.chmod(0o700)
    assert node.run("claim_container_node") == [f"nrl-cache-{key}"]
    refused = f"nrl-cache-{key} is not a directory of this user's (a link, or another user's)"
    assert f"{refused}: not reused" in node.log


def test_a_node_never_takes_one_kept_for_another_image(node: Node) -> None:
    node.kept("nrl-cache-" + "f" * 32)
    assert node.run("claim_container_node") == ["nrl-cache-" + "f" * 32]
    assert "pyxis unpacks it" in node.log


def test_one_an_earlier_job_of_the_same_id_left_is_removed_first(node: Node) -> None:
    node.kept("pyxis_nrl-42")
    assert node.run("claim_container_node") == []


def _ran(node: Node) -> None:
    """The job's container made by pyxis, and its step run in it."""
    node.kept("pyxis_nrl-42")
    (node.logs / "container-up.node0").touch()


def test_the_job_s_container_is_kept_and_any_other_dropped(node: Node) -> None:
    key = _key(node.image)
    node.kept("nrl-cache-" + "f" * 32)
    node.kept("nrl-evicted-123-" + "e" * 32)  # a removal that did not finish
    node.run("claim_container_node")
    _ran(node)
    assert node.run("keep_container") == [f"nrl-cache-{key}"]
    assert "kept the job's container" in node.log


def test_a_container_whose_step_never_ran_is_not_kept(node: Node) -> None:
    node.kept("pyxis_nrl-42")
    assert node.run("claim_container_node; keep_container") == []  # claim removed the leftover
    node.kept("pyxis_nrl-42")
    assert node.run("keep_container") == ["pyxis_nrl-42"]  # left to remove_containers_node
    assert "never ran in its container" in node.log


def test_an_image_changed_while_the_job_ran_is_not_kept(node: Node) -> None:
    node.run("claim_container_node")
    _ran(node)
    _rewrite_in_place(node.image)
    assert node.run("keep_container") == ["pyxis_nrl-42"]
    assert "changed while the job ran" in node.log


def test_an_image_written_just_before_the_job_is_not_kept(node: Node) -> None:
    node.image.write_bytes(b"new")
    node.run("claim_container_node", racy_s=60)
    _ran(node)
    assert node.run("keep_container") == ["pyxis_nrl-42"]
    assert "changed seconds before" in node.log


def test_under_container_scope_job_the_name_carries_the_job_id(node: Node) -> None:
    key = _key(node.image)
    node.kept(f"nrl-cache-{key}")
    (node.bin.parent / "plugstack.conf").write_text(
        "required /usr/lib/spank_pyxis.so container_scope=job\n"
    )
    assert node.run("claim_container_node") == ["pyxis_42_nrl-42"]


ARGS = (
    'NRL_SUBMIT_DIR=/s; set_container_args nrl-42 {}; printf "%s\\0" "${{NRL_CONTAINER_ARGS[@]}}"'
)


def test_the_job_s_container_is_read_only_only_with_reuse() -> None:
    probe = ARGS.format("")
    on = bash_values(_script("/x/img.sqsh"), probe)
    assert "--container-readonly" in on
    off = bash_values(slurm.plan(spec(container={"image": "/x/img.sqsh"})).script, probe)
    assert "--container-readonly" not in off
    attach = bash_values(_script("/x/img.sqsh"), ARGS.format("attach"))
    assert "--container-readonly" in attach  # an attached shell's writes would be kept too
    off = bash_values(
        slurm.plan(spec(container={"image": "/x/img.sqsh"})).script, ARGS.format("attach")
    )
    assert "--container-readonly" not in off


def test_attach_enters_a_reused_container_read_only(tmp_path: Path) -> None:
    """The srun line `nrl-launch attach` runs (its attach script runs the job's copy of the
    script in attach mode): with container.reuse the step is read-only, so nothing an attached
    shell writes into the container is kept for the user's next job."""
    log_dir = tmp_path / "42-logs"
    log_dir.mkdir()
    job = spec(slurm={"nodes": 2}, container={"image": "/x/img.sqsh", "reuse": True})
    (log_dir / "job.sbatch").write_text(slurm.plan(job).script)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nprintf "%s\\0" "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{SYSTEM_TOOLS}",
        "NRL_ATTACH_JOB": "42",
        "NRL_SUBMIT_DIR": "/submit",
        "NRL_NODE_LIST": "node0 node1",
        "NRL_CONTAINER_NAME": "nrl-42",
    }
    done = subprocess.run(
        ["bash", str(log_dir / "job.sbatch"), "attach", "1", "--", "touch", "/etc/x"],
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    argv = done.stdout.decode().split("\0")[:-1]
    assert "-w" in argv and argv[argv.index("-w") + 1] == "node1"
    assert "--container-name=nrl-42" in argv and "--container-readonly" in argv
    assert not any(a.startswith("--container-image") for a in argv)
    assert argv[-3:] == ["attach-node", "touch", "/etc/x"]
