"""The Python API page (docs/api.md), run for real as a reader runs it: each ```python block in
a fresh `python` of the reader's shell (the venv activated). The first needs no cluster; the
others submit a job on this machine (the local backend, Ray from the venv) and cancel one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nrl_launch import api
from tests.conftest import REPO, as_reader, doc_blocks, doc_page, readme_shell_env, wait_until


def python_blocks() -> list[str]:
    """The ```python blocks of the Python API page, in order."""
    return doc_blocks(doc_page("from nrl_launch import api"), "python")


def run_as_reader(code: str, cwd: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = readme_shell_env() | {"NRL_LAUNCH_STATE_DIR": str(state)}
    return subprocess.run(
        as_reader(["python - <<'README_EOF'", code.rstrip(), "README_EOF"]),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_api_page_has_three_examples() -> None:
    assert len(python_blocks()) == 3


def test_load_plan_render_runs_with_no_cluster(tmp_path: Path) -> None:
    ran = run_as_reader(python_blocks()[0], REPO, tmp_path / "state")
    assert ran.returncode == 0, ran.stderr
    fits, script = ran.stdout.split("\n", 1)
    assert fits == "True 1 2"
    assert script.startswith("#!/usr/bin/env bash\n") and "examples/run_grpo.py" in script
    assert not (tmp_path / "state").exists()  # nothing recorded, nothing written


def test_submit_wait_logs_then_cancel_run_here(
    ray_venv: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Block 2 submits and follows a job; block 3 lists the jobs and cancels the one still
    going: an interactive job, submitted through the API between them (a local job takes the
    machine's Ray ports: one at a time)."""
    monkeypatch.setenv("PATH", f"{ray_venv}/bin:{os.environ['PATH']}")
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(isolated / "state"))
    (isolated / "examples").symlink_to(REPO / "examples")
    _, submit, cancel = python_blocks()
    ran = run_as_reader(submit, isolated, isolated / "state")
    assert ran.returncode == 0, ran.stderr
    job_id, phase, code, last = ran.stdout.split(maxsplit=3)
    assert (phase, code) == ("COMPLETED", "0") and job_id.startswith("local-")
    assert last.startswith("placed 2 actors, one per GPU")
    interactive = {"backend": "local", "slurm.gpus_per_node": 1, "interactive": True}
    with pytest.warns(api.NrlLaunchWarning, match="HF_TOKEN"):  # optional secrets, unset
        live = api.submit(api.load_spec(settings=interactive))
    try:
        wait_until(lambda: api.status(live).phase is api.Phase.RUNNING)
        ran = run_as_reader(cancel, isolated, isolated / "state")
        assert ran.returncode == 0, ran.stderr
        ended = api.wait(live, timeout=120, poll=1)
    finally:
        if not api.status(live).over:  # never left running
            api.cancel(live)
    listed = [line.split()[:3] for line in ran.stdout.splitlines()]
    assert listed == [[live.job_id, "nrl-launch", "RUNNING"], [job_id, "nrl-launch", "COMPLETED"]]
    assert (ended.phase, ended.detail) == (api.Phase.CANCELLED, "the job was cancelled")
