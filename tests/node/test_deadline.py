"""The job's end and NeMo RL's save before it (node/deadline.sh), run in a real bash from a
rendered script: the end read from `scontrol show job -o` (captured from Slurm 22.05) or
SLURM_JOB_END_TIME, and what the driver gets when it starts (its argv, the shim, its env)."""

from __future__ import annotations

import stat
import subprocess
import time
from pathlib import Path

from nrl_launch.backends import slurm
from tests.helpers import TEST_DATA, spec

SHOWN = (TEST_DATA / "slurm-22.05" / "scontrol-show-job-completed.txt").read_text()


def _script(**nemo_rl: object) -> str:
    return slurm.plan(spec(nemo_rl={"save_by_job_end": True, **nemo_rl})).script


def _bash(script: str, probe: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", 'source /dev/stdin <<<"$1"\nset -euo pipefail\n' + probe, "bash", script],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "TZ": "UTC", **env},
    )


def test_the_end_is_read_from_scontrol_then_from_slurm_s_env() -> None:
    """EndTime in scontrol's local time (the node's TZ); without it (no scontrol answer, or
    Unknown), SLURM_JOB_END_TIME; without either, nothing."""
    script = slurm.plan(spec()).script
    probe = 'printf "%s|" "$(job_end_epoch "$1")" "$(job_end_epoch "$2")" "$(job_end_epoch "")"'
    done = subprocess.run(
        [
            "bash",
            "-c",
            'source /dev/stdin <<<"$1"\nshift\n' + probe,
            "bash",
            script,
            SHOWN,
            "JobId=1 EndTime=Unknown Deadline=N/A",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "TZ": "UTC", "SLURM_JOB_END_TIME": "1795425000"},
    )
    assert done.returncode == 0, done.stderr
    # EndTime=2026-11-23T09:04:35 (UTC here)
    assert done.stdout == "1795424675|1795425000|1795425000|"
    done = _bash(script, 'printf "[%s]" "$(job_end_epoch "")"', {})
    assert done.stdout == "[]"


def _setup(
    tmp_path: Path, end_in: int, margin_min: int = 3
) -> tuple[list[str], dict[str, str], str]:
    """What save_by_setup gives the driver with the job ending `end_in` s from now: its extra
    argv, the driver's env (save_by_env, in a subshell as run_driver does), and the log."""
    logs = tmp_path / "1-logs"
    logs.mkdir(mode=0o700)
    script = _script(checkpoint_margin_min=margin_min, timer_class="tiny_rl.timer:TimeoutChecker")
    probe = (
        'save_by_setup >"$NRL_LOG_DIR/said"\n'
        'printf "%s\\0" "${NRL_SAVE_BY_ARGS[@]}" >"$NRL_LOG_DIR/argv"\n'
        '(save_by_env && env -0 >"$NRL_LOG_DIR/env")\n'
    )
    env = {
        "NRL_LOG_DIR": str(logs),
        "NRL_JOB_END_EPOCH": str(int(time.time()) + end_in),
        "PYTHONPATH": "/img/site",
    }
    done = _bash(script, probe, env)
    assert done.returncode == 0, done.stderr
    argv = (logs / "argv").read_text().split("\0")[:-1]
    driver_env = dict(x.split("=", 1) for x in (logs / "env").read_text().split("\0")[:-1])
    return argv, driver_env, (logs / "said").read_text()


def _seconds(value: str) -> int:
    d, h, m, s = (int(p) for p in value.split(":"))
    return ((d * 24 + h) * 60 + m) * 60 + s


def test_the_driver_gets_the_time_left_less_the_margin_and_the_shim(tmp_path: Path) -> None:
    argv, env, said = _setup(tmp_path, end_in=2 * 3600)
    (arg,) = argv
    key, value = arg.split("=")
    assert key == "++checkpointing.checkpoint_must_save_by"
    # 2 h less 3 min, less the second or two this took.
    assert 2 * 3600 - 180 - 30 <= _seconds(value) <= 2 * 3600 - 180
    shim = tmp_path / "1-logs" / "save-by"
    assert env["PYTHONPATH"] == f"{shim}:/img/site"
    assert env["NRL_TIMER_CLASS"] == "tiny_rl.timer:TimeoutChecker"
    assert abs(int(env["NRL_SAVE_BY_EPOCH"]) - (time.time() + 2 * 3600 - 180)) < 30
    assert stat.S_IMODE(shim.stat().st_mode) == 0o700
    assert stat.S_IMODE((shim / "sitecustomize.py").stat().st_mode) & 0o077 == 0
    source = (Path(slurm.__file__).parents[1] / "node" / "save_by_shim.py").read_text()
    assert (shim / "sitecustomize.py").read_text() == source
    assert "NeMo RL saves by " in said and "++checkpointing.checkpoint_must_save_by=" in said


def test_a_job_ending_within_the_margin_saves_at_once(tmp_path: Path) -> None:
    argv, _, said = _setup(tmp_path, end_in=60)
    assert argv == ["++checkpointing.checkpoint_must_save_by=00:00:00:00"]
    assert "within the 180 s save margin" in said


def test_without_a_known_end_the_driver_runs_as_given(tmp_path: Path) -> None:
    logs = tmp_path / "1-logs"
    logs.mkdir(mode=0o700)
    probe = (
        'save_by_setup\nprintf "[%s]" "${NRL_SAVE_BY_ARGS[@]}"\n'
        '(save_by_env && printf "{%s}" "${PYTHONPATH:-}")\n'
    )
    done = _bash(_script(), probe, {"NRL_LOG_DIR": str(logs)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("[]{}")
    assert "the job's end time is not known" in done.stdout
    assert not (logs / "save-by").exists()


def test_a_job_that_does_not_manage_the_deadline_changes_nothing(tmp_path: Path) -> None:
    script = slurm.plan(spec()).script
    assert "NRL_SAVE_MARGIN_S" not in script.split("# ---- nrl-launch node program")[0]
    logs = tmp_path / "1-logs"
    logs.mkdir(mode=0o700)
    probe = 'save_by_setup\nprintf "[%s]" "${NRL_SAVE_BY_ARGS[@]}"\n'
    env = {"NRL_LOG_DIR": str(logs), "NRL_JOB_END_EPOCH": str(int(time.time()) + 3600)}
    done = _bash(script, probe, env)
    assert (done.returncode, done.stdout) == (0, "[]")
    assert list(logs.iterdir()) == []
