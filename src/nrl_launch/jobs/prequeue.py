"""What the login side checks of a job before it is queued, that `launch` (run, pull) and the
API's checks before the queue (`api/checks.py`) both say: its log base, and its secrets."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from nrl_launch import trust
from nrl_launch.container_image import Finding
from nrl_launch.spec import LaunchSpec

__all__ = ["log_base_findings", "secret_findings"]


def secret_findings(spec: LaunchSpec, environ: Mapping[str, str]) -> list[Finding]:
    """Secrets travel by name in the environment sbatch exports: a required one missing here
    is an error now, before anything is queued, not minutes later on a node; an optional one
    missing, a warning. Only names are said, never a value."""
    missing = [name for name in spec.required_secrets if not environ.get(name)]
    # Over --remote (a laptop's nrl-launch ran this one): the secret is the cluster's to set.
    where = (
        "the environment of your ssh sessions on this cluster (secrets are read where sbatch "
        "runs and never copied from the laptop: set it there, e.g. in ~/.bashrc)"
        if environ.get("NRL_LAUNCH_FORWARDED")
        else "this shell"
    )
    found = [
        Finding(
            f"secrets.{name}",
            f"secrets.{name}: {name} is not set in {where} and the job requires it: "
            f"export it first, or mark it optional (--set secrets.{name}=optional)",
            error=True,
        )
        for name in missing
    ]
    absent = [name for name in spec.optional_secrets if not environ.get(name)]
    if absent:
        found.append(
            Finding(
                "secrets",
                f"{', '.join(absent)} (optional in secrets) not set in this shell: the job runs "
                "without them",
            )
        )
    return found


def log_base_findings(spec: LaunchSpec, cwd: Path) -> list[Finding]:
    """A logs.base_dir whose log dirs other users could replace or make first is an error; a
    directory above it that belongs to another user, a warning."""
    problem = trust.log_base_problem(spec.logs.base_dir, cwd)
    if problem:
        return [Finding("logs.base_dir", problem, error=True)]
    owner = trust.foreign_owner(cwd / spec.logs.base_dir)
    if not owner:
        return []
    base_dir = spec.logs.base_dir
    shown = base_dir if Path(base_dir).is_absolute() else f"{base_dir} ({cwd / base_dir})"
    return [
        Finding(
            "logs.base_dir",
            f"logs.base_dir {shown}: {owner}, who could replace what is under it (this job's "
            "log dir and its Ray token); use a directory of your own (--log-dir DIR)",
        )
    ]
