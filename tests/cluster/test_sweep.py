"""A sweep of examples/tiny-rl's GRPO as one experiment: 2x2 points, each its own job with its
overrides, at most 2 running at once (Slurm's own start and end times say so), shown together
by list/status --experiment; and cancel --experiment ending a sweep whose second lane waits."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
GRPO = "examples/configs/grpo_tiny.yaml"


def experiment(cli: Cli, name: str) -> dict[str, Any]:
    result = cli("list", "--experiment", name, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)  # type: ignore[no-any-return]


def slurm_times(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Each job's start and end as Slurm recorded them (the dev cluster keeps no accounting
    database: `sacct -c` reads its job completion log)."""
    shown = subprocess.run(
        ["sacct", "-c", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,Start,End"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [line.split("|") for line in shown.splitlines() if line]
    return {row[0]: (row[1], row[2]) for row in rows if row[0] in job_ids}


def test_a_2x2_sweep_runs_as_one_experiment_two_at_a_time(
    cli: Cli, project: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "points"
    steps, dirs = ["1", "2"], [str(out / "a"), str(out / "b")]
    result = cli(
        "submit", "--json", "grpo", "--config", GRPO, *project,
        "--experiment", "tiny-sweep", "--max-running", "2",
        "--sweep", f"grpo.max_num_steps={','.join(steps)}",
        "--sweep", f"logger.log_dir={','.join(dirs)}",
    )  # fmt: skip
    assert result.code == 0, result.out + result.err
    jobs = json.loads(result.out)["jobs"]
    points = [
        [f"grpo.max_num_steps={n}", f"logger.log_dir={d}"] for n in steps for d in dirs
    ]  # the first axis varies slowest
    assert [j["overrides"] for j in jobs] == points
    assert [j["job_name"] for j in jobs] == [f"tiny-sweep-{k}" for k in range(1, 5)]
    ids = [j["job_id"] for j in jobs]

    followed = cli("status", "--experiment", "tiny-sweep", "--watch")
    assert followed.code == 0, followed.out + followed.err
    # Its last table compares the points: each one's overrides, its steps done and reward.
    table = followed.out.rstrip("\n").split("Experiment tiny-sweep: ")[-1]
    assert table.startswith("4 jobs: 4 COMPLETED\n"), followed.out[-3000:]
    rows = [line.split("\t") for line in table.splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (i, " ".join(p), "COMPLETED") for i, p in zip(ids, points, strict=True)
    ]
    for row, n in zip(rows, [n for n in steps for _ in dirs], strict=True):
        assert row[3].endswith(f" {n}/{n}") and row[4].startswith("reward "), row

    shown = experiment(cli, "tiny-sweep")
    assert shown["summary"] == "4 jobs: 4 COMPLETED"
    # what the four used together: each job's nodes x GPUs from its start to its end
    assert shown["gpu_hours_used"] == pytest.approx(sum(j["gpu_hours_used"] for j in shown["jobs"]))
    assert shown["gpu_hours_used"] > 0
    assert [(j["job_id"], j["overrides"]) for j in shown["jobs"]] == list(
        zip(ids, points, strict=True)
    )
    text = cli("status", "--experiment", "tiny-sweep").out
    assert text.startswith("Experiment tiny-sweep: 4 jobs: 4 COMPLETED\n  ")
    assert re.search(r"\n  [0-9.]+ GPU-hours used by its jobs together\n", text), text
    assert all(" ".join(p) in text for p in points)

    # Each job's driver ran with its own values: its steps, into its own log dir.
    for job, (n, d) in zip(shown["jobs"], [(n, d) for n in steps for d in dirs], strict=True):
        log = (Path(job["log_dir"]) / "ray-driver.log").read_text()
        assert f"logs {d}/exp_" in log and f"step {n}/{n}:" in log, log[-2000:]
    # Each saved its last step in a checkpoint dir of its own (a shared one would have had a
    # point resume from another's).
    for job, n in zip(shown["jobs"], [n for n in steps for _ in dirs], strict=True):
        saved = tmp_path / "ckpt" / job["job_name"]
        assert sorted(p.name for p in saved.iterdir()) == [f"step_{n}"], job
    for d in dirs:
        counts = sorted(len((r / "metrics.jsonl").read_text().splitlines())
                        for r in Path(d).glob("exp_*"))  # fmt: skip
        assert counts == [1, 2]

    # Slurm's own times: points 3 and 4 started only once 1 and 2 (their lanes') had ended,
    # and never more than 2 ran at once.
    times = slurm_times(ids)
    assert times[ids[2]][0] >= times[ids[0]][1] and times[ids[3]][0] >= times[ids[1]][1]
    for start, _ in times.values():
        assert sum(s <= start < e for s, e in times.values()) <= 2, times

    # A second sweep whose second lane waits on its first: cancel --experiment ends both.
    result = cli(
        "submit", "-q", "grpo", "--config", GRPO, *project, "checkpointing.enabled=false",
        "--experiment", "tiny-cancel", "--max-running", "1",
        "--sweep", "grpo.max_num_steps=1000,1001",
    )  # fmt: skip
    assert result.code == 0, result.out + result.err
    waiting = experiment(cli, "tiny-cancel")["jobs"][1]
    assert waiting["phase"] == "PENDING" and "Dependency" in waiting["detail"], waiting
    cancelled = cli("cancel", "--experiment", "tiny-cancel")
    assert cancelled.code == 0, cancelled.err
    assert cancelled.out.startswith("Cancelled 2 of the 2 jobs of experiment tiny-cancel")
    wait_until(lambda: experiment(cli, "tiny-cancel")["summary"] == "2 jobs: 2 CANCELLED", 120)
    unknown = cli("cancel", "--experiment", "no-such-sweep")
    assert unknown.code == 4 and "no-such-sweep" in unknown.err
