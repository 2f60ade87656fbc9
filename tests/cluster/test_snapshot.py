"""driver.snapshot on the dev cluster: a tiny-rl GRPO chain runs the code as it was when it was
submitted (uncommitted changes in), though the working tree is broken right after submit, and
its Ray workers on another node import that code too, not the checkout's editable install; its
logs and checkpoints stay in the checkout, and the chain's second job resumes from them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cluster.conftest import job_status
from tests.conftest import Cli, wait_until
from tests.helpers import git

pytestmark = pytest.mark.cluster
# What the repo's tiny-rl holds that a checkout of it would not (its runs' output, its env).
IGNORED = [".venv", "__pycache__", "uv.lock", "logs", "results", "local-*", "code-snapshots"]
SUBMITTED = "tiny-rl code: as submitted"
CHANGED = "tiny-rl code: changed after submit"


@pytest.fixture
def checkout(
    tiny_rl: Path,
    dev_cluster: None,  # noqa: ARG001 - asked for so that the cluster is up
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """tiny-rl as a checkout of its own (in tmp, which every dev node sees), committed, with
    the env the tiny_rl fixture made (its editable install is of the repo's tiny-rl, a third
    tree: the job must import neither). The cwd is the checkout."""
    repo = tmp_path / "tiny-rl"
    shutil.copytree(tiny_rl, repo, ignore=shutil.ignore_patterns(*IGNORED))
    (repo / ".venv").symlink_to(tiny_rl / ".venv")
    (repo / ".gitignore").write_text("".join(f"{name}\n" for name in IGNORED))
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"../.."', f'"{tiny_rl.parents[1]}"'))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny-rl")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    return repo


def test_a_chain_runs_the_code_it_was_submitted_with(
    cli: Cli, checkout: Path, tmp_path: Path
) -> None:
    init = checkout / "tiny_rl" / "__init__.py"
    original = init.read_text()
    # Uncommitted when submitted: it is in the snapshot.
    init.write_text(f"print({SUBMITTED!r}, flush=True)\n{original}")
    result = cli(
        "submit",
        "-q",
        "--chain",
        "2",
        "--container-runtime",
        "none",
        "--log-dir",
        str(tmp_path / "jobs"),
        "--time",
        "10",
        "grpo",
        "--config",
        "examples/configs/grpo_tiny.yaml",
        "cluster.num_nodes=2",
        "grpo.max_num_steps=2",
        "checkpointing.save_period=1",
        # logger.log_dir and checkpoint_dir as the config has them: relative (logs,
        # results/grpo), to the checkout's dir, though the driver runs in the snapshot.
    )
    assert result.code == 0, result.err
    # Hours later, as far as the jobs are concerned: the tree no longer even imports.
    init.write_text(f"raise SystemExit({CHANGED!r})\n")
    first, second = result.out.split()
    (snapshot,) = (tmp_path / "jobs" / "code-snapshots").iterdir()
    status = job_status(cli, first)
    assert status["code"] == {
        "commit": git(checkout, "rev-parse", "HEAD"),
        "dirty": True,
        "snapshot": str(snapshot),
        "source": str(checkout),
        "line": f"code: {git(checkout, 'rev-parse', 'HEAD')[:12]} (+ uncommitted changes), "
        f"snapshot {snapshot}",
    }
    for job_id in (first, second):
        wait_until(lambda j=job_id: job_status(cli, j)["phase"] in ("COMPLETED", "FAILED"), 600)
        status = job_status(cli, job_id)
        log = (Path(status["log_dir"]) / "ray-driver.log").read_text()
        assert status["phase"] == "COMPLETED", (status, log[-3000:])
        assert CHANGED not in log
        head_log = (Path(status["log_dir"]) / "ray-head.log").read_text()
        assert f"starting the driver in {snapshot}: uv run examples/run_grpo.py" in head_log
        # The driver printed it, and so did Ray's workers on the other node (their output
        # comes to the driver's log tagged with their pid and node): they import it too.
        printed = [line for line in log.splitlines() if SUBMITTED in line]
        assert any(line.startswith(SUBMITTED) for line in printed), log[-3000:]
        assert any(", ip=" in line for line in printed), log[-3000:]
        assert status["code"]["snapshot"] == str(snapshot)
    # The run's logs and checkpoints are in the checkout, where they would be without a
    # snapshot, and the second link resumed from the first's.
    assert len(list((checkout / "logs").glob("exp_*"))) == 2
    second_log = (Path(job_status(cli, second)["log_dir"]) / "ray-driver.log").read_text()
    assert f"resumed from {checkout}/results/grpo/step_2" in second_log, second_log[-3000:]
    assert not list(snapshot.rglob("exp_*")) and not (snapshot / "results").exists()
    # The user's env still points at its own checkout: the job synced nothing into it.
    assert not list((checkout / ".venv").glob("lib/python*/site-packages/*snapshot*"))
