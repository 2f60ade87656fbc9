"""The only module that runs other programs (sbatch, squeue, sacct, scontrol, scancel, srun).

Everything else builds argv lists and parses text; tests put fake programs first on PATH for
unit tests and use the real dev cluster for integration tests.
"""

from __future__ import annotations

import os
import subprocess  # noqa: TID251 - this module is the one place that may
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NoReturn

from nrl_launch.errors import SchedulerError

__all__ = ["Completed", "Piped", "become", "run", "spawn"]

# A scheduler command that hangs (slurmctld down, an RPC storm) must not hang the CLI.
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


def run(
    argv: list[str],
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
    umask: int = -1,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run `argv` (never through a shell) and capture its output; with `umask`, under it (sbatch
    hands its umask to the job: the files Slurm makes for it, such as its output, get it); with
    `env`, in that environment instead of this process's.

    Raises:
        SchedulerError: the program is missing, timed out, or (with `check`) exited non-zero.
    """
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            umask=umask,
            env=env,
        )
    except FileNotFoundError:
        raise SchedulerError(
            f"{argv[0]}: command not found (is Slurm installed on this machine?)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SchedulerError(f"{argv[0]} did not answer within {timeout:.0f} s") from None
    done = Completed(proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise SchedulerError.from_process(argv, proc.returncode, proc.stderr)
    return done


def spawn(argv: list[str], *, cwd: Path, output: Path, env: dict[str, str] | None = None) -> int:
    """Start `argv` in the background with stdout and stderr appended to `output`; returns its
    pid. It runs in a session of its own, as a grandchild of this process: it outlives the CLI
    and a Ctrl-C, and init reaps it. With `env`, in that environment instead of this process's."""
    launcher = 'out=$1; shift; setsid "$@" >>"$out" 2>&1 </dev/null & echo $!'
    done = run(["bash", "-c", launcher, "nrl-launch", str(output), *argv], cwd=cwd, env=env)
    return int(done.stdout.strip())


class Piped:
    """`argv` running with its stdout read by the caller as bytes come (`read`; with
    `stdout=False` it has none) and its stderr passed on line by
    line to `on_stderr` from a thread of its own; stdin from `stdin` (a file), else nothing.
    For ssh (remote clusters): output streamed as it comes, ssh's own last error line kept."""

    def __init__(
        self,
        argv: list[str],
        *,
        on_stderr: Callable[[str], None],
        stdout: bool = True,
        stdin: BinaryIO | None = None,
    ) -> None:
        import threading  # stdlib, for a streamed run only: not at `import nrl_launch.api`

        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            raise SchedulerError(f"{argv[0]}: command not found") from None
        assert self._proc.stderr is not None
        self._errors = threading.Thread(
            target=self._pass_stderr, args=(self._proc.stderr, on_stderr), daemon=True
        )
        self._errors.start()

    @staticmethod
    def _pass_stderr(stream: BinaryIO, on_stderr: Callable[[str], None]) -> None:
        for line in stream:
            on_stderr(line.decode("utf-8", errors="replace"))

    def read(self) -> bytes:
        """The next bytes of its stdout as they come; b"" once it has closed it."""
        assert self._proc.stdout is not None
        return os.read(self._proc.stdout.fileno(), 65536)

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self) -> int:
        """Its exit code, once it has ended and all its stderr has been passed on."""
        code = self._proc.wait()
        self._errors.join()
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def stop(self) -> int:
        """End it (SIGTERM) and wait for it."""
        if self._proc.poll() is None:
            self._proc.terminate()
        return self.wait()


def become(argv: list[str], env: dict[str, str]) -> NoReturn:
    """Replace this process with `argv` run in `env` (attach): the terminal, Ctrl-C and the
    exit code are the program's own, with no Python in between."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        raise SchedulerError(f"cannot run {argv[0]}: {exc.strerror}") from None
