"""status names the cause of a failure from the known signatures in the job's logs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nrl_launch.jobs.diagnose import diagnose

RAY = Path(__file__).parent / "data" / "ray-2.60"


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
