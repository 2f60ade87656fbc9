"""Slurm without Ray: one command on every node of a job (`run`, `pull`). Pure: no I/O.

The same sbatch flags, container flags, environment and log dir as the Ray job, from the
same spec; only the job script differs (`plain.sbatch.j2`).
"""

from __future__ import annotations

from nrl_launch import __version__
from nrl_launch.backends import Request
from nrl_launch.backends.slurm import (
    DEFAULT_SCRIPT_NAME,
    container_mounts,
    defaults_taken,
    gpu_flag,
    sbatch_directives,
    sbatch_flags,
    secrets_file,
    withheld,
)
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["DEFAULT_SCRIPT_NAME", "plan"]

TEMPLATE = "plain.sbatch.j2"


def plan(
    spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME, *, remove_first: str | None = None
) -> Request:
    """The sbatch request that runs `spec.driver.command` once per node, without Ray.

    `remove_first` is a file the job removes just before the command starts (pull --force).
    """
    if spec.ray.dedicated_head:
        # No Ray, so no head to give a node of its own: the command runs on slurm.nodes nodes.
        ray = spec.ray.model_copy(update={"dedicated_head": False})
        spec = spec.model_copy(update={"ray": ray})
    flags = sbatch_flags(spec, ray=False)
    argv = ("sbatch", "--parsable", *flags, *spec.slurm.extra_args, script_path)
    secrets = secrets_file(spec, script_path)
    script = render(
        TEMPLATE,
        spec=spec,
        ray=False,
        version=__version__,
        submit_command=join(argv),
        defaults=defaults_taken(spec, ray=False),
        sbatch_directives=sbatch_directives(spec, ray=False),
        gpu_flag=gpu_flag(spec),
        # The caches too, as for a Ray job: the job exports UV_CACHE_DIR, HF_HOME... pointing there.
        mounts=",".join(container_mounts(spec)),
        spec_json=spec.model_dump_json(),
        remove_first=remove_first,
        secrets_file=secrets,
    )
    return Request(argv=argv, script=script, **withheld(spec, secrets))
