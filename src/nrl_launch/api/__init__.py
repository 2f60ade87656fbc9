"""The Python API: what the CLI does, as functions a script can call.

    from nrl_launch import api

    spec = api.load_spec("job.yaml", settings={"slurm.nodes": 2})
    print(api.plan(spec).fits, api.render(spec))
    job = api.submit(spec)
    print(api.wait(job).phase, api.logs(job, tail=20))

Every function is the one the CLI's command runs (`load_spec` is the layering of `-f`, the
profile, the environment and `--set`; `submit` is `nrl-launch submit`'s core), so a job queued
here is listed, followed and cancelled by the CLI, and the other way round.

Errors: a problem the user can fix raises an `NrlLaunchError` (the CLI's error tree): its
`message` holds one line per problem, and its `exit_code` is the code the CLI exits with.
Warnings: nothing here prints. What the CLI would warn about is a Python warning of category
`NrlLaunchWarning` (`warnings.catch_warnings`/`filterwarnings` decide what happens to it); what
it would note (a value it derived) is an `NrlLaunchNote`, which Python shows once per place by
default.

Promise: the names in `__all__`, their parameters and the fields of the objects they return
follow semantic versioning (a field may be added in a minor release; none goes or changes
meaning before a major one). `Job` is the job record (`nrl_launch.jobs.record.JobRecord`) and
`Status` the status `nrl-launch status --json` prints (`nrl_launch.jobs.status.JobStatus`).
Importing this module loads neither Ray nor any cloud SDK, nor pydantic: each name below loads
its module when first used (`__getattr__`, the API's one lazy place).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nrl_launch.api.quiet import NrlLaunchNote, NrlLaunchWarning
from nrl_launch.errors import (
    ConfigError,
    ExitCode,
    JobNotFoundError,
    JobNotRunningError,
    NrlLaunchError,
    SchedulerError,
    UsageError,
)

if TYPE_CHECKING:
    from nrl_launch.api.functions import (
        cancel,
        follow,
        job,
        jobs,
        load_spec,
        logs,
        plan,
        render,
        status,
        statuses,
        submit,
        submit_sweep,
        wait,
    )
    from nrl_launch.api.specs import Plan, Spec
    from nrl_launch.backends.base import Phase
    from nrl_launch.jobs.record import JobRecord as Job
    from nrl_launch.jobs.status import JobStatus as Status

__all__ = [
    "ConfigError",
    "ExitCode",
    "Job",
    "JobNotFoundError",
    "JobNotRunningError",
    "NrlLaunchError",
    "NrlLaunchNote",
    "NrlLaunchWarning",
    "Phase",
    "Plan",
    "SchedulerError",
    "Spec",
    "Status",
    "UsageError",
    "cancel",
    "follow",
    "job",
    "jobs",
    "load_spec",
    "logs",
    "plan",
    "render",
    "status",
    "statuses",
    "submit",
    "submit_sweep",
    "wait",
]

_FUNCTIONS = "nrl_launch.api.functions"
# Where each name that loads pydantic lives, and its name there.
_WHERE: dict[str, tuple[str, str]] = {
    # The functions: __all__'s lower-case names.
    **{name: (_FUNCTIONS, name) for name in __all__ if name[0].islower()},
    "Spec": ("nrl_launch.api.specs", "Spec"),
    "Plan": ("nrl_launch.api.specs", "Plan"),
    "Job": ("nrl_launch.jobs.record", "JobRecord"),
    "Status": ("nrl_launch.jobs.status", "JobStatus"),
    "Phase": ("nrl_launch.backends.base", "Phase"),
}


def __getattr__(name: str) -> Any:
    """A function or class of the API, its module loaded when it is first asked for."""
    try:
        module, attribute = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # asked once: later uses find it here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
