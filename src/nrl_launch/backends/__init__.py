"""Backends: each turns a LaunchSpec into a request for one kind of cluster (pure)."""

from __future__ import annotations

from typing import Protocol

from nrl_launch.spec import LaunchSpec

__all__ = ["Request", "plan"]


class Request(Protocol):
    """The argv that starts the job and the script it runs."""

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def script(self) -> str: ...

    @property
    def command_line(self) -> str: ...


def plan(spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID") -> Request:
    """The request for `spec` on its backend; `script_path` is where the script will be."""
    if spec.backend == "local":
        from nrl_launch.backends import local

        return local.plan(spec, script_path or local.DEFAULT_SCRIPT_NAME, job_id)
    from nrl_launch.backends import slurm

    return slurm.plan(spec, script_path or slurm.DEFAULT_SCRIPT_NAME)
