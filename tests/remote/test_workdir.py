"""The remote's workdir, where submit copies the project, is checked as a log base is: where
another user (uid 4001 here) could replace the copy between submit and the job's start, it is
refused in one line naming the profile key, before anything is copied. What is made of it is
0700, and the copy is a checkout the cluster's submit freezes into the job's log base."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from nrl_launch.remote import sync
from tests.conftest import Cli, need_tool
from tests.remote.conftest import FakeSsh, OtherUser, git_project

Setup = Callable[[Path, OtherUser], tuple[Path, Path, str]]


def _remote(name: str, workdir: Path | str) -> Path:
    remotes = Path.home() / ".config" / "nrl-launch" / "remotes.yaml"
    with remotes.open("a") as f:
        f.write(f"{name}:\n  host: dev-login\n  workdir: {workdir}\n")
    return remotes


def _world_writable(top: Path, _: OtherUser) -> tuple[Path, Path, str]:
    shared = top / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    return (
        shared / "code",
        shared,
        f"{shared} is writable by every user (drwxrwxrwx, no sticky bit)",
    )


def _theirs(top: Path, other: OtherUser) -> tuple[Path, Path, str]:
    theirs = top / "theirs"
    theirs.mkdir()
    os.chown(theirs, other.uid, other.uid)
    return theirs / "code", theirs, f"{theirs} belongs to another user (uid {other.uid})"


def _link_to_theirs(top: Path, other: OtherUser) -> tuple[Path, Path, str]:
    _, theirs, why = _theirs(top, other)
    (top / "link").symlink_to(theirs)
    return top / "link", theirs, why


def _acl(top: Path, other: OtherUser) -> tuple[Path, Path, str]:
    granted = top / "acl"
    granted.mkdir(mode=0o755)
    subprocess.run([need_tool("setfacl"), "-m", f"u:{other.uid}:rwx", str(granted)], check=True)
    why = f"{granted} is writable by the users its ACL names (drwxrwxr-x+, no sticky bit)"
    return granted / "code", granted, why


def _their_group(top: Path, other: OtherUser) -> tuple[Path, Path, str]:
    grouped = top / "group"
    grouped.mkdir()
    os.chown(grouped, 0, other.uid)
    grouped.chmod(0o775)
    why = f"{grouped} is writable by group {other.uid} (drwxrwxr-x, no sticky bit)"
    return grouped / "code", grouped, why


def _sticky_itself(top: Path, _: OtherUser) -> tuple[Path, Path, str]:
    sticky = top / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    return sticky, sticky, f"{sticky} is writable by every user (drwxrwxrwt)"


@pytest.mark.parametrize(
    "setup", [_world_writable, _theirs, _link_to_theirs, _acl, _their_group, _sticky_itself]
)
def test_a_workdir_another_user_can_replace_is_refused(
    cli: Cli,
    fake_ssh: FakeSsh,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    open_dir: Path,
    other_user: OtherUser,
    setup: Setup,
) -> None:
    workdir, writable, why = setup(open_dir, other_user)
    remotes = _remote("shared", workdir)
    monkeypatch.chdir(git_project(tmp_path))
    result = cli("--remote", "shared", "submit", "--nodes", "1", "--", "python", "train.py")
    assert result.err.splitlines() == [
        f"nrl-launch: error: remote shared: workdir {workdir}: {why}: another user could "
        "replace the code synced there before the job runs it; set `workdir:` of remote shared "
        f"in {remotes} to a directory only you can write"
    ]
    assert result.code == 2
    assert list(writable.iterdir()) == []  # nothing copied
    assert not (fake_ssh.home / "submit-args").exists()  # nothing submitted
    # The attack it stops: uid 4001 can put what it likes where the copy would have been.
    planted = other_user.run("mkdir", str(writable / "planted"))
    assert planted.returncode == 0, planted.stderr


def test_the_workdir_is_made_0700_and_the_copy_is_frozen_there(
    cli: Cli, fake_ssh: FakeSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _remote("deep", "~/made/here")
    proj = git_project(tmp_path)
    (proj / "new.py").write_text("untracked, not ignored\n")
    monkeypatch.chdir(proj)
    result = cli("--remote", "deep", "submit", "--nodes", "1", "--", "python", "train.py")
    assert result.code == 0, result.err
    made = [fake_ssh.home / "made", fake_ssh.home / "made" / "here"]
    (copy,) = made[1].iterdir()
    assert [stat.S_IMODE(d.stat().st_mode) for d in [*made, copy]] == [0o700] * 3
    # The cluster's submit freezes the copy (no --no-snapshot): a git checkout of the files sent.
    args = (fake_ssh.home / "submit-args").read_text().split("\0")[:-1]
    assert args == ["submit", "--nodes", "1", "--json", "--", "python", "train.py"]
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others"], cwd=copy, capture_output=True, text=True
    )
    assert listed.stdout.split() == [".gitignore", "new.py", "train.py"]
    # Told not to freeze, it is told once.
    cli("--remote", "deep", "submit", "--no-snapshot", "--", "python", "train.py")
    args = (fake_ssh.home / "submit-args").read_text().split("\0")[:-1]
    assert args == ["submit", "--no-snapshot", "--json", "--", "python", "train.py"]


def test_upload_sh_is_shellcheck_clean() -> None:
    script = Path(sync.__file__).with_name("upload.sh")
    done = subprocess.run(
        [need_tool("shellcheck"), "--shell=sh", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout == ""
