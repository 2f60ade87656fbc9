"""driver.snapshot: submit freezes the driver's git checkout (tracked and untracked-not-ignored
files as they are on disk) in a directory only the user can read, and the job runs that copy."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from nrl_launch.jobs import snapshot
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import git, spec

ODD = "a file with spaces\nand a newline.py"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout shaped like NeMo RL's, with a project (tiny-rl's shape) inside: committed,
    modified, untracked, ignored, deleted, linked and oddly named files."""
    repo = tmp_path / "repo"
    proj = repo / "examples" / "proj"
    (proj / "pkg").mkdir(parents=True)
    (repo / ".gitignore").write_text(".venv/\nckpt/\n*.log\n")
    (proj / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (proj / "pkg" / "__init__.py").write_text("MARK = 'committed'\n")
    (proj / "run.sh").write_text("#!/bin/sh\n")
    (proj / "run.sh").chmod(0o755)
    (proj / "gone.py").write_text("")
    (repo / ODD).write_text("odd\n")
    (proj / "link.py").symlink_to("pkg/__init__.py")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    (proj / "pkg" / "__init__.py").write_text("MARK = 'modified'\n")  # not committed
    (proj / "pkg" / "new.py").write_text("NEW = 1\n")  # untracked, not ignored
    (proj / "gone.py").unlink()  # deleted, not committed
    (proj / ".venv" / "bin").mkdir(parents=True)  # ignored
    (proj / ".venv" / "bin" / "python").write_text("")
    (proj / "ckpt").mkdir()
    (proj / "ckpt" / "step_1.pt").write_bytes(b"\0" * 1000)
    (proj / "train.log").write_text("ignored\n")
    return repo


def test_the_copy_holds_what_git_would_give_as_it_is_on_disk(
    checkout: Path, tmp_path: Path
) -> None:
    proj = checkout / "examples" / "proj"
    frozen_spec, copied, note = snapshot.freeze(spec(), proj, tmp_path / "logs")
    assert note == ""
    assert copied is not None
    frozen = frozen_spec.driver.frozen
    assert frozen is not None and frozen == copied.frozen
    dest = Path(frozen.dir)
    assert dest.parent == tmp_path / "logs" / "code-snapshots"
    assert frozen.source == str(checkout.resolve())
    assert frozen.commit == git(checkout, "rev-parse", "HEAD")
    assert frozen.dirty
    assert frozen.workdir == str(dest / "examples" / "proj")
    assert frozen.python_path == (str(dest / "examples" / "proj"),)
    assert frozen.venv == str(proj / ".venv")  # the checkout's env: the copy has none
    copy = dest / "examples" / "proj"
    assert (copy / "pkg" / "__init__.py").read_text() == "MARK = 'modified'\n"
    assert (copy / "pkg" / "new.py").read_text() == "NEW = 1\n"
    assert (dest / ODD).read_text() == "odd\n"
    assert (copy / "link.py").is_symlink()
    assert (copy / "link.py").readlink() == Path("pkg/__init__.py")
    for left_out in [".venv", "ckpt", "train.log", "gone.py"]:
        assert not (copy / left_out).exists()
    assert not (dest / ".git").exists()
    found = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file() or p.is_symlink()}
    proj_files = ["pyproject.toml", "pkg/__init__.py", "pkg/new.py", "run.sh", "link.py"]
    assert found == {".gitignore", ODD, *(f"examples/proj/{name}" for name in proj_files)}
    assert copied.files == len(found)


def test_the_copy_is_the_user_s_alone(checkout: Path, tmp_path: Path) -> None:
    proj = checkout / "examples" / "proj"
    old = os.umask(0o022)  # a umask that would let others read what is made
    try:
        _, copied, _ = snapshot.freeze(spec(), proj, tmp_path / "logs")
    finally:
        os.umask(old)
    assert copied is not None
    dest = Path(copied.frozen.dir)
    modes = {
        str(p): stat.S_IMODE(p.lstat().st_mode)
        for p in [dest, dest.parent, *dest.rglob("*")]
        if not p.is_symlink()
    }
    assert modes[str(dest / "examples/proj/run.sh")] == 0o700  # still executable
    assert modes[str(dest / "examples/proj/pyproject.toml")] == 0o600
    # Nothing in it is readable, let alone writable, by anyone else.
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes


def test_a_clean_checkout_is_not_dirty(checkout: Path, tmp_path: Path) -> None:
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "all")
    frozen_spec, _, _ = snapshot.freeze(spec(), checkout, tmp_path / "logs")
    frozen = frozen_spec.driver.frozen
    assert frozen is not None
    assert not frozen.dirty
    assert frozen.workdir == frozen.dir  # submitted from the top level
    assert frozen.venv is None  # no pyproject.toml above the top level's workdir with a .venv
    assert snapshot.code_line(frozen) == (
        f"code: {git(checkout, 'rev-parse', 'HEAD')[:12]}, snapshot {frozen.dir}"
    )


def test_a_dir_outside_git_is_not_frozen(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    same, copied, note = snapshot.freeze(spec(), plain, tmp_path / "logs")
    assert copied is None and same.driver.frozen is None
    assert note.startswith(f"code: not frozen ({plain} is not in a git checkout)")
    assert not (tmp_path / "logs").exists()


def test_off_and_interactive_jobs_freeze_nothing(checkout: Path, tmp_path: Path) -> None:
    off = spec(driver={"command": ["x"], "snapshot": False})
    for job in [off, spec(interactive=True, driver={})]:
        same, copied, note = snapshot.freeze(job, checkout, tmp_path / "logs")
        assert (copied, note, same) == (None, "", job)
    assert not (tmp_path / "logs").exists()


# ---- submit, status and render ----

JOB = ["--container-runtime", "none", "--", "python", "train.py"]


@pytest.fixture
def submitting(
    checkout: Path, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Path:
    """In the checkout's project, with git, and sbatch answering job 42; returns the log base."""
    slurm.link("git")
    slurm.answer("sbatch", stdout="42\n")
    monkeypatch.chdir(checkout / "examples" / "proj")
    monkeypatch.setenv("HF_TOKEN", "x")
    monkeypatch.setenv("WANDB_API_KEY", "x")
    return tmp_path / "jobs"


def test_submit_freezes_the_code_and_status_names_it(
    cli: Cli, slurm: FakeSlurm, submitting: Path, checkout: Path
) -> None:
    result = cli("submit", "-q", "--log-dir", str(submitting), *JOB)
    assert result.code == 0, result.err
    (dest,) = (submitting / "code-snapshots").iterdir()
    # The job script runs the driver in the copy.
    script = Path(slurm.calls("sbatch")[0].split()[-1])
    assert f"NRL_SNAPSHOT_WORKDIR={dest}/examples/proj" in script.read_text()
    slurm.answer("squeue", stdout="42|PENDING|Priority|1|\n")
    out = cli("status", "42").out
    head = git(checkout, "rev-parse", "HEAD")[:12]
    assert f"    code: {head} (+ uncommitted changes), snapshot {dest}" in out.splitlines()
    code = json.loads(cli("status", "42", "--json").out)["jobs"][0]["code"]
    assert code["commit"].startswith(head) and code["dirty"] and code["snapshot"] == str(dest)


def test_a_chain_s_jobs_share_one_snapshot(cli: Cli, slurm: FakeSlurm, submitting: Path) -> None:
    result = cli("submit", "-q", "--chain", "2", "--log-dir", str(submitting), *JOB)
    assert result.code == 0, result.err
    (dest,) = (submitting / "code-snapshots").iterdir()
    scripts = [Path(call.split()[-1]).read_text() for call in slurm.calls("sbatch")]
    assert len(scripts) == 2
    assert all(f"NRL_SNAPSHOT_DIR={dest}\n" in s for s in scripts)


def test_no_snapshot_runs_the_checkout_as_it_is(
    cli: Cli, slurm: FakeSlurm, submitting: Path
) -> None:
    result = cli("submit", "-q", "--no-snapshot", "--log-dir", str(submitting), *JOB)
    assert result.code == 0, result.err
    assert not (submitting / "code-snapshots").exists()
    assert "NRL_SNAPSHOT_DIR=" not in Path(slurm.calls("sbatch")[0].split()[-1]).read_text()
    slurm.answer("squeue", stdout="42|PENDING|Priority|1|\n")
    assert json.loads(cli("status", "42", "--json").out)["jobs"][0]["code"] is None


def test_a_refused_submit_leaves_no_snapshot(cli: Cli, slurm: FakeSlurm, submitting: Path) -> None:
    slurm.answer("sbatch", stderr="sbatch: error: Invalid account\n", code=1)
    assert cli("submit", "-q", "--log-dir", str(submitting), *JOB).code != 0
    assert list((submitting / "code-snapshots").iterdir()) == []


def test_render_says_what_submit_would_freeze_and_copies_nothing(
    cli: Cli, slurm: FakeSlurm, submitting: Path, checkout: Path
) -> None:
    result = cli("render", "--log-dir", str(submitting), *JOB)
    assert result.code == 0, result.err
    head = git(checkout, "rev-parse", "HEAD")[:12]
    assert (
        f"nrl-launch: note: submit freezes {checkout.resolve()} ({head} (+ uncommitted "
        "changes)) under code-snapshots/ in the log base dir"
    ) in result.err.splitlines()
    assert "NRL_SNAPSHOT_DIR=" not in result.out
    assert not submitting.exists()
    assert slurm.calls() == []


def test_without_git_nothing_is_frozen_and_the_note_says_why(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node (or a test root) with no git: the checkout is there, git is not."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    same, copied, note = snapshot.freeze(spec(), checkout, tmp_path / "logs")
    assert copied is None and same.driver.frozen is None
    assert note.startswith("code: not frozen (git is not installed here)")


def test_submit_says_which_code_the_job_runs(
    cli: Cli, submitting: Path, checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = cli("submit", "--nodes", "1", "--log-dir", str(submitting), *JOB).out
    (dest,) = (submitting / "code-snapshots").iterdir()
    head = git(checkout, "rev-parse", "HEAD")[:12]
    assert f"  code: {head} (+ uncommitted changes), snapshot {dest}" in out.splitlines()
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    out = cli("submit", "--nodes", "1", "--log-dir", str(submitting), *JOB).out
    assert f"  code: not frozen ({plain} is not in a git checkout)" in out


def test_the_frozen_driver_keeps_its_outputs_where_they_were(
    checkout: Path, tmp_path: Path
) -> None:
    """NeMo RL's relative logger.log_dir and checkpoint_dir would land in the copy (where the
    driver runs): they are passed on absolute, in the checkout, where a later submit resumes."""
    proj = checkout / "examples" / "proj"
    outputs = [("logger.log_dir", "logs"), ("checkpointing.checkpoint_dir", "results/grpo")]
    frozen_spec, _, _ = snapshot.freeze(spec(), proj, tmp_path / "logs", outputs)
    assert frozen_spec.driver.command == (
        "python",
        "x.py",
        f"++logger.log_dir={proj.resolve()}/logs",
        f"++checkpointing.checkpoint_dir={proj.resolve()}/results/grpo",
    )
    odd = tmp_path / "a dir, odd"
    shutil.copytree(checkout, odd, symlinks=True)
    same_command, _, _ = snapshot.freeze(spec(), odd, tmp_path / "logs", outputs)
    assert same_command.driver.command == ("python", "x.py")  # Hydra would misread the path


def test_the_log_base_s_own_outputs_are_not_code(checkout: Path) -> None:
    """logs.base_dir defaults to the submit dir, in the checkout: the snapshots and job log
    dirs there are outputs, and each snapshot holding the ones before would grow without end."""
    proj = checkout / "examples" / "proj"
    (proj / "42-logs").mkdir()
    (proj / "42-logs" / "ray-driver.log.txt").write_text("x\n")
    _, first, _ = snapshot.freeze(spec(), proj, proj)
    _, second, _ = snapshot.freeze(spec(), proj, proj)
    assert first is not None and second is not None
    assert first.files == second.files
    copy = Path(second.frozen.dir) / "examples" / "proj"
    assert not (copy / "code-snapshots").exists() and not (copy / "42-logs").exists()
    assert (copy / "pkg" / "new.py").is_file()
