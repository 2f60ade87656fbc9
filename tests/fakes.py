"""Fake Slurm commands for unit tests, alone on PATH: a real sbatch can never be reached.

Every fake logs its argv to `calls` (one line each) before it answers, so a test can assert that
nothing was queued. The fakes are bash scripts named by absolute path (/bin/bash), run with a
PATH that holds nothing else; a test that needs another program links it into the fake bin dir.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

SLURM = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "srun")


class FakeSlurm:
    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.calls_file = bin_dir.parent / "fake-slurm-calls"

    def script(self, name: str, body: str) -> None:
        """`name` runs `body` (bash) after logging its call."""
        path = self.bin_dir / name
        path.write_text(
            "#!/bin/bash\n"
            f'printf "%s\\n" "{name} $*" >>{shlex.quote(str(self.calls_file))}\n' + body + "\n"
        )
        path.chmod(0o755)

    def answer(self, name: str, stdout: str = "", stderr: str = "", code: int = 0) -> None:
        """`name` prints `stdout` and `stderr` and exits with `code`."""
        self.script(
            name,
            f"printf %s {shlex.quote(stdout)}\nprintf %s {shlex.quote(stderr)} >&2\nexit {code}",
        )

    def remove(self, name: str) -> None:
        """`name` is not installed at all."""
        (self.bin_dir / name).unlink(missing_ok=True)

    def link(self, name: str) -> None:
        """Put the real `name` (bash, sleep, ...) on the fake PATH too."""
        real = shutil.which(name)
        assert real is not None, f"{name} is not installed"
        (self.bin_dir / name).symlink_to(real)

    def calls(self, name: str | None = None) -> list[str]:
        lines = self.calls_file.read_text().splitlines() if self.calls_file.exists() else []
        return [c for c in lines if name is None or c.split(" ", 1)[0] == name]


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, alone: bool = True) -> FakeSlurm:
    """Fakes for every Slurm command (each refuses, exit 99, until a test says otherwise), alone
    on PATH (or, without `alone`, first on it), and a state dir of the test's own."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir) if alone else f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(tmp_path / "state"))
    fake = FakeSlurm(bin_dir)
    for name in SLURM:
        fake.answer(name, stderr=f"{name}: not expected in this test", code=99)
    return fake
