"""`logs --from-byte N`: the log from byte N (what a laptop's `logs -f` over --remote asks for
after a dropped connection), followed or not; --json says how many bytes the log had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.fakes import install
from tests.helpers import save


def test_from_byte_starts_where_asked(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = install(tmp_path, monkeypatch)
    fake.answer("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    fake.answer("sacct", stdout="")
    fake.answer("scontrol", stderr="slurm_load_jobs error: Invalid job id specified\n", code=1)
    log_dir = save(tmp_path, "41")
    log_dir.mkdir(parents=True)
    (log_dir / "ray-driver.log").write_text("step 1\nstep ☃\n")
    (log_dir / "ENDED").write_text("driver exited with code 0\n")
    assert cli("logs", "41", "--from-byte", "7").out == "step ☃\n"
    followed = cli("logs", "41", "-f", "--from-byte", "7")
    assert (followed.code, followed.out) == (0, "step ☃\n")
    assert json.loads(cli("logs", "41", "--json").out)["bytes"] == len("step 1\nstep ☃\n".encode())
    both = cli("logs", "41", "--from-byte", "1", "--tail", "1")
    assert both.code == 2 and "--from-byte and --tail cannot be combined" in both.err
