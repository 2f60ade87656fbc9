"""submit over --remote: the git checkout is copied into a new 0700 dir on the cluster, the
remote submit runs in the copy of the cwd, absolute paths into the checkout point at the copy,
and the job is recorded here with the commit."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from nrl_launch.remote import sync
from tests.conftest import Cli
from tests.remote.conftest import FakeSsh, git_project


def test_rewrite_points_checkout_paths_at_the_copy(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "conf").mkdir(parents=True)
    there = "/home/u/code/proj-1"
    args = [f"{root}/conf/a.yaml", f"--config={root}/conf", f"x.dir={root}", "/data/x", "rel/y"]
    assert sync.rewrite(args, root, there) == [
        f"{there}/conf/a.yaml", f"--config={there}/conf", f"x.dir={there}", "/data/x", "rel/y",
    ]  # fmt: skip


def test_plan_runs_against_a_copy_removed_after(
    cli: Cli, fake_ssh: FakeSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = git_project(tmp_path)
    monkeypatch.chdir(proj)
    result = cli("--remote", "dev", "plan", "--config", f"{proj}/train.py")
    assert result.code == 0, result.err
    command, flag, config = result.out.split("\0")[:-1]
    assert (command, flag) == ("plan", "--config")
    assert config.startswith(f"{fake_ssh.home}/code/proj-") and config.endswith("/train.py")
    assert list((fake_ssh.home / "code").iterdir()) == []  # the copy is gone


def test_submit_syncs_the_checkout_and_records_the_job(
    cli: Cli, fake_ssh: FakeSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = git_project(tmp_path)
    (proj / "new.py").write_text("untracked, not ignored\n")
    monkeypatch.chdir(proj / "sub")
    result = cli("--remote", "dev", "submit", "--nodes", "1", "--", "python", f"{proj}/train.py")
    assert result.code == 0, result.err
    (copy,) = (fake_ssh.home / "code").iterdir()
    assert copy.name.startswith("proj-") and stat.S_IMODE(copy.stat().st_mode) == 0o700
    assert sorted(p.name for p in copy.iterdir()) == [
        ".git", ".gitignore", "new.py", "sub", "train.py",
    ]  # fmt: skip
    assert (fake_ssh.home / "submit-cwd").read_text().strip() == f"{copy}/sub"
    args = (fake_ssh.home / "submit-args").read_text().split("\0")[:-1]
    assert args == ["submit", "--nodes", "1", "--json", "--", "python",
                    f"{copy}/train.py"]  # fmt: skip
    assert "Submitted job 4242 to dev (dev-login)" in result.out
    assert "(+ uncommitted changes)" in result.out
    state = Path(tmp_path / "state" / "remote" / "dev" / "4242.json")
    saved = json.loads(state.read_text())
    assert saved["code_dir"] == str(copy) and saved["dirty"] and len(saved["commit"]) == 40
    # The job id now goes to dev without --remote.
    assert cli("cancel", "4242").out.split("\0")[:-1] == ["cancel", "4242"]


@pytest.mark.usefixtures("fake_ssh")
def test_submit_outside_a_checkout_is_one_line(cli: Cli) -> None:
    result = cli("--remote", "dev", "submit", "--", "python", "x.py")
    assert result.code == 2
    assert "is in none" in result.err and len(result.err.splitlines()) == 1
