"""The local backend: the same bring-up on this machine, as a one-node cluster. Pure: no I/O."""

from __future__ import annotations

from nrl_launch import __version__
from nrl_launch.backends import Request
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["DEFAULT_SCRIPT_NAME", "plan"]

DEFAULT_SCRIPT_NAME = "nrl-launch.sh"
TEMPLATE = "local.sh.j2"


def plan(
    spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME, job_id: str = "JOBID"
) -> Request:
    argv = ("bash", script_path, job_id)
    script = render(
        TEMPLATE,
        spec=spec,
        ray=True,
        version=__version__,
        run_command=join(argv),
        spec_json=spec.model_dump_json(),
    )
    return Request(argv=argv, script=script)
