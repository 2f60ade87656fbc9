"""submit/plan --sweep and list/status/cancel --experiment, against the fake Slurm: what is
queued (each point's job name, lane and overrides), what is refused before anything is, and a
sweep that fails half way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TINY_RL, Cli
from tests.fakes import FakeSlurm
from tests.helpers import git, sbatch_reads

GRPO = str(TINY_RL / "examples" / "configs" / "grpo_tiny.yaml")
SWEEP = [
    "--sweep",
    "policy.optimizer.lr=1e-6,3e-6",
    "--sweep",
    "grpo.num_generations_per_prompt=8,16",
]
POINTS = [
    ["policy.optimizer.lr=1e-6", "grpo.num_generations_per_prompt=8"],
    ["policy.optimizer.lr=1e-6", "grpo.num_generations_per_prompt=16"],
    ["policy.optimizer.lr=3e-6", "grpo.num_generations_per_prompt=8"],
    ["policy.optimizer.lr=3e-6", "grpo.num_generations_per_prompt=16"],
]


@pytest.fixture
def job(slurm: FakeSlurm, tmp_path: Path) -> list[str]:
    """sbatch numbers the jobs 101, 102, ...; the flags of a tiny-rl GRPO job, submitted from
    a checkout that holds its driver."""
    (Path.cwd() / "examples").mkdir()
    (Path.cwd() / "examples" / "run_grpo.py").write_text("")
    counter = tmp_path / "sbatch-counter"
    slurm.script(
        "sbatch",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 100) + 1 )); echo $n >{counter}; echo $n",
    )
    return ["--container-runtime", "none", "--log-dir", str(tmp_path / "jobs"),
            "grpo", "--config", GRPO]  # fmt: skip


def records(tmp_path: Path) -> list[dict]:  # type: ignore[type-arg]
    jobs = sorted((tmp_path / "state" / "jobs").glob("*.json"))
    return [json.loads(p.read_text()) for p in jobs]


def test_a_sweep_queues_every_point_as_one_experiment_in_lanes(
    cli: Cli, slurm: FakeSlurm, job: list[str], tmp_path: Path
) -> None:
    result = cli("submit", *job, *SWEEP, "--experiment", "lr", "--max-running", "2")
    assert result.code == 0, result.err
    assert result.out.startswith(
        "Submitted experiment lr: 4 job(s), at most 2 running at once\n"
        "  101  lr-1  policy.optimizer.lr=1e-6 grpo.num_generations_per_prompt=8\n"
    )
    assert "nrl-launch status --experiment lr" in result.out
    assert result.err.count("(optional in secrets) not set") == 1  # said once, not per point
    scripts = [Path(call.split()[-1]).read_text() for call in slurm.calls("sbatch")]
    read = [sbatch_reads(s) for s in scripts]
    assert [next(a for a in r if a.startswith("--job-name=")) for r in read] == [
        f"--job-name=lr-{k}" for k in range(1, 5)
    ]
    assert [[a for a in r if a.startswith("--dependency=")] for r in read] == [
        [],
        [],
        ["--dependency=afterany:101"],
        ["--dependency=afterany:102"],
    ]
    # Each driver gets its point's overrides, and a checkpoint dir of its own (NeMo RL resumes
    # from the newest checkpoint in its dir: a shared one would start a point from another's).
    assert "  checkpoints: each job its own, results/grpo/<job name>" in result.out
    for k, (rec, point) in enumerate(zip(records(tmp_path), POINTS, strict=True), start=1):
        assert (rec["experiment"], rec["overrides"]) == ("lr", point)
        command = rec["spec"]["driver"]["command"]
        assert command[:3] == ["uv", "run", "examples/run_grpo.py"]
        assert command[-3:] == [*point, f"++checkpointing.checkpoint_dir=results/grpo/lr-{k}"]


def test_a_made_up_name_is_printed(cli: Cli, job: list[str]) -> None:
    result = cli("submit", "--json", *job, "--sweep", "grpo.seed=1,2")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["experiment"].startswith("sweep-")
    assert [j["overrides"] for j in data["jobs"]] == [["grpo.seed=1"], ["grpo.seed=2"]]


def test_one_point_that_does_not_fit_refuses_the_sweep(
    cli: Cli, slurm: FakeSlurm, job: list[str], tmp_path: Path
) -> None:
    bad = [
        "--sweep",
        "policy.generation.vllm_cfg.tensor_parallel_size=1,3",
        "--sweep",
        "grpo.seed=1",
    ]
    result = cli("submit", *job, *bad)
    assert result.code == 2
    assert result.err.splitlines()[-1] == (
        "nrl-launch: error: point 2 (policy.generation.vllm_cfg.tensor_parallel_size=3 "
        "grpo.seed=1): generation (vLLM): 2 GPU(s) are not a multiple of 3 "
        "(policy.generation.vllm_cfg.tensor_parallel_size=3 x pipeline_parallel_size=1)"
    )
    assert "Traceback" not in result.err
    assert slurm.calls("sbatch") == [] and records(tmp_path) == []
    assert not (tmp_path / "jobs").exists()
    unknown = cli("submit", *job, "--sweep", "policy.optimizer.lrx=1,2")
    assert unknown.code == 2 and "point 1 (policy.optimizer.lrx=1): override" in unknown.err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--chain", "2"], "--chain with --sweep"),
        (["--retries", "1"], "--retries with --sweep"),
        (["--wait"], "--status --experiment NAME --watch"[2:]),
        (["--max-running", "0"], "--max-running 0: expected 1 or more"),
        (["--experiment", "a/b"], "--experiment 'a/b': expected a name"),
    ],
)
def test_what_a_sweep_cannot_be_combined_with_is_one_line(
    cli: Cli, slurm: FakeSlurm, job: list[str], flags: list[str], says: str
) -> None:
    result = cli("submit", *job, *SWEEP, *flags)
    assert result.code == 2 and says in result.err, result.err
    assert len(result.err.strip().splitlines()) >= 1 and "Traceback" not in result.err
    assert slurm.calls("sbatch") == []


def test_a_point_that_cannot_be_queued_cancels_those_before_it(
    cli: Cli, slurm: FakeSlurm, job: list[str], tmp_path: Path
) -> None:
    counter = tmp_path / "sbatch-counter"
    slurm.script(
        "sbatch",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 100) + 1 )); echo $n >{counter}\n"
        'if [ "$n" = 103 ]; then echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2; '
        "exit 1; fi\necho $n",
    )
    slurm.answer("scancel")
    result = cli("submit", *job, *SWEEP, "--experiment", "lr")
    assert result.code == 3, result.err
    assert (
        "point 3 (policy.optimizer.lr=3e-6 grpo.num_generations_per_prompt=8) was not queued "
        "(sbatch failed (exit 1): sbatch: error: QOSMaxSubmitJobPerUserLimit); cancelled the 2 "
        "queued before it (101 102)"
    ) in result.err
    assert slurm.calls("scancel") == ["scancel 102 101"]


def test_list_status_and_cancel_an_experiment(cli: Cli, slurm: FakeSlurm, job: list[str]) -> None:
    assert cli("submit", *job, *SWEEP, "--experiment", "lr", "--max-running", "2").code == 0
    assert cli("submit", *job, "--sweep", "grpo.seed=1", "--experiment", "other").code == 0
    slurm.answer(
        "squeue",
        stdout="101|RUNNING|None|1|node0\n102|RUNNING|None|1|node1\n"
        "103|PENDING|Dependency|1|\n104|PENDING|Dependency|1|\n",
    )
    listed = cli("list", "--experiment", "lr")
    assert listed.code == 0, listed.err
    lines = listed.out.splitlines()
    assert lines[0] == "Experiment lr: 4 jobs: 2 STARTING, 2 PENDING"
    assert lines[3].split("\t")[:4] == ["103", "lr-3", "PENDING", " ".join(POINTS[2])]
    shown = json.loads(cli("status", "--experiment", "lr", "--json").out)
    assert shown["summary"] == "4 jobs: 2 STARTING, 2 PENDING"
    assert [(j["job_id"], j["overrides"], j["phase"]) for j in shown["jobs"]] == [
        ("101", POINTS[0], "STARTING"),
        ("102", POINTS[1], "STARTING"),
        ("103", POINTS[2], "PENDING"),
        ("104", POINTS[3], "PENDING"),
    ]
    slurm.answer("scancel")
    cancelled = cli("cancel", "--experiment", "lr")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.out == "Cancelled 4 of the 4 jobs of experiment lr: 104, 103, 102, 101\n"
    assert slurm.calls("scancel") == ["scancel 104 103 102 101"]  # one scancel, later first

    for command in ("list", "status", "cancel"):
        unknown = cli(command, "--experiment", "nope")
        assert unknown.code == 4, unknown.err
        assert "--experiment nope: no job of that experiment" in unknown.err
    both = cli("status", "101", "--experiment", "lr")
    assert both.code == 2 and "not both" in both.err


def test_plan_gives_every_point_a_verdict(cli: Cli) -> None:
    args = [
        "plan",
        "--config",
        GRPO,
        "--sweep",
        "policy.generation.vllm_cfg.tensor_parallel_size=1,2,3",
    ]
    result = cli(*args)
    assert result.code == 2
    assert result.out.splitlines()[:3] == [
        "Point 1 (policy.generation.vllm_cfg.tensor_parallel_size=1): fits (1 node(s) x 2 GPU(s))",
        "Point 2 (policy.generation.vllm_cfg.tensor_parallel_size=2): fits (1 node(s) x 2 GPU(s))",
        "Point 3 (policy.generation.vllm_cfg.tensor_parallel_size=3): 1 problem(s)",
    ]
    assert result.out.splitlines()[-2] == "2 of 3 point(s) fit."
    # What the points that fit would cost: without --time, Slurm's partition default decides.
    assert result.out.splitlines()[-1] == (
        "GPU-hours:   2 point(s); unknown: no slurm.time, the partition's default time limit "
        "applies"
    )
    assert "point 3 (policy.generation.vllm_cfg.tensor_parallel_size=3): generation" in result.err
    data = json.loads(cli(*args, "--json").out)
    assert [p["fits"] for p in data["points"]] == [True, True, False]
    assert data["ok"] is False and data["exit_code"] == 2
    ok = cli("plan", "--config", GRPO, "--sweep", "grpo.seed=1,2")
    assert ok.code == 0 and "\n2 of 2 point(s) fit.\nGPU-hours:   2 point(s)" in ok.out


def test_every_point_runs_one_snapshot_of_the_code(
    cli: Cli, slurm: FakeSlurm, job: list[str], tmp_path: Path
) -> None:
    git(Path.cwd(), "init", "-q")
    git(Path.cwd(), "add", ".")
    git(Path.cwd(), "commit", "-qm", "driver")
    result = cli("submit", "-q", *job, "--sweep", "grpo.seed=1,2,3")
    assert result.code == 0, result.err
    (dest,) = (tmp_path / "jobs" / "code-snapshots").iterdir()
    scripts = [Path(call.split()[-1]).read_text() for call in slurm.calls("sbatch")]
    assert len(scripts) == 3 and all(f"NRL_SNAPSHOT_DIR={dest}\n" in s for s in scripts)
    # The frozen driver runs in the copy: each gets the config's relative output dirs (its
    # own checkpoint dir too) absolute, where they are here.
    here = Path.cwd().resolve()
    for rec in records(tmp_path):
        assert rec["spec"]["driver"]["command"][-2:] == [
            f"++logger.log_dir={here}/logs",
            f"++checkpointing.checkpoint_dir={here}/results/grpo/{rec['job_name']}",
        ]
