"""`status` and `list` with no job id: what a user with no jobs yet is told."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.fakes import install


@pytest.mark.parametrize("command", ["status", "list"])
def test_no_jobs_yet_is_one_line_saying_so_and_how_to_submit_one(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    fake = install(tmp_path, monkeypatch)
    state = tmp_path / "state"
    result = cli(command)
    assert (result.code, result.out) == (0, "")  # stdout holds rows only, for grep and cut
    assert result.err == (
        f"nrl-launch: note: no jobs submitted from here (state dir {state}); "
        "nrl-launch submit -f JOB.yaml starts one\n"
    )
    result = cli(command, "--json")
    assert result.code == 0 and result.err == ""
    data = json.loads(result.out)
    assert (data["command"], data["ok"], data["jobs"]) == (command, True, [])
    assert fake.calls() == [] and not state.exists()  # nothing asked, nothing written
