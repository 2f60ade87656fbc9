"""status names the cause of a failure from the known signatures in the job's logs, else from
the last error line of a driver (or command) that failed by itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nrl_launch.jobs.diagnose import diagnose
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import TEST_DATA

RAY = TEST_DATA / "ray-2.60"


@pytest.mark.parametrize(
    ("fixture", "log", "cause"),
    [
        ("ray-start-port-occupied.txt", "ray-head.log", "a port is already in use"),
        ("version-mismatch.txt", "ray-worker-1.log", "Ray or Python versions differ"),
        ("cuda-oom.txt", "ray-driver.log", "out of memory"),
    ],
)
def test_a_known_signature_is_named_with_the_file_and_line(
    tmp_path: Path, fixture: str, log: str, cause: str
) -> None:
    directory = tmp_path / "7-logs"
    directory.mkdir()
    (directory / "ray-head.log").write_text("[nrl-launch] head on node0\n")
    shutil.copy(RAY / fixture, directory / log)
    found = str(diagnose(directory))
    assert found.startswith(cause), found
    line = next(
        i
        for i, text in enumerate((RAY / fixture).read_text().splitlines(), 1)
        if any(s in text for s in ("occupied", "Version mismatch", "out of memory"))
    )
    assert found.endswith(f"(see {log} line {line})")


def test_the_hf_cache_signature_of_the_seed(tmp_path: Path) -> None:
    directory = tmp_path / "7-logs"
    directory.mkdir()
    (directory / "ray-driver.log").write_text(
        "step 0\nFileNotFoundError: [Errno 2] No such file or directory: "
        "'/root/.cache/huggingface/nemo_rl/model/run_config.yaml'\n"
    )
    assert str(diagnose(directory)) == (
        "the HF cache is not on storage every node sees: set caches.hf_home to a shared path "
        "(see ray-driver.log line 2)"
    )


def test_the_job_s_own_reason_needs_no_file(tmp_path: Path) -> None:
    directory = tmp_path / "7-logs"
    directory.mkdir()
    (directory / "ENDED").write_text(
        "not every node joined within 60s: node2 (node 2) missing; see ray-worker-2.log\n"
    )
    assert (
        str(diagnose(directory)) == "a node never joined the Ray cluster: see its ray-worker-K.log"
    )


def test_no_known_signature_is_no_cause(tmp_path: Path) -> None:
    directory = tmp_path / "7-logs"
    directory.mkdir()
    (directory / "ray-driver.log").write_text("Traceback...\nValueError: bad config key\n")
    assert diagnose(directory) is None


# ---- no known signature: the driver's (or command's) own last error ----

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/lustre/rl/examples/run_grpo.py", line 12, in <module>\n'
    "    import tiny_rl\n"
    "ModuleNotFoundError: No module named 'tiny_rl'\n"
)
LAST_ERROR = "its last error: ModuleNotFoundError: No module named 'tiny_rl'"


def _log_dir(tmp_path: Path, ended: str, name: str, log: str) -> Path:
    """A job's log dir: its ENDED, its head's log, and the log `name` holding `log`."""
    directory = tmp_path / "7-logs"
    directory.mkdir()
    (directory / "ENDED").write_text(ended + "\n")
    (directory / "ray-head.log").write_text("[nrl-launch 2025-01-01 00:00:00] head on node0\n")
    (directory / name).write_text(log)
    return directory


def test_a_failed_driver_s_last_error_is_its_cause(tmp_path: Path) -> None:
    driver = "INFO: loading the config\nstep 0: loss 1.25\n" + TRACEBACK
    directory = _log_dir(tmp_path, "driver exited with code 1", "ray-driver.log", driver)
    found = diagnose(directory)
    assert found is not None
    assert (found.cause, found.where) == (LAST_ERROR, "ray-driver.log line 6")
    assert str(found) == f"{LAST_ERROR} (see ray-driver.log line 6)"


def test_the_last_error_line_is_the_one_named(tmp_path: Path) -> None:
    """A warning with the word error earlier, the traceback's own last line later: the later."""
    driver = "WARNING: retrying after a transient error\n" + TRACEBACK + "\n\n"
    directory = _log_dir(tmp_path, "driver exited with code 2", "ray-driver.log", driver)
    assert str(diagnose(directory)) == f"{LAST_ERROR} (see ray-driver.log line 5)"


def test_a_failed_plain_command_s_last_error_is_its_cause(tmp_path: Path) -> None:
    directory = _log_dir(
        tmp_path,
        "the command exited with code 3 on node 0 (node0)",
        "job.log",
        "[nrl-launch 2025-01-01 00:00:00] job 7: python train.py on 1 node(s)\n"
        + TRACEBACK
        + "[nrl-launch 2025-01-01 00:00:09] the command exited with code 3 on node 0 (node0)\n",
    )
    assert str(diagnose(directory)) == f"{LAST_ERROR} (see job.log line 5)"


def test_srun_s_own_exit_line_is_not_the_command_s_last_error(tmp_path: Path) -> None:
    directory = _log_dir(
        tmp_path,
        "the command exited with code 3 on node 0 (node0)",
        "job.log",
        TRACEBACK
        + "[nrl-launch 2025-01-01 00:00:09] the command exited with code 3 on node 0 (node0)\n"
        + "srun: error: node0: task 0: Exited with exit code 3\n",
    )
    assert str(diagnose(directory)) == f"{LAST_ERROR} (see job.log line 4)"


def test_a_labelled_job_log_s_last_error_is_found(tmp_path: Path) -> None:
    labelled = "".join(f"1: {line}\n" for line in TRACEBACK.splitlines())
    directory = _log_dir(
        tmp_path, "the command exited with code 1 on node 1 (node1)", "job.log", labelled
    )
    found = diagnose(directory)
    assert found is not None and "ModuleNotFoundError: No module named 'tiny_rl'" in found.cause


def test_a_driver_that_exited_0_has_no_such_cause(tmp_path: Path) -> None:
    directory = _log_dir(tmp_path, "driver exited with code 0", "ray-driver.log", TRACEBACK)
    assert diagnose(directory) is None


def test_a_known_signature_wins_over_the_last_error(tmp_path: Path) -> None:
    driver = (
        "step 3\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" + TRACEBACK
    )
    directory = _log_dir(tmp_path, "driver exited with code 1", "ray-driver.log", driver)
    assert str(diagnose(directory)) == "out of memory (see ray-driver.log line 2)"


def test_a_long_driver_log_s_last_error_is_near_the_end(tmp_path: Path) -> None:
    driver = ("step: loss 1.0 " + "x" * 100 + "\n") * 12_000 + TRACEBACK  # over 1 MiB
    directory = _log_dir(tmp_path, "driver exited with code 1", "ray-driver.log", driver)
    assert str(diagnose(directory)) == f"{LAST_ERROR} (see ray-driver.log near the end)"


def test_status_names_the_driver_s_last_error(
    cli: Cli, slurm: FakeSlurm, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf-test")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-test")
    slurm.answer("sbatch", stdout="42\n")
    assert cli("submit", "-q", "--", "python", "train.py").code == 0
    log_dir = isolated / "42-logs"
    log_dir.mkdir()
    (log_dir / "ENDED").write_text("driver exited with code 1\n")
    (log_dir / "ray-driver.log").write_text("step 0\n" + TRACEBACK)
    slurm.answer("squeue", stdout="42|FAILED|NonZeroExitCode|1|node0\n")
    slurm.answer("sacct", stdout="42|FAILED|1:0\n")
    result = cli("status", "42")
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert first.split()[:2] == ["42", "FAILED"]
    assert (
        "exit code 1: driver exited with code 1; likely cause: "
        f"{LAST_ERROR} (see ray-driver.log line 5)"
    ) in first
    status = json.loads(cli("status", "42", "--json").out)["jobs"][0]
    assert status["cause"] == f"{LAST_ERROR} (see ray-driver.log line 5)"
