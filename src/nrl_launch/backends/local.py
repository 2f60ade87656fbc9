"""The local backend: the same bring-up on this machine, as a one-node cluster. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from nrl_launch import __version__
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["DEFAULT_SCRIPT_NAME", "LocalRequest", "plan"]

DEFAULT_SCRIPT_NAME = "nrl-launch.sh"
TEMPLATE = "local.sh.j2"


@dataclass(frozen=True)
class LocalRequest:
    """What `submit --backend local` runs: `argv` (bash, the script, the job id) and the script."""

    argv: tuple[str, ...]
    script: str

    @property
    def command_line(self) -> str:
        return str(join(self.argv))


def plan(
    spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME, job_id: str = "JOBID"
) -> LocalRequest:
    argv = ("bash", script_path, job_id)
    script = render(
        TEMPLATE,
        spec=spec,
        version=__version__,
        run_command=join(argv),
        spec_json=spec.model_dump_json(),
    )
    return LocalRequest(argv=argv, script=script)
