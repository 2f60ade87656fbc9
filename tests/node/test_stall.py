"""driver.stall_min in a real bash: the head's watch on the driver ends a run whose driver
prints nothing for that long as "stalled", naming its last line and when it came, and leaves
a driver that keeps printing alone (node/stall.sh)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from nrl_launch.backends import lepton, local, slurm
from tests.helpers import spec

STALLED = re.compile(
    r"stalled: no driver output for (?P<min>[0-9.]+) min; "
    r"the last line, at (?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): (?P<line>.*)\n"
)


def _functions(stall_min: float | None) -> str:
    """Every definition of a rendered script with driver.stall_min set (or not)."""
    driver: dict[str, object] = {"command": ["python", "x.py"]}
    if stall_min is not None:
        driver["stall_min"] = stall_min
    script = slurm.plan(spec(driver=driver)).script
    return script[: script.rindex("\ncase ${1:-} in")]


def _bash(
    functions: str, probe: str, log_dir: Path, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", functions + "\nset -euo pipefail\n" + probe],
        capture_output=True,
        text=True,
        env={"PATH": path or os.environ["PATH"], "NRL_LOG_DIR": str(log_dir)},
        timeout=120,
        check=False,
    )


def test_the_stall_limit_is_rendered_in_minutes_and_whole_seconds() -> None:
    assert "NRL_DRIVER_STALL_MIN=0.05\nNRL_DRIVER_STALL_S=3\n" in _functions(0.05)
    assert "NRL_DRIVER_STALL_MIN=30\nNRL_DRIVER_STALL_S=1800\n" in _functions(30)
    assert 'NRL_DRIVER_STALL_MIN="" NRL_DRIVER_STALL_S=""\n' in _functions(None)


@pytest.mark.parametrize("backend", [local, lepton], ids=["local", "lepton"])
def test_every_ray_backend_watches_for_stalls(backend: object) -> None:
    script = backend.plan(spec(driver={"command": ["x"], "stall_min": 0.05})).script  # type: ignore[attr-defined]
    assert "NRL_DRIVER_STALL_S=3\n" in script
    assert 'watch_driver "$NRL_DRIVER_PID"' in script


def test_a_driver_that_prints_then_hangs_ends_as_stalled_naming_its_last_line(
    tmp_path: Path,
) -> None:
    """The driver prints two steps, then nothing: once 3 s (0.05 min) pass with no output, the
    watch writes ENDED and returns while the driver still runs (run_driver then stops it). The
    looks start no process: nothing is on PATH."""
    empty = tmp_path / "bin"
    empty.mkdir()
    probe = (
        "{ printf 'step 1 done\\n'; printf 'step 2 done\\n\\n'; exec sleep 600; } "
        '>>"$NRL_LOG_DIR/ray-driver.log" & driver=$!\n'
        "start=$SECONDS\n"
        f'PATH={empty} watch_driver "$driver"\n'
        'echo "after=$((SECONDS - start))"\n'
        'kill -0 "$driver" && echo alive\n'
        'kill "$driver"\n'
    )
    started = time.time()
    done = _bash(_functions(0.05), probe, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "alive" in done.stdout
    after = int(done.stdout.split("after=")[1].split()[0])
    assert 3 <= after <= 30
    ended = STALLED.fullmatch((tmp_path / "ENDED").read_text())
    assert ended, (tmp_path / "ENDED").read_text()
    assert ended["min"] == "0.05"
    assert ended["line"] == "step 2 done"
    at = time.mktime(time.strptime(ended["at"], "%Y-%m-%d %H:%M:%S"))
    assert started - 2 <= at <= started + 10


def test_a_driver_that_keeps_printing_is_never_stalled(tmp_path: Path) -> None:
    """Output every 0.5 s for 6 s, twice the limit: the watch returns when the driver exits,
    with no ENDED."""
    probe = (
        "for k in $(seq 12); do echo step $k; sleep 0.5; done "
        '>>"$NRL_LOG_DIR/ray-driver.log" & driver=$!\n'
        'watch_driver "$driver"\n'
        'kill -0 "$driver" 2>/dev/null && echo alive || echo exited\n'
    )
    done = _bash(_functions(0.05), probe, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "exited\n"
    assert not (tmp_path / "ENDED").exists()


def test_without_a_limit_a_silent_driver_is_watched_until_it_exits(tmp_path: Path) -> None:
    probe = 'sleep 4 & driver=$!\nwatch_driver "$driver"\nkill -0 "$driver" 2>/dev/null || echo 1\n'
    done = _bash(_functions(None), probe, tmp_path)
    assert done.stdout == "1\n", done.stderr
    assert not (tmp_path / "ENDED").exists()


def test_a_driver_that_never_prints_is_stalled_from_its_start(tmp_path: Path) -> None:
    probe = 'sleep 600 & driver=$!\nwatch_driver "$driver"\nkill "$driver"\n'
    done = _bash(_functions(0.05), probe, tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"stalled: no driver output for 0\.05 min; it printed nothing since it started at "
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n",
        (tmp_path / "ENDED").read_text(),
    )


@pytest.mark.parametrize(
    ("output", "line"),
    [
        # A progress bar's updates: the last one.
        (b"loading\n 10%|#  |\r 50%|##  |\r 90%|### |", " 90%|### |"),
        # Control characters (colours, a bell, a NUL) go; a tab is a space; a UTF-8 one stays.
        (
            b"\x1b[31mstep 7\x07 \xc3\xa9t\xc3\xa9\x00\tloss 0.1\x1b[0m\n\n  \n",
            "[31mstep 7 été loss 0.1[0m",
        ),
        # CRLF line ends.
        (b"a\r\nb\r\n", "b"),
        # A long line is cut.
        (b"x" * 5000 + b"\n", "x" * 300 + "..."),
        # A long output: its last line.
        (b"".join(b"step %d\n" % k for k in range(20000)), "step 19999"),
    ],
)
def test_the_cause_names_the_last_line_cleanly(tmp_path: Path, output: bytes, line: str) -> None:
    (tmp_path / "out").write_bytes(output)
    probe = (
        'exec {fd}<"$NRL_LOG_DIR/out"; NRL_DRIVER_TAIL=""; driver_printed "$fd"\n'
        'printf "%s" "$(stall_cause 0)"\n'
    )
    done = subprocess.run(
        ["bash", "-c", _functions(0.05) + "\nset -euo pipefail\n" + probe],
        capture_output=True,
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": str(tmp_path), "LANG": "C.UTF-8"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cause = done.stdout.decode()
    assert cause.startswith("stalled: no driver output for 0.05 min; the last line, at ")
    assert cause.split(": ", 2)[2] == line
