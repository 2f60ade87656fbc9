"""The driver's start-up shim (node/save_by_shim.py), as the job runs it: written as
sitecustomize.py, first on PYTHONPATH of a real Python, against a timer module made here with
NeMo RL's TimeoutChecker's attributes (start_time, last_save_time)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from nrl_launch import node

SHIM = Path(node.__file__).parent / "save_by_shim.py"

# NeMo RL's timer as far as the shim sees it: the deadline counts from when it is built.
TIMER = """
import time

class TimeoutChecker:
    def __init__(self, timeout=None, fit_last_save_time=False):
        self.last_save_time = float("inf") if timeout is None else float(timeout)
        self.start_time = time.time()
"""

# Builds the timer 30 s "into" the run (its own config value: 3600 s after that) and prints
# the seconds after its start by which it saves.
PROBE = """
import fakerl.utils.timer as t
checker = t.TimeoutChecker(timeout=3600)
print("LAST", checker.last_save_time, "START", checker.start_time)
"""


def _tree(tmp_path: Path, timer: str = TIMER) -> Path:
    """A project with the package fakerl.utils.timer; the shim's dir beside it."""
    pkg = tmp_path / "proj" / "fakerl" / "utils"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "fakerl" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "timer.py").write_text(timer)
    shim = tmp_path / "save-by"
    shim.mkdir(mode=0o700)
    (shim / "sitecustomize.py").write_text(SHIM.read_text())
    return shim


def _run(
    tmp_path: Path, env: dict[str, str], probe: str = PROBE, extra_path: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    shim = tmp_path / "save-by"
    path = ":".join(str(p) for p in (shim, *extra_path, tmp_path / "proj"))
    return subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path, **env},
    )


def _last(out: str) -> tuple[float, float]:
    words = next(line for line in out.splitlines() if line.startswith("LAST")).split()
    return float(words[1]), float(words[3])


def _shim_env(save_by: float, timer: str = "TimeoutChecker") -> dict[str, str]:
    """The driver's environment for the shim: save by `save_by`, with fakerl's `timer`."""
    return {"NRL_SAVE_BY_EPOCH": str(save_by), "NRL_TIMER_CLASS": f"fakerl.utils.timer:{timer}"}


def test_the_timer_saves_by_the_job_s_end_whatever_the_setup_took(tmp_path: Path) -> None:
    """The config says 3600 s after the timer starts; the job must save 100 s from now: the
    timer is cut to that, counted from its own start, and one line says so."""
    _tree(tmp_path)
    save_by = time.time() + 100
    env = _shim_env(save_by)
    done = _run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    last, start = _last(done.stdout)
    assert abs(start + last - save_by) < 1e-3
    (line,) = done.stderr.splitlines()
    assert line.startswith("nrl-launch: fakerl.utils.timer:TimeoutChecker saves by ")


def test_a_later_job_end_leaves_an_earlier_config_value(tmp_path: Path) -> None:
    _tree(tmp_path)
    env = _shim_env(time.time() + 86400)
    done = _run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert _last(done.stdout)[0] == 3600


def test_without_its_env_the_shim_does_nothing(tmp_path: Path) -> None:
    _tree(tmp_path)
    done = _run(tmp_path, {"NRL_TIMER_CLASS": "fakerl.utils.timer:TimeoutChecker"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert _last(done.stdout)[0] == 3600


def test_it_runs_the_sitecustomize_it_hides(tmp_path: Path) -> None:
    """An image's or venv's own sitecustomize, further on sys.path, still runs (once), with
    and without the shim's env."""
    _tree(tmp_path)
    other = tmp_path / "venv-site"
    other.mkdir()
    (other / "sitecustomize.py").write_text(
        "import os\nos.environ['OTHER_SITE'] = 'ran'\nprint('OTHER')\n"
    )
    probe = (
        PROBE
        + "import os, sitecustomize\n"
        + "print('SITE', os.environ.get('OTHER_SITE'), sitecustomize.__file__)\n"
    )
    for env in (
        {},
        _shim_env(time.time() + 100),
    ):
        done = _run(tmp_path, env, probe, extra_path=(other,))
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("OTHER\n") == 1
        assert f"SITE ran {other / 'sitecustomize.py'}" in done.stdout


def test_a_timer_class_that_is_not_there_is_one_warning(tmp_path: Path) -> None:
    """A fork without the class: one warning line; the driver runs on with its config value."""
    _tree(tmp_path)
    env = _shim_env(time.time() + 100, "Gone")
    done = _run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert _last(done.stdout)[0] == 3600
    (line,) = done.stderr.splitlines()
    assert line.startswith("nrl-launch: warning: fakerl.utils.timer:Gone is not a class in ")


def test_a_timer_without_the_attributes_is_one_warning(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        "class TimeoutChecker:\n    def __init__(self, timeout=None):\n        self.t = timeout\n",
    )
    env = _shim_env(time.time() + 100)
    probe = "import fakerl.utils.timer as t\nprint('T', t.TimeoutChecker(timeout=5).t)\n"
    done = _run(tmp_path, env, probe)
    assert done.returncode == 0, done.stderr
    assert "T 5" in done.stdout
    (line,) = done.stderr.splitlines()
    assert "has no start_time/last_save_time" in line and line.startswith("nrl-launch: warning:")


def test_a_timer_module_that_fails_to_import_fails_as_without_the_shim(tmp_path: Path) -> None:
    """The shim adds nothing to an import error of the timer's own."""
    _tree(tmp_path, "raise ImportError('broken timer')\n")
    env = _shim_env(time.time() + 100)
    done = _run(tmp_path, env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "ImportError: broken timer"
