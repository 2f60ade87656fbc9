"""Where training is, from a driver's log: each NeMo RL algorithm's and tiny-rl's (the logs in
data/nemo_rl_logs/, written by make_logs.py from their print statements), and TensorBoard's
event files."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nrl_launch.jobs.progress import (
    TENSORBOARD_MISSING,
    Progress,
    Save,
    read_log_progress,
    read_progress,
)
from tests.helpers import TEST_DATA

LOGS = TEST_DATA / "nemo_rl_logs"


def progress_of(name: str) -> Progress:
    progress = read_log_progress(LOGS / name)
    assert progress is not None
    return progress


@pytest.mark.parametrize(
    ("log", "algorithm", "step", "total", "seconds", "saves", "latest"),
    [
        ("grpo.log", "grpo", 1, 3, (30.0, 31.0, 32.0), (2,), ("train/reward", 0.4)),
        ("grpo_async.log", "async grpo", 3, 10, (12.0, 13.0, 14.0), (2,), ("train/reward", 0.7)),
        ("sft.log", "sft", 2, 2, (8.0,) * 4, (2, 4), ("train/loss", 0.75)),
        ("dpo.log", "dpo", 3, 3, (4.0, 5.0, 6.0), (3,), ("train/loss", 0.49)),
        ("rm.log", "rm", 2, 4, (6.5, 6.5), (), ("train/loss", 0.55)),
        ("distillation.log", "distillation", 2, 20, (50.0, 50.0), (2,), ("train/loss", 0.7)),
        ("tiny_rl_grpo.log", "tiny-rl grpo", 98, 100, (0.3,) * 3, (97,), ("reward", 1.0)),
        ("tiny_rl_sft.log", "tiny-rl sft", 3, 10, (0.5,) * 3, (2,), ("loss", 0.6667)),
    ],
)
def test_each_algorithms_log_says_its_step_timing_saves_and_main_metric(
    log: str,
    algorithm: str,
    step: int,
    total: int,
    seconds: tuple[float, ...],
    saves: tuple[int, ...],
    latest: tuple[str, float],
) -> None:
    progress = progress_of(log)
    assert (progress.algorithm, progress.step, progress.total) == (algorithm, step, total)
    assert progress.step_seconds == seconds
    assert progress.saves == tuple(Save(s) for s in saves)
    name, value = latest
    assert progress.main[0] == name
    assert progress.latest(name) == pytest.approx(value)


def test_grpo_reward_and_loss_are_its_main_metrics_numbered_by_global_step() -> None:
    progress = progress_of("grpo.log")
    assert progress.main == ("train/reward", "train/loss")
    assert progress.metrics["train/reward"] == ((1, 0.2), (2, 0.3), (3, 0.4))
    # Its other results and timings are there too, by the names its Logger gives them.
    assert progress.latest("train/gen_kl_error") == 0.0012
    assert progress.latest("timing/train/prepare_for_generation/total") == pytest.approx(1.6)
    # The performance block's '  • ' lines are not results.
    assert "train/mean_total_tokens_per_sample" not in progress.metrics


def test_a_later_epoch_counts_steps_in_the_epoch_and_its_metrics_globally() -> None:
    sft = progress_of("sft.log")
    assert (sft.epoch, sft.epochs, sft.step, sft.total) == (2, 2, 2, 2)
    assert [step for step, _ in sft.metrics["train/loss"]] == [1, 2, 3, 4]
    assert sft.latest("train/train_fp_utilization") == pytest.approx(0.41)  # printed as 41.00%
    assert sft.seconds_left() == 0.0


def test_time_left_counts_the_unfinished_step_and_the_epochs_left() -> None:
    grpo = progress_of("grpo.log")  # in step 1/3 of epoch 2/2, not finished
    assert not grpo.step_finished
    assert grpo.seconds_per_step() == 31.0
    assert grpo.seconds_left() == 3 * 31.0
    dpo = progress_of("dpo.log")  # step 3/3 finished, the last epoch
    assert dpo.seconds_left() == 0.0
    async_grpo = progress_of("grpo_async.log")  # step 3/10 finished, no epochs
    assert async_grpo.seconds_left() == 7 * 13.0
    first = Progress(algorithm="grpo", step=1, total=100, step_seconds=(600.0, *[10.0] * 12))
    assert first.seconds_per_step() == 10.0  # the median: a slow first step does not move it
    assert first.seconds_per_step(recent=2) == 10.0


def test_a_resumed_run_appended_to_the_log_continues_from_its_checkpoint() -> None:
    progress = progress_of("grpo_resumed.log")
    assert (progress.step, progress.total, progress.step_finished) == (4, 5, True)
    assert progress.saves == (Save(2), Save(4))
    # Steps 3 and 4 ran again after the requeue: the second try's values stand.
    assert progress.metrics["train/reward"] == ((1, 0.1), (2, 0.2), (3, 0.7), (4, 0.8))
    assert progress.seconds_left() == 20.0  # one step left; the median of 20, 20, 20, 40, 40


def test_a_run_still_in_setup_is_known_but_has_no_step() -> None:
    text = (LOGS / "grpo.log").read_text()
    setup = text[: text.index("\n========================= Epoch")] + "\n"
    progress = read_progress(setup)
    assert progress is not None
    assert (progress.algorithm, progress.step, progress.seconds_left()) == ("grpo", None, None)
    tiny = read_progress("sft: config /work/sft.yaml, logs /results/logs/exp_001\n")
    assert tiny is not None
    assert (tiny.algorithm, tiny.step) == ("tiny-rl sft", None)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\n",
        "step 3 of 10 done\nloss 0.5 at step 4\nstep 5/10\n",
        "Epoch 1/3, Step 10/100, loss=0.5\n  • Loss: 0.5\n",
        "Saving checkpoint for step 3...\n",
        "==== Step 1/2 ====\n",
    ],
)
def test_a_log_of_another_program_has_no_progress(text: str, tmp_path: Path) -> None:
    assert read_progress(text) is None
    log = tmp_path / "ray-driver.log"
    log.write_text(text)
    assert read_log_progress(log) is None
    assert read_log_progress(tmp_path / "missing.log") is None


def test_a_line_still_being_written_is_left_out(tmp_path: Path) -> None:
    text = (LOGS / "dpo.log").read_text()
    cut = text[: text.rindex("  • loss: ") + len("  • loss: 0.4")]  # printing 0.4900
    log = tmp_path / "ray-driver.log"
    log.write_text(cut)
    progress = read_log_progress(log)
    assert progress is not None
    assert progress.step == 3
    assert progress.latest("train/loss") == 0.59  # step 2's: step 3's is not whole yet
    assert not progress.step_finished
    cut_timing = text[: text.rindex("  • Total step time: ") + len("  • Total step time: 6.0")]
    assert read_progress(cut_timing).step_seconds == (4.0, 5.0)  # type: ignore[union-attr]


def test_a_huge_log_is_read_from_its_tail(tmp_path: Path) -> None:
    step = (LOGS / "tiny_rl_sft.log").read_text().splitlines()[-1]  # 'step 3/10: loss ...'
    log = tmp_path / "ray-driver.log"
    with open(log, "w") as out:
        out.write("sft: config /work/sft.yaml, logs /results/logs/exp_001\n")
        for k in range(1, 5001):
            out.write(step.replace("step 3/10", f"step {k}/9000") + "\n")
    size = log.stat().st_size
    progress = read_log_progress(log, max_bytes=10_000)
    assert progress is not None
    assert (progress.algorithm, progress.step, progress.total) == ("tiny-rl sft", 5000, 9000)
    first = progress.metrics["loss"][0][0]
    assert 4700 < first < 5000  # only what the last 10,000 bytes hold, from a whole line
    assert len(progress.step_seconds) == 5000 - first + 1
    assert size > 20 * 10_000
    assert read_log_progress(log, max_bytes=10) is None  # no whole line in them


def test_json_carries_the_counts_and_the_main_metrics_only() -> None:
    progress = progress_of("grpo_async.log")
    data = progress.as_json()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["algorithm"] == "async grpo"
    assert (data["step"], data["total"], data["last_save_step"]) == (3, 10, 2)
    assert (data["seconds_per_step"], data["seconds_left"]) == (13.0, 91.0)
    assert data["latest"] == {"train/reward": 0.7, "train/loss": pytest.approx(0.0369)}
    assert set(data["series"]) == {"train/reward", "train/loss"}
    assert data["series"]["train/reward"] == [[1, 0.3], [2, 0.5], [3, 0.7]]
    nan = read_progress(
        "\n".join(["=" * 25 + " Step 1/2 " + "=" * 25, "", "📊 Training Results:"])
        + "\n  • Loss: nan\n"
    )
    assert nan is not None
    assert nan.as_json()["latest"] == {"train/loss": None}


def test_importing_it_imports_no_tensorboard() -> None:
    code = "import sys, nrl_launch.jobs.progress; print('tensorboard' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


# ---- TensorBoard ------------------------------------------------------------------------------

tensorboard = pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="needs the metrics extra"
)


def write_events(directory: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    """An event file as NeMo RL's TensorboardLogger writes it (SummaryWriter.add_scalar: a
    simple_value), written with tensorboard's own writer (no torch here)."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(directory))
    for tag, points in scalars.items():
        for step, value in points:
            summary = summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
            )
            writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()


@tensorboard
def test_event_files_give_every_metric_exactly_and_join_the_logs(tmp_path: Path) -> None:
    write_events(
        tmp_path / "exp_001" / "tensorboard",
        {
            "train/reward": [(1, 0.203125), (2, 0.296875)],  # exact in float32
            "train/grad_norm": [(1, 1.5), (2, 0.75)],
            "validation/accuracy": [(0, 0.25)],
        },
    )
    progress = read_log_progress(LOGS / "grpo.log", tmp_path)
    assert progress is not None
    # Step 3's reward is the log's alone (the writer flushes every 2 minutes).
    assert progress.metrics["train/reward"] == ((1, 0.203125), (2, 0.296875), (3, 0.4))
    assert progress.latest("train/grad_norm") == 0.75  # not in the log
    assert progress.latest("validation/accuracy") == 0.25
    assert progress.notes == ()


@tensorboard
def test_a_resumed_runs_event_files_win_for_the_steps_it_ran_again(tmp_path: Path) -> None:
    write_events(tmp_path / "exp_001" / "tensorboard", {"train/loss": [(1, 1.0), (2, 0.5)]})
    first = next((tmp_path / "exp_001" / "tensorboard").glob("events.out.tfevents.*"))
    parts = first.name.split(".")
    first.rename(first.with_name(".".join([*parts[:3], "1000000000", *parts[4:]])))
    write_events(tmp_path / "exp_002" / "tensorboard", {"train/loss": [(2, 0.25), (3, 0.125)]})
    progress = read_log_progress(LOGS / "sft.log", tmp_path)
    assert progress is not None
    assert progress.metrics["train/loss"] == ((1, 1.0), (2, 0.25), (3, 0.125), (4, 0.75))


@tensorboard
def test_an_event_file_still_being_written_gives_its_whole_records(tmp_path: Path) -> None:
    write_events(tmp_path / "tensorboard", {"train/reward": [(1, 0.5), (2, 0.75)]})
    events = next((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    events.write_bytes(events.read_bytes()[:-7])  # the last record cut short
    progress = read_log_progress(LOGS / "dpo.log", tmp_path)
    assert progress is not None
    assert progress.metrics["train/reward"] == ((1, 0.5),)


def test_without_tensorboard_installed_the_log_is_read_and_the_user_told(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"")
    code = (
        "import sys; sys.modules['tensorboard'] = None\n"
        "from pathlib import Path\n"
        "from nrl_launch.jobs.progress import read_log_progress\n"
        f"p = read_log_progress(Path({str(LOGS / 'dpo.log')!r}), Path({str(tmp_path)!r}))\n"
        "print(p.step, p.notes)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == f"3 ({TENSORBOARD_MISSING!r},)", result.stderr
    # No event files: nothing to say.
    progress = read_log_progress(LOGS / "dpo.log", tmp_path / "none")
    assert progress is not None
    assert progress.notes == ()
