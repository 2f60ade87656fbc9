"""The GRPO and SFT runs of examples/tiny-rl, launched as a user launches NeMo RL: `nrl-launch
submit grpo --config FILE OVERRIDES` from the project's directory, `uv run` on the head, FSDP2
training and generation engines on every GPU of the allocation, checkpoints and resumption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - CI runs 3.11
    import tomli as tomllib

import pytest

from nrl_launch import paths
from nrl_launch.jobs import record
from nrl_launch.jobs.history import history
from tests.browser import drawn, rendered
from tests.cluster.conftest import GRPO, job_status, mean, metrics, runs, wait_for_clean_nodes
from tests.conftest import REPO, Cli, wait_until
from tests.helpers import git

pytestmark = pytest.mark.cluster
SFT = "examples/configs/sft_tiny.yaml"
# Generation apart from training: node 0 trains (FSDP2 over 2 ranks), node 1 holds one
# generation engine split over its 2 GPUs (TP2).
NON_COLOCATED_TP2 = [
    "policy.generation.colocated.enabled=false",
    "policy.generation.colocated.resources.num_nodes=1",
    "policy.generation.colocated.resources.gpus_per_node=2",
    "policy.generation.vllm_cfg.tensor_parallel_size=2",
]
COLOCATED_TP2 = ["policy.generation.vllm_cfg.tensor_parallel_size=2"]
# What the chain's uncommitted change prints, and what the tree prints once broken after submit.
SUBMITTED = "tiny-rl code: as submitted"
CHANGED = "tiny-rl code: changed after submit"


def driver_log(cli: Cli, job_id: str) -> str:
    return (Path(job_status(cli, job_id)["log_dir"]) / "ray-driver.log").read_text()


@pytest.mark.parametrize(
    ("nodes", "overrides"),
    [(2, NON_COLOCATED_TP2), (4, COLOCATED_TP2)],
    ids=["2-nodes-non-colocated-tp2", "4-nodes-colocated-tp2"],
)
def test_grpo_puts_work_on_every_gpu_and_learns(
    cli: Cli, project: list[str], tmp_path: Path, nodes: int, overrides: list[str]
) -> None:
    args = ["--config", GRPO, f"cluster.num_nodes={nodes}", *overrides]
    planned = cli("plan", "--json", *args)
    assert planned.code == 0, planned.err
    plan = json.loads(planned.out)

    result = cli("submit", "--wait", "-q", "grpo", *args, *project)
    assert result.code == 0, result.out + result.err
    job_id = result.out.split()[0]
    (run,) = runs(tmp_path)

    # The driver placed what `plan` showed, on every GPU of every node of the job.
    placed = json.loads((run / "placement.json").read_text())
    assert placed["training"] == {
        "gpus": plan["training"]["gpus"],
        "dp": plan["training"]["dp"],
        "tp": 1,
    }
    assert placed["generation"] == {
        "gpus": plan["generation"]["gpus"],
        "tp": plan["generation"]["tp"],
        "engines": plan["generation"]["instances"],
        "colocated": plan["generation"]["colocated"],
    }
    roles = sorted((n["training_gpus"], n["generation_gpus"]) for n in placed["nodes"])
    assert roles == sorted((n["training_gpus"], n["generation_gpus"]) for n in plan["layout"])
    assert len({n["hostname"] for n in placed["nodes"]}) == nodes
    assert all(work for n in placed["nodes"] for work in n["gpus"].values())
    log = driver_log(cli, job_id)
    assert "every GPU carries work" in log

    # Every step ran, generation agreed with training after every push, and the reward rose.
    steps = metrics(run)
    assert [m["step"] for m in steps] == list(range(1, 21))
    assert max(m["logprob_error"] for m in steps) < 1e-3
    rewards = [m["reward"] for m in steps]
    assert mean(rewards[-5:]) > mean(rewards[:5]) + 0.15, rewards
    assert all(m["generation_s"] > 0 and m["weight_sync_s"] > 0 for m in steps)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "step_10",
        "step_15",
        "step_20",
    ]
    assert "done: 20 steps" in log
    # status reads the same run from the driver's log: its last step, reward and last save.
    training = job_status(cli, job_id)["training"]
    assert (training["algorithm"], training["step"], training["total"]) == ("tiny-rl grpo", 20, 20)
    assert training["latest"]["reward"] == pytest.approx(rewards[-1], abs=1e-3)
    assert training["last_save_step"] == 20 and training["seconds_per_step"] > 0
    wait_for_clean_nodes(60)


def test_sft_trains_on_every_gpu(cli: Cli, project: list[str], tmp_path: Path) -> None:
    result = cli("submit", "--wait", "-q", "sft", "--config", SFT, "cluster.num_nodes=2", *project)
    assert result.code == 0, result.out + result.err
    (run,) = runs(tmp_path)
    placed = json.loads((run / "placement.json").read_text())
    assert placed["training"]["gpus"] == 4 and placed["generation"]["gpus"] == 0
    losses = [m["loss"] for m in metrics(run)]
    assert len(losses) == 20 and losses[-1] < losses[0] / 10, losses


def test_chain_saves_before_its_deadline_and_the_next_job_resumes(
    cli: Cli, checkout: Path, tmp_path: Path
) -> None:
    """--time 4 with a 1-minute margin, and a setup of 50 s (tiny_rl.setup_s=50) after Ray is
    up: NeMo RL's clock (tiny-rl's is the same, tiny_rl/timer.py) starts after that setup, so a
    deadline counted from it (the limit less the margin, as nrl-launch used to pass it) falls
    after the job's end (bring-up, the driver's start and the setup take over a minute on a
    2-core machine; 1 + 3 passes 4). The node counts it from the job's real end
    instead: the first job saves before its limit and ends COMPLETED (not
    TIMEOUT), and the second resumes from exactly that save. No machine runs 100000 steps in
    the minutes left: every step runs exactly once, in order, across the two.

    The chain runs from a git checkout of tiny-rl (driver.snapshot): the code as it was when it
    was submitted (an uncommitted change in), though the working tree is broken right after
    submit; its Ray workers on the other node import that code too, not the checkout's editable
    install; its logs and checkpoints stay in the checkout, where the second job resumes from
    them."""
    init = checkout / "tiny_rl" / "__init__.py"
    original = init.read_text()
    # Uncommitted when submitted: it is in the snapshot.
    init.write_text(f"print({SUBMITTED!r}, flush=True)\n{original}")
    args = [
        "--config",
        GRPO,
        "cluster.num_nodes=2",
        "grpo.max_num_steps=100000",
        "checkpointing.save_period=50",
        "tiny_rl.setup_s=50",
        # logger.log_dir and checkpoint_dir as the config has them: relative (logs,
        # results/grpo), to the checkout's dir, though the driver runs in the snapshot.
    ]
    flags = [
        "--container-runtime", "none",
        "--log-dir", str(tmp_path / "jobs"),
        "--time", "4",
        "--set", "nemo_rl.checkpoint_margin_min=1",
    ]  # fmt: skip
    result = cli("submit", "-q", "--chain", "2", "grpo", *args, *flags)
    assert result.code == 0, result.err
    # Hours later, as far as the jobs are concerned: the tree no longer even imports.
    init.write_text(f"raise SystemExit({CHANGED!r})\n")
    assert "to the job's end (slurm.time=4) less 1 min," in result.err
    first, second = result.out.split()
    (snapshot,) = (tmp_path / "jobs" / "code-snapshots").iterdir()
    commit = git(checkout, "rev-parse", "HEAD")
    assert job_status(cli, first)["code"] == {
        "commit": commit,
        "dirty": True,
        "snapshot": str(snapshot),
        "source": str(checkout),
        "line": f"code: {commit[:12]} (+ uncommitted changes), snapshot {snapshot}",
    }
    # While the first runs: where its training is, against its limit of 4 min.
    wait_until(lambda: (job_status(cli, first)["training"] or {}).get("seconds_per_step"), 600)
    status = job_status(cli, first)
    training = status["training"]
    assert training["algorithm"] == "tiny-rl grpo" and training["total"] == 100000
    assert training["step"] >= 1 and training["limit_s"] == 240
    assert training["jobs_needed"] >= 1  # 100000 steps do not fit in 4 min
    assert "reward" in training["latest"] and status["gpu_hours_used"] > 0
    shown = cli("status", first).out
    assert f"training: step {training['step']}/100000 (tiny-rl grpo)" in shown or (
        "training: step " in shown  # a step later by now
    ), shown
    assert "does not finish in this job" in shown and "more job(s) of 4 min" in shown, shown
    assert "GPU-hours: " in shown and " used of the " in shown, shown
    ended = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")
    for job_id in (first, second):
        wait_until(lambda j=job_id: job_status(cli, j)["phase"] in ended, 900)
        status = job_status(cli, job_id)
        log = driver_log(cli, job_id)
        assert status["phase"] == "COMPLETED", (status, log[-3000:])
        # The shim made tiny-rl's timer count from the job's end, and the loop stopped on it.
        assert "nrl-launch: tiny_rl.timer:TimeoutChecker saves by " in log
        assert "before checkpointing.checkpoint_must_save_by" in log
        # The submitted code ran: the driver printed the marker, and so did Ray's workers on
        # the other node (their output comes to the driver's log tagged with their pid and
        # node): they import it too.
        assert CHANGED not in log
        head_log = (Path(status["log_dir"]) / "ray-head.log").read_text()
        assert f"starting the driver in {snapshot}: uv run examples/run_grpo.py" in head_log
        printed = [line for line in log.splitlines() if SUBMITTED in line]
        assert any(line.startswith(SUBMITTED) for line in printed), log[-3000:]
        assert any(", ip=" in line for line in printed), log[-3000:]
        assert status["code"]["snapshot"] == str(snapshot)
        if job_id == first:
            # Its last step saved, whole, before the job ended (looked at before the second
            # job's own saves, a setup of 50 s later, may prune it: keep_top_k).
            (one,) = runs(checkout)
            ran = (one / "metrics.jsonl").is_file()
            done_first = [m["step"] for m in metrics(one)] if ran else []
            assert done_first, "the first job ran no step"
            saved = checkout / "results" / "grpo" / f"step_{done_first[-1]}"
            assert (saved / "training_info.json").is_file()
            assert f"saved {saved} (" in log
    # The run's logs and checkpoints are in the checkout, where they would be without a
    # snapshot, and the second link resumed from the first's last save.
    one, two = runs(checkout)
    assert f"resumed from {saved} (step {done_first[-1]})" in driver_log(cli, second)
    done_second = [m["step"] for m in metrics(two)]
    done = done_first + done_second
    assert done == list(range(1, len(done) + 1)) and len(done_second) > 0
    assert not list(snapshot.rglob("exp_*")) and not (snapshot / "results").exists()
    # The user's env still points at its own checkout: the job synced nothing into it.
    assert not list((checkout / ".venv").glob("lib/python*/site-packages/*snapshot*"))

    # The chain's page, as a browser draws it: its reward and loss over both links' steps,
    # and its timeline (each link queued, brought up, stepping, saving, ended).
    page = tmp_path / "chain.html"
    reported = cli("report", first, second, "-o", str(page))
    assert reported.code == 0, reported.err
    assert reported.out.startswith(f"Wrote {page}: 2 curve(s) of loss, reward, ")
    elements = rendered(page.read_text(), tmp_path)
    for figure in ("metric-0", "metric-1"):
        (line,) = drawn(elements.select("path", "js-line", inside=(figure, "scatterlayer")))
        assert "L" in line.get("d")  # a line, not a point (plotly merges points in a line)
    # Its points: every step of both links, in order.
    links = [record.load(job_id, paths.state_dir(os.environ)) for job_id in (first, second)]
    curves, _ = history("chain", links)
    assert [[step for step, _ in c.points] for c in curves] == [done, done]
    markers = drawn(elements.select("path", "point", inside=("timeline", "scatterlayer")))
    legend = {t.text for t in elements.select("text", "legendtext")}
    assert {"queued", "bring-up", "step", "checkpoint saved", "ended"} <= legend, legend
    assert len(markers) >= 2 * 5  # per link: queued, started, head up, joined, driver, ...


def uv_machine_config() -> tuple[list[str], list[str]]:
    """This machine's uv config (/etc/uv/uv.toml, where .ci/run tells uv what pip is told) and
    the find-links dirs it names, to mount into a container: (mount flags, their paths)."""
    config = Path("/etc/uv/uv.toml")
    if not config.is_file():
        return [], []
    links = [p for p in tomllib.loads(config.read_text()).get("find-links", []) if Path(p).is_dir()]
    paths = [str(config), *links]
    return [flag for p in paths for flag in ("--mount", f"{p}:{p}:ro")], paths


@pytest.fixture(scope="session")
def uv_cache(tiny_rl: Path) -> str:
    """The uv cache the project's env was made from (session scope: this user's real HOME)."""
    uv = Path(sys.prefix) / "bin" / "uv"
    found = subprocess.run([str(uv), "cache", "dir"], cwd=tiny_rl, capture_output=True, text=True)
    return found.stdout.strip()


def test_grpo_in_containers_with_an_env_made_in_the_image(
    cli: Cli,
    tiny_rl: Path,
    uv_cache: str,
    test_image: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same run in pyxis containers of the test image: Ray from the image on every node, the
    driver and its actors in a uv env made in the image first (`nrl-launch run`, on a node,
    offline from the shared uv cache), as NeMo RL's container runs `uv run` in its own env."""
    monkeypatch.chdir(tiny_rl)
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    mounts, _ = uv_machine_config()
    venv = tmp_path / "venv"
    common = [
        "--container", str(test_image),
        "--mount", f"{REPO}:{REPO}:ro",
        "--mount", str(tmp_path),
        *mounts,
        "--set", f"caches.uv={uv_cache}",
        "--set", "setup=:",  # not the project's: Ray comes from the image
        "--log-dir", str(tmp_path / "jobs"),
        "--time", "10",
    ]  # fmt: skip
    made = cli(
        "run", "--wait", "-q", "--gpus-per-node", "0", *common, "--env", "UV_OFFLINE=1", "--",
        "bash", "-c", f"uv venv -q --python /usr/bin/python3 {venv} && "
        f"VIRTUAL_ENV={venv} uv pip install -q -e .",
    )  # fmt: skip
    assert made.code == 0, made.out + made.err

    result = cli(
        "submit", "--wait", "-q", "grpo", "--config", GRPO, "cluster.num_nodes=2",
        f"logger.log_dir={tmp_path / 'logs'}", f"checkpointing.checkpoint_dir={tmp_path / 'ckpt'}",
        *common, "--env", f"UV_PROJECT_ENVIRONMENT={venv}",
    )  # fmt: skip
    assert result.code == 0, result.out + result.err
    (run,) = runs(tmp_path)
    placed = json.loads((run / "placement.json").read_text())
    assert len({n["hostname"] for n in placed["nodes"]}) == 2
    actors = [*placed["actors"]["train"], *(r for e in placed["actors"]["generation"] for r in e)]
    assert {a["python"] for a in actors} == {str(venv / "bin" / "python")}
    rewards = [m["reward"] for m in metrics(run)]
    assert len(rewards) == 20 and mean(rewards[-5:]) > mean(rewards[:5]) + 0.15, rewards
