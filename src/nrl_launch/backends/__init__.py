"""Backends: where a job runs. Each is one module behind the small `Backend` protocol.

A backend plans (renders) the request for a spec, submits it, describes its jobs, cancels them,
names the node its Ray head runs on and the file its own output goes to. `plan` is pure; the
others talk to the scheduler through `runner`. Nothing else branches on a backend's name:
`get(spec.backend)` (or a record's) is how the CLI and `jobs/` reach one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nrl_launch.backends.base import (
    Backend,
    JobRef,
    Phase,
    Request,
    SchedulerView,
    Submitted,
    state_phase,
)

if TYPE_CHECKING:
    from nrl_launch.spec import LaunchSpec

__all__ = [
    "Backend",
    "JobRef",
    "Phase",
    "Request",
    "SchedulerView",
    "Submitted",
    "Traits",
    "containers",
    "get",
    "plan",
    "state_phase",
    "time_limited",
    "traits",
]


def _slurm() -> Backend:
    # Each backend's module loads when it is asked for: its templates (jinja2) stay off plan.
    from nrl_launch.backends.slurm import BACKEND

    return BACKEND


def _local() -> Backend:
    # As _slurm: loaded when asked for (a local job's templates, jinja2).
    from nrl_launch.backends.local import BACKEND

    return BACKEND


def _lepton() -> Backend:
    # As _slurm: loaded when asked for (Lepton's templates; its SDK loads inside it).
    from nrl_launch.backends.lepton import BACKEND

    return BACKEND


# Each backend, by the name the spec and the records give it; its module loads when asked for.
_BACKENDS: dict[str, Callable[[], Backend]] = {
    "slurm": _slurm,
    "local": _local,
    "lepton": _lepton,
}


# The backends whose jobs end at a time limit (slurm.time), before which NeMo RL must save: known
# without loading their modules (plan and render must stay light).
_TIME_LIMITED = frozenset(["slurm"])


def time_limited(name: str) -> bool:
    """Whether backend `name`'s jobs end at a time limit (slurm.time)."""
    return name in _TIME_LIMITED


def get(name: str) -> Backend:
    """The backend called `name` (as the spec and the records name it)."""
    return _BACKENDS[name]()


def plan(spec: LaunchSpec, script_path: str | None = None, job_id: str = "JOBID") -> Request:
    """The request for `spec` on its backend; `script_path` is where the script will be."""
    return get(spec.backend).plan(spec, script_path, job_id)


# The backends that can run a job in a container; the others run none, whatever a profile says.
_CONTAINERS = frozenset(["slurm", "lepton"])


def containers(name: str) -> bool:
    """Whether backend `name` can run a job in a container (known without loading it)."""
    return name in _CONTAINERS


@dataclass(frozen=True)
class Traits:
    """What the checks before the queue need to know of a backend, known without loading its
    module (plan and doctor stay light): its `Backend` attributes of the same names."""

    slurm_cluster: bool
    shares_files: bool
    secrets_from_shell: bool


_TRAITS = {
    "slurm": Traits(slurm_cluster=True, shares_files=True, secrets_from_shell=True),
    "local": Traits(slurm_cluster=False, shares_files=True, secrets_from_shell=True),
    "lepton": Traits(slurm_cluster=False, shares_files=False, secrets_from_shell=False),
}


def traits(name: str) -> Traits:
    """Backend `name`'s traits (known without loading it)."""
    return _TRAITS[name]
