"""The remote door (submit --remote): the cluster side of a remote submit is the same `submit`,
so each spec of the one-way-in catalogue (tests/helpers.py) is refused there with the line a
local submit says, with nothing queued, written or deleted on either side. The "cluster" is
the real nrl-launch behind the fake ssh (a real bash), with an sbatch that records its calls."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import Cli
from tests.helpers import CATALOGUE, Bad, bad_job
from tests.remote.conftest import FakeSsh, git_project


def _where_said(line: str) -> str:
    """A missing secret's line says where to set it: this shell, or the cluster's ssh sessions."""
    return re.sub(r" is not set in .* and the job requires it", " is not set", line)


def _errors(err: str) -> list[str]:
    error = "nrl-launch: error: "
    return [line.removeprefix(error) for line in err.splitlines() if line.startswith(error)]


@pytest.mark.parametrize("bad", CATALOGUE, ids=lambda b: b.name)
def test_a_remote_submit_refuses_what_a_local_one_does(
    cli: Cli, fake_ssh: FakeSsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Bad
) -> None:
    remote_bin = fake_ssh.home / "bin"
    calls = tmp_path / "sbatch-calls"
    (remote_bin / "nrl-launch").write_text(
        f'#!/bin/bash\nexec {sys.executable} -m nrl_launch "$@"\n'
    )
    (remote_bin / "sbatch").write_text(f'#!/bin/bash\necho "$*" >> {calls}\necho 77\n')
    (remote_bin / "sbatch").chmod(0o755)
    proj = git_project(tmp_path)
    monkeypatch.chdir(proj)
    bad.setup(tmp_path)
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(bad_job(tmp_path, bad)))
    local = _errors(cli("submit", "-f", str(job_file)).err)
    assert any(line.startswith(bad.refusal) for line in local), local

    result = cli("--remote", "dev", "submit", "-f", str(job_file))
    assert result.code == 2, result.out + result.err
    (copy,) = (fake_ssh.home / "code").iterdir()
    there = [_where_said(line.replace(str(copy), str(proj))) for line in _errors(result.err)]
    assert there == [_where_said(line) for line in local]
    assert not calls.exists()  # nothing queued
    records = {p.name for p in (tmp_path / "state").rglob("*.json")}
    assert records == {"checked.json"}  # the install check's memo; no job record, here or there
    assert not list(tmp_path.rglob("code-snapshots"))
    if (tmp_path / "precious").exists():
        assert (tmp_path / "precious" / "keep.txt").read_text() == "mine\n"
