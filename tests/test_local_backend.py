"""The local backend, for real: the README's main job, run exactly as the README writes it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    MAIN_JOB,
    REPO,
    Cli,
    as_reader,
    doc_block,
    ray_processes,
    readme_shell_env,
    wait_until,
)
from tests.helpers import make_record


def readme_cluster_check() -> list[str]:
    (command,) = doc_block("examples/cluster_check.py --nodes 1")
    return shlex.split(command)[1:]


@pytest.fixture
def here(ray_venv: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine as the README's reader has it: Ray on PATH, the repo's examples in cwd."""
    monkeypatch.setenv("PATH", f"{ray_venv}/bin:{os.environ['PATH']}")
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(isolated / "state"))
    (isolated / "examples").symlink_to(REPO / "examples")
    return isolated


def test_readme_cluster_check_runs_here(cli: Cli, here: Path) -> None:
    result = cli(*readme_cluster_check())
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[2]
    assert result.out.rstrip().endswith(
        f"COMPLETED  driver exited with code 0   (logs: {here}/{job_id}-logs)"
    )
    log_dir = here / f"{job_id}-logs"
    assert "placed 2 actors, one per GPU" in (log_dir / "ray-driver.log").read_text()
    assert "Number of actors online: 2/2" in (log_dir / "ray-head.log").read_text()
    phases = json.loads((log_dir / "timings.json").read_text())["phases"]
    assert phases["head_up"] <= phases["all_joined"] <= phases["driver_started"]
    assert (log_dir / "exit_code").read_text().strip() == "0"
    assert cli("logs", job_id, "--tail", "1").out.startswith("placed 2 actors")
    listed = json.loads(cli("list", "--json").out)["jobs"]
    assert [j["job_id"] for j in listed] == [job_id] and listed[0]["backend"] == "local"
    assert not ray_processes(log_dir)


def test_readme_main_job_grpo_runs_here(fresh_tiny_rl: Path) -> None:
    """The README's main job, its commands as written, from the repository root: a GRPO run
    that places its work on both GPUs, learns, and checkpoints."""
    commands = doc_block(MAIN_JOB)
    run = subprocess.run(
        as_reader(commands),
        cwd=REPO,
        env=readme_shell_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "COMPLETED  driver exited with code 0" in run.stdout.splitlines()[-1]
    (log_dir,) = fresh_tiny_rl.glob("local-*-logs")
    driver = (log_dir / "ray-driver.log").read_text()
    assert "placement: 2 FSDP2 training rank(s) (gloo), 2 generation engine(s) x TP1" in driver
    assert "GPU 0: train rank 0, generation engine 0 TP rank 0" in driver
    assert "done: 20 steps" in driver
    (exp,) = (fresh_tiny_rl / "logs").glob("exp_*")
    rewards = [
        json.loads(line)["reward"] for line in (exp / "metrics.jsonl").read_text().splitlines()
    ]
    assert len(rewards) == 20 and sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.15, rewards
    assert (fresh_tiny_rl / "results" / "grpo" / "step_20" / "policy" / "weights.pt").is_file()
    assert not ray_processes(log_dir)


def test_docs_model_pools_grpo_scored_by_a_judge_pool_runs_here(fresh_tiny_rl: Path) -> None:
    """The block of the Model pools page (docs/model-pools.md), as written: tiny-rl's GRPO run
    whose rewards all come from its judge served as a pool of two (processes here), through
    the balancer's URL; it learns as the main job does, and both replicas scored."""
    commands = doc_block("-f judge-pool.yaml grpo")
    run = subprocess.run(
        as_reader(commands), cwd=REPO, env=readme_shell_env(), capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "COMPLETED  driver exited with code 0" in run.stdout.splitlines()[-1]
    (log_dir,) = fresh_tiny_rl.glob("local-*-logs")
    driver = (log_dir / "ray-driver.log").read_text()
    url = "http://127.0.0.1:8500/v1"
    assert (log_dir / "judge_url").read_text().strip() == url
    assert f"rewards: from the judge tiny-judge at {url}, one request per sample" in driver
    (exp,) = (fresh_tiny_rl / "logs").glob("exp_*")
    steps = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    rewards = [s["reward"] for s in steps]
    assert len(rewards) == 20 and sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.15, rewards
    assert all(s["judge_s"] > 0 for s in steps)
    # Each replica says, as it stops, how many answers it scored: between them, every sample.
    scored = [
        int(re.search(r"stopped after scoring (\d+) answer", text)[1])  # type: ignore[index]
        for text in ((log_dir / f"pool-judge-{k}.log").read_text(errors="replace") for k in (0, 1))
    ]
    assert sum(scored) == 20 * 16 * 8 and min(scored) > 0, scored
    assert not ray_processes(log_dir)


def test_tiny_rl_s_deadline_clock_starts_after_its_setup(
    cli: Cli, fresh_tiny_rl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As NeMo RL's (nemo_rl/utils/timer.py, its issue #3596): checkpoint_must_save_by counts
    from the end of the driver's setup. A setup of 15 s (tiny_rl.setup_s) and a deadline of 25 s:
    a clock started with the driver would leave no step room (workers start, then 15 s more);
    started after the setup, steps run, and the run saves and stops before the deadline."""
    monkeypatch.chdir(fresh_tiny_rl)
    result = cli(
        "submit", "--backend", "local", "--wait", "-q", "grpo",
        "--config", "examples/configs/grpo_tiny.yaml", "tiny_rl.setup_s=15",
        "checkpointing.checkpoint_must_save_by=00:00:00:25", "grpo.max_num_steps=100000",
    )  # fmt: skip
    assert result.code == 0, result.err
    (log_dir,) = fresh_tiny_rl.glob("local-*-logs")
    driver = (log_dir / "ray-driver.log").read_text()
    setup, stop = driver.index("setup: 15 s more"), driver.index("stopping after step ")
    steps = [line for line in driver[setup:stop].splitlines() if line.startswith("step ")]
    assert steps, driver  # steps ran after the setup, within the deadline
    assert "before checkpointing.checkpoint_must_save_by" in driver[stop:]
    # The last step, saved where the config says, relative to the checkout (the driver runs
    # in its snapshot, and is given the dir absolute).
    assert f"saved {fresh_tiny_rl}/results/grpo/step_{len(steps)} " in driver


@pytest.mark.usefixtures("here")
def test_local_driver_exit_code_and_cancel(cli: Cli) -> None:
    failed = cli(
        "submit",
        "--backend",
        "local",
        "--wait",
        "-q",
        "--gpus-per-node",
        "1",
        "--",
        "python",
        "examples/cluster_check.py",
        "--exit-code",
        "3",
    )
    assert failed.code == 3, failed.out + failed.err

    sleeper = "import ray, time; ray.init(address='auto'); time.sleep(600)"
    job_id = cli(
        "submit", "--backend", "local", "-q", "--gpus-per-node", "1", "--", "python", "-c", sleeper
    ).out.strip()
    wait_until(lambda: "driver running" in cli("status", job_id).out)
    log_dir = json.loads(cli("status", job_id, "--json").out)["jobs"][0]["log_dir"]
    assert ray_processes(log_dir)  # the job's own Ray, found by its log dir
    assert cli("cancel", job_id).code == 0
    wait_until(lambda: "CANCELLED" in cli("status", job_id).out)
    wait_until(lambda: not ray_processes(log_dir))


def test_cancel_never_signals_a_process_that_is_not_the_job(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished local job's pid may since belong to another process: cancel leaves it be."""
    from nrl_launch.jobs import record

    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        job = make_record("local-1").model_copy(
            update={
                "backend": "local",
                "log_dir": str(tmp_path / "local-1-logs"),
                "script_path": str(tmp_path / "job.sh"),
                "pid": stranger.pid,
            }
        )
        record.save(job, tmp_path / "state")
        result = cli("cancel", "local-1")
        assert result.code == 0
        assert "job local-1 had already ended" in result.err
        assert stranger.poll() is None  # still running
        status = json.loads(cli("status", "local-1", "--json").out)["jobs"][0]
        assert (status["phase"], status["detail"]) == (
            "FAILED",
            "the job's process ended without recording how",
        )
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.usefixtures("here")
def test_local_interactive_attach_dashboard_and_stop(cli: Cli) -> None:
    job_id = cli(
        "submit", "--backend", "local", "--interactive", "-q", "--gpus-per-node", "1"
    ).out.strip()
    try:
        wait_until(lambda: "all 1 nodes joined" in cli("status", job_id).out)
        attached = subprocess.run(
            [
                sys.executable,
                "-m",
                "nrl_launch",
                "attach",
                job_id,
                "--",
                "bash",
                "-c",
                'echo "$RAY_ADDRESS"; python -c "import ray; ray.init(); print(len(ray.nodes()))"',
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert attached.returncode == 0, attached.stderr
        assert attached.stdout.split() == ["127.0.0.1:1200", "1"]
        dashboard = json.loads(cli("dashboard", job_id, "--json").out)
        assert dashboard["ssh"].startswith("ssh -N -L 8265:localhost:8265 ")
        assert cli("stop", job_id, "--wait").code == 0
        assert "COMPLETED  stop requested by" in cli("status", job_id).out
        log_dir = json.loads(cli("status", job_id, "--json").out)["jobs"][0]["log_dir"]
        wait_until(lambda: not ray_processes(log_dir))
    finally:
        cli("cancel", job_id)
