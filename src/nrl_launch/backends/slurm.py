"""Slurm: turn a LaunchSpec into the exact sbatch argv and the job script. Pure: no I/O.

`plan()` is what `render` prints and what `submit` hands to the runner, so a dry run shows
exactly what would be submitted.
"""

from __future__ import annotations

from nrl_launch import __version__
from nrl_launch.backends import Request, batch_output
from nrl_launch.shell import join
from nrl_launch.spec import LaunchSpec
from nrl_launch.templating import render

__all__ = ["DEFAULT_SCRIPT_NAME", "plan"]

DEFAULT_SCRIPT_NAME = "nrl-launch.sbatch"
TEMPLATE = "slurm.sbatch.j2"


def gpu_flag(spec: LaunchSpec) -> str | None:
    """How this cluster wants GPUs asked for, on sbatch and on every srun step."""
    count, style = spec.slurm.gpus_per_node, spec.slurm.gpu_request
    if count == 0 or style == "none":
        return None
    return f"--gres=gpu:{count}" if style == "gres" else f"--gpus-per-node={count}"


def sbatch_flags(spec: LaunchSpec) -> list[str]:
    """The scheduling flags, sorted so that the same spec always renders the same argv."""
    s = spec.slurm
    flags = [
        f"--job-name={s.job_name}",
        f"--nodes={s.nodes}",
        "--ntasks-per-node=1",
        f"--time={s.time}",
        # Secrets travel by name, in the environment sbatch exports: never leave it to a
        # site default such as SBATCH_EXPORT=NONE.
        "--export=ALL",
        # The log dir is made by the job itself, so sbatch's own output goes next to it.
        f"--output={spec.logs.base_dir}/{batch_output('slurm', '%j')}",
    ]
    optional = {
        "--account": s.account,
        "--partition": s.partition,
        "--qos": s.qos,
        "--reservation": s.reservation,
        "--exclude": s.exclude,
        "--dependency": s.dependency,
        "--cpus-per-task": s.cpus_per_node,
    }
    flags += [f"{flag}={value}" for flag, value in optional.items() if value is not None]
    if s.exclusive:
        flags.append("--exclusive")
    gpus = gpu_flag(spec)
    if gpus:
        flags.append(gpus)
    return sorted(flags)


def container_mounts(spec: LaunchSpec) -> list[str]:
    """The user's mounts, then each shared cache the container would not see otherwise."""
    mounts = [str(m) for m in spec.container.mounts]
    seen = [m.dst.rstrip("/") for m in spec.container.mounts]
    hidden = [
        r for r in spec.caches.roots() if not any(r == d or r.startswith(d + "/") for d in seen)
    ]
    return mounts + [f"{root}:{root}" for root in hidden]


def plan(spec: LaunchSpec, script_path: str = DEFAULT_SCRIPT_NAME) -> Request:
    """The sbatch request for `spec`; `script_path` is where the script will be written."""
    # Extra args go last, in the user's order: they may be a flag followed by its value.
    argv = ("sbatch", "--parsable", *sbatch_flags(spec), *spec.slurm.extra_args, script_path)
    script = render(
        TEMPLATE,
        spec=spec,
        ray=True,
        version=__version__,
        submit_command=join(argv),
        gpu_flag=gpu_flag(spec),
        mounts=",".join(container_mounts(spec)),
        spec_json=spec.model_dump_json(),
    )
    return Request(argv=argv, script=script)
