"""The retries' node part (node/retries.sh), run in a real bash from a rendered script with fake
squeue, scontrol and scancel: which causes another try can fix, what the batch step does about
it as a try ends, and what a spare does when it starts."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from nrl_launch.backends import slurm
from tests.conftest import OTHER_UID
from tests.helpers import spec

SCRIPT = slurm.plan(spec()).script


def _bash(probe: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", 'source /dev/stdin <<<"$1"\n' + probe, "bash", SCRIPT],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def _verdict(rc: int, ended: str, state: str = "RUNNING", ran: str = "") -> list[str]:
    probe = f"retry_verdict {rc} {_q(ended)} {_q(state)} {_q(ran)} 600"
    found = _bash(probe, {})
    assert found.returncode == 0, found.stderr
    return found.stdout.rstrip("\n").split("|", 2)


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


STOPPED = "Slurm stopped the job (cancelled, time limit, requeue or preemption)"
NODE_STOPPED = "Slurm stopped node node1 (job cancelled, time limit, requeue or preemption)"
RAY_LOST = "Ray on node node2 exited (code 1) while the job was running"
NO_JOIN = "worker node3 could not join the Ray head at 10.0.0.1:6379 (10 attempts)"
WORKERS = "a worker step ended (exit 9) while the head was running; see ray-worker-*.log"
NO_SECRET = "the secret HF_TOKEN is not in the job's environment on node 1 (node1)"


@pytest.mark.parametrize(
    ("rc", "ended", "state", "ran", "verdict", "node"),
    [
        (0, "driver exited with code 0", "RUNNING", "900", "done", ""),
        (1, RAY_LOST, "", "", "retry", "node2"),
        (1, "the Ray head on node0 exited", "", "", "retry", "node0"),
        (1, NO_JOIN, "", "", "retry", "node3"),
        (1, "stalled: no step in 1800 s", "", "", "retry", ""),
        (1, WORKERS, "", "", "retry", ""),
        # the driver's own error: in its first 600 s, not retried; later, retried
        (3, "driver exited with code 3", "RUNNING", "5", "stop", ""),
        (3, "driver exited with code 3", "RUNNING", "601", "retry", ""),
        # Slurm stopped it: which way, Slurm's state says
        (143, STOPPED, "CANCELLED", "", "stop", ""),
        (143, STOPPED, "COMPLETING", "", "stop", ""),  # a scancel, as the batch step sees it
        (143, NODE_STOPPED, "TIMEOUT", "", "retry", ""),
        (143, STOPPED, "NODE_FAIL", "", "retry", ""),
        (143, STOPPED, "PREEMPTED", "", "retry", ""),
        # bring-up and config errors every try would hit
        (1, "the setup command failed on node 0 (node0)", "", "", "stop", ""),
        (1, NO_SECRET, "", "", "stop", ""),
        (1, "the driver ran longer than ray.timeouts.driver_s=60s", "", "", "stop", ""),
    ],
)
def test_which_causes_another_try_can_fix(
    rc: int, ended: str, state: str, ran: str, verdict: str, node: str
) -> None:
    found = _verdict(rc, ended, state, ran)
    assert found[:2] == [verdict, node], found


def _fakes(
    tmp_path: Path, pending: str, state: str, excluded: str = "(null)", components: str = "1"
) -> Path:
    """squeue lists `pending` (id|name|dependency lines); scontrol shows job 100 in `state`
    with ExcNodeList `excluded`, a line per component (a heterogeneous job's pool component
    shows other values); every call is logged to calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    bodies = {
        "squeue": f"printf '%s' {_q(pending)}",
        "scontrol": (
            '[[ $1 == show ]] && printf "JobId=%s JobName=j JobState=%s ExcNodeList=%s\\n" '
            f'"$4" {_q(state)} {_q(excluded)} && for ((k = 1; k < {components}; k++)); do '
            'printf "JobId=%s JobName=j JobState=PENDING ExcNodeList=other\\n" "$4"; done; exit 0'
        ),
        "scancel": "exit 0",
    }
    for name, body in bodies.items():
        (bin_dir / name).write_text(f'#!/bin/bash\necho "{name} $*" >>{calls}\n{body}\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _decide(tmp_path: Path, ended: str, rc: int, pending: str, **kw: str) -> tuple[str, list[str]]:
    log_dir = tmp_path / "100-logs"
    log_dir.mkdir()
    (log_dir / "ENDED").write_text(ended + "\n")
    started = time.time() - 5  # the driver started 5 s ago
    (log_dir / "timeline").write_text(f"submitted 1\nstarted 2\ndriver_started {started}\n")
    bin_dir = _fakes(
        tmp_path,
        pending,
        kw.get("state", "RUNNING"),
        kw.get("excluded", "(null)"),
        kw.get("components", "1"),
    )
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "NRL_LOG_DIR": str(log_dir),
        "NRL_RETRY": kw.get("retry", "1 3 - 600"),
        "SLURM_JOB_ID": "100",
        "SLURM_JOB_NAME": "j",
    }
    done = _bash(f"retry_decide {rc}", env)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    return (log_dir / "RETRY").read_text(), [
        c for c in calls if not c.startswith(("squeue", "scontrol show"))
    ]


# Try 1 of 3 (job 100); 101 waits on it, 102 on 101; 99 is another job of the user's.
PENDING = (
    "101|j|afternotok:100(unfulfilled)\n102|j|afternotok:101(unfulfilled)\n"
    "99|k|afternotok:98(unfulfilled)\n"
)


def test_a_lost_node_is_kept_from_the_next_try(tmp_path: Path) -> None:
    why = "Ray on node node1 exited (code 1) while the job was running"
    verdict, acted = _decide(tmp_path, why, 1, PENDING, excluded="node3")
    assert verdict == f"retry|node1|{why}\n"
    # the nodes this try was kept off (slurm.exclude, or an earlier try's) stay excluded
    assert acted == ["scontrol update JobId=101 ExcNodeList=node3,node1"]


def test_a_heterogeneous_try_is_one_try_whose_next_is_kept_off_the_node(tmp_path: Path) -> None:
    """With pools: squeue lists each try once per component (<id>+<offset>) and scontrol shows
    a line per component; the next try is still the next job, kept off the node as one."""
    pending = "".join(
        f"{job}+{k}|j|afternotok:{job - 1}(unfulfilled)\n" for job in (101, 102) for k in (0, 1)
    )
    why = "Ray on node node1 exited (code 1) while the job was running"
    verdict, acted = _decide(tmp_path, why, 1, pending, excluded="node3", components="2")
    assert verdict == f"retry|node1|{why}\n"
    assert acted == ["scontrol update JobId=101 ExcNodeList=node3,node1"]


def test_success_cancels_the_spares_that_afternotok_would_leave_pending(tmp_path: Path) -> None:
    verdict, acted = _decide(tmp_path, "driver exited with code 0", 0, PENDING)
    assert verdict.startswith("done|")
    assert acted == ["scancel 101 102"]


def test_a_driver_that_fails_at_once_is_not_retried(tmp_path: Path) -> None:
    verdict, acted = _decide(tmp_path, "driver exited with code 3", 3, PENDING)
    assert verdict.startswith("stop||not retried: ")
    assert acted == ["scancel 101 102"]


def test_the_last_try_says_no_tries_are_left(tmp_path: Path) -> None:
    why = "Ray on node node1 exited (code 1) while the job was running"
    verdict, acted = _decide(tmp_path, why, 1, "", retry="3 3 101 600")
    assert verdict == f"retry|node1|{why}; no tries left (3 of 3 used)\n"
    assert acted == []


def test_a_job_that_is_no_try_decides_nothing(tmp_path: Path) -> None:
    log_dir = tmp_path / "1-logs"
    log_dir.mkdir()
    done = _bash("retry_decide 1", {"NRL_LOG_DIR": str(log_dir), "NRL_RETRY": ""})
    assert done.returncode == 0, done.stderr
    assert not (log_dir / "RETRY").exists()


def _start_try_2(tmp_path: Path, base: Path) -> subprocess.CompletedProcess[str]:
    """Try 2 (job 101) of 3, submitted from `base`, checking try 1 (job 100) as it starts;
    job 102, the spare after it, waits on it. Prints going-on if the try goes on."""
    bin_dir = _fakes(tmp_path, "102|j|afternotok:101(unfulfilled)\n", "RUNNING")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_SUBMIT_DIR": str(base),
        "NRL_RETRY": "2 3 100 600",
        "SLURM_JOB_ID": "101",
        "SLURM_JOB_NAME": "j",
    }
    return _bash("retry_check_previous; echo going-on", env)


def _spare(
    tmp_path: Path, verdict: str | None, ended: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Try 2 (job 101) starting after try 1 (job 100), whose verdict is `verdict` and whose
    ENDED says `ended`."""
    base = tmp_path / "submit"  # the job's logs.base_dir is ".", the dir it was submitted from
    (base / "100-logs").mkdir(parents=True)
    if verdict is not None:
        (base / "100-logs" / "RETRY").write_text(verdict + "\n")
    if ended is not None:
        (base / "100-logs" / "ENDED").write_text(ended + "\n")
    return _start_try_2(tmp_path, base)


def test_a_spare_after_a_try_that_said_stop_ends_at_once(tmp_path: Path) -> None:
    done = _spare(tmp_path, "stop||not retried: the try was cancelled")
    assert done.returncode == 0
    assert "going-on" not in done.stdout
    assert "try 2/3 does not run: try 1 (job 100) not retried: the try was cancelled" in done.stdout
    assert "scancel 102" in (tmp_path / "calls").read_text()


def test_a_spare_after_a_try_that_could_not_say_goes_on(tmp_path: Path) -> None:
    done = _spare(tmp_path, None)
    assert done.returncode == 0
    assert "going-on" in done.stdout
    assert "it left no verdict" in done.stdout


def test_a_spare_decides_for_a_try_that_ended_but_could_not_decide(tmp_path: Path) -> None:
    """Try 1 wrote ENDED, then its first node died before its batch step wrote a verdict."""
    done = _spare(tmp_path, None, "the setup command failed on node 1 (node1)")
    assert "going-on" not in done.stdout
    assert "try 1 (job 100) not retried: the setup command failed" in done.stdout


def test_a_spare_goes_on_after_a_try_whose_end_another_try_can_fix(tmp_path: Path) -> None:
    done = _spare(tmp_path, None, RAY_LOST)
    assert "going-on" in done.stdout
    assert f"try 1 (job 100) ended: {RAY_LOST}" in done.stdout


# ---- A restart dir another user planted (a log base with the sticky bit lets them) ----

PWNED = "driver_started 1+BASH_VERSINFO[$(id>{out})0]\n"


def _planted_spare(tmp_path: Path, plant: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Try 2 (job 101) starting after try 1 (job 100), which ended retryable and went on; in the
    sticky, world-writable log base, another user (OTHER_UID) made `plant`: a newer run's dir,
    or try 1's own dir, holding a verdict to stop and a timeline whose number is code."""
    base = tmp_path / "submit"
    base.mkdir(mode=0o1777)
    base.chmod(0o1777)
    out = tmp_path / "pwned"
    if plant != "100-logs":
        (base / "100-logs").mkdir(mode=0o700)
        (base / "100-logs" / "ENDED").write_text(RAY_LOST + "\n")
    theirs = base / plant
    theirs.mkdir()
    (theirs / "ENDED").write_text("the setup command failed on node 1 (node1)\n")
    (theirs / "timeline").write_text(PWNED.format(out=out))
    if plant.endswith("-9-logs"):
        (theirs / "RETRY").write_text("stop||not retried: forged\n")
    for path in (theirs, *theirs.iterdir()):
        os.chown(path, OTHER_UID, OTHER_UID)
    return _start_try_2(tmp_path, base), out


@pytest.mark.parametrize("plant", ["100-9-logs", "100-2-logs", "100-logs"])
def test_a_restart_dir_another_user_planted_is_not_read(tmp_path: Path, plant: str) -> None:
    """Its forged verdict does not cancel the spare tries, and its timeline runs nothing."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a dir to another user")
    done, pwned = _planted_spare(tmp_path, plant)
    assert done.returncode == 0, done.stderr
    assert "going-on" in done.stdout
    assert not pwned.exists()
    assert "scancel" not in _calls(tmp_path)


def test_a_verdict_through_a_symlink_is_not_read(tmp_path: Path) -> None:
    """Try 1's own dir, whose RETRY is a link to a file of another's: not read."""
    forged = tmp_path / "forged"
    forged.write_text("stop||not retried: forged\n")
    base = tmp_path / "submit"
    (base / "100-logs").mkdir(parents=True)
    (base / "100-logs" / "RETRY").symlink_to(forged)
    done = _start_try_2(tmp_path, base)
    assert "going-on" in done.stdout
    assert "scancel" not in _calls(tmp_path)


def _calls(tmp_path: Path) -> str:
    calls = tmp_path / "calls"
    return calls.read_text() if calls.exists() else ""


@pytest.mark.parametrize("field", ["driver_started", "driver_ended"])
def test_a_timeline_number_is_never_run_as_code(tmp_path: Path, field: str) -> None:
    """A timeline value is a number or nothing: bash's arithmetic would run a $(...) in it."""
    log_dir = tmp_path / "100-logs"
    log_dir.mkdir()
    out = tmp_path / "pwned"
    code = f"1+BASH_VERSINFO[$(id>{out})0]"
    started = code if field == "driver_started" else "1000.5"
    ended = code if field == "driver_ended" else "1005.5"
    (log_dir / "timeline").write_text(f"driver_started {started}\ndriver_ended {ended}\n")
    bin_dir = _fakes(tmp_path, "", "RUNNING")
    done = _bash(
        f"verdict_of {_q(str(log_dir))} 100 3 600",
        {"PATH": f"{bin_dir}:/usr/bin:/bin", "NRL_LOG_DIR": str(log_dir)},
    )
    assert done.returncode == 0, done.stderr
    assert not out.exists()
