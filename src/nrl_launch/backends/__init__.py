"""Backends: each turns a LaunchSpec into a request for one kind of cluster (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec

__all__ = ["Request", "batch_output", "plan"]


@dataclass(frozen=True)
class Request:
    """What `submit` runs: `argv` (sbatch and its flags, or bash, then the script) and the
    script it runs."""

    argv: tuple[str, ...]
    script: str

    @property
    def command_line(self) -> str:
        """`argv` as one bash command line, quoted so that it can be pasted into a shell."""
        return str(join(self.argv))


def batch_output(backend: str, job_id: str) -> str:
    """The name of the job's own output file, beside its log dirs: the batch script's and its
    steps' stdout and stderr (sbatch --output on Slurm), where pyxis and enroot say why a
    container did not start. `job_id` may be Slurm's `%j`."""
    return f"{job_id}.out" if backend == "local" else f"slurm-{job_id}.out"


def plan(spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID") -> Request:
    """The request for `spec` on its backend; `script_path` is where the script will be."""
    if spec.backend == "local":
        from nrl_launch.backends import local

        return local.plan(spec, script_path or local.DEFAULT_SCRIPT_NAME, job_id)
    from nrl_launch.backends import slurm

    return slurm.plan(spec, script_path or slurm.DEFAULT_SCRIPT_NAME)
