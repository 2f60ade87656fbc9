"""The error tree and the exit codes it maps to: the only place exit codes are decided.

Every failure the user can cause or fix is an `NrlLaunchError`; the CLI prints its message as one
line (no traceback unless --debug) and exits with its code. Anything else is a bug: exit 1.
"""

from __future__ import annotations

import enum

__all__ = [
    "CheckFailedError",
    "ConfigError",
    "ExitCode",
    "JobNotFoundError",
    "JobNotRunningError",
    "NrlLaunchError",
    "RemoteError",
    "SchedulerError",
    "StateError",
    "UnconfirmedSubmitError",
    "UnreadableRecordError",
    "UsageError",
]


@enum.unique
class ExitCode(enum.IntEnum):
    """Exit codes of every nrl-launch command (documented in docs/exit-codes.md)."""

    OK = 0
    INTERNAL = 1  # a bug in nrl-launch; rerun with --debug and report it
    BAD_INPUT = 2  # a flag, a file or a value in the job spec is wrong; nothing was written
    SCHEDULER = 3  # sbatch, squeue, scancel... failed or could not be run; their stderr is shown
    NOT_FOUND = 4  # no record of that job id
    NOT_RUNNING = 5  # the job is not in a state that allows this (pending, or already ended)
    CHECK_FAILED = 6  # doctor: a check failed (its line says which and why)
    REMOTE = 7  # --remote: ssh to the cluster failed, or nrl-launch is not installed there
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class NrlLaunchError(Exception):
    """Base of every error that is reported to the user as one line."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(NrlLaunchError):
    """A command-line flag or argument is wrong."""

    exit_code = ExitCode.BAD_INPUT


class ConfigError(NrlLaunchError):
    """The job spec (profile, job file, environment, flags, --set) is invalid.

    Holds one line per problem, each naming the key, the value given, where it came from and
    what is accepted.
    """

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class SchedulerError(NrlLaunchError):
    """A scheduler command failed; the message carries the command and its stderr."""

    exit_code = ExitCode.SCHEDULER

    @classmethod
    def from_process(cls, argv: list[str], returncode: int, stderr: str) -> SchedulerError:
        detail = " ".join(stderr.split()) or "no error output"
        return cls(f"{argv[0]} failed (exit {returncode}): {detail}")


class UnconfirmedSubmitError(SchedulerError):
    """The scheduler took the request but gave no job id back: a job may be queued, so what
    it will write to stays."""


class JobNotFoundError(NrlLaunchError):
    """No job record for the id given."""

    exit_code = ExitCode.NOT_FOUND


class UnreadableRecordError(JobNotFoundError):
    """The job's record exists but cannot be read (not JSON, a wrong shape, a newer schema):
    as good as no record, and the line says why and where it is. Not a bug: exit 4."""


class UntrustedLogError(JobNotFoundError):
    """The job's log dir, or a file in it that nrl-launch would read or run, is not the user's
    own: another user could have written it. As good as no log dir: exit 4."""


class JobNotRunningError(NrlLaunchError):
    """The job is pending or has ended: there is nothing to attach to, stop or open."""

    exit_code = ExitCode.NOT_RUNNING


class CheckFailedError(NrlLaunchError):
    """doctor found a problem: the job would not run as specified (each check printed its line)."""

    exit_code = ExitCode.CHECK_FAILED


class RemoteError(NrlLaunchError):
    """A remote cluster (--remote) cannot be reached over ssh, or has no nrl-launch to run."""

    exit_code = ExitCode.REMOTE


class StateError(NrlLaunchError):
    """nrl-launch's own state (job records) cannot be read or written."""

    exit_code = ExitCode.INTERNAL
