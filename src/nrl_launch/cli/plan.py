"""`nrl-launch plan`: the allocation a NeMo RL config needs and where its GPUs go. No cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nrl_launch import output
from nrl_launch.cli.options import ALL_OPTIONS, SUBMIT_ONLY, JobFlags, job_command
from nrl_launch.cli.sweep_options import Sweep, SweepFile
from nrl_launch.errors import ConfigError, UsageError
from nrl_launch.jobs import cost
from nrl_launch.shell import join
from nrl_launch.spec.pools import slices

if TYPE_CHECKING:
    from nrl_launch.api.specs import Plan
    from nrl_launch.nemorl.layout import Layout, NodeRole
    from nrl_launch.spec import LaunchSpec

EXAMPLES = """\
Examples:
  nrl-launch plan --config examples/tiny-rl/examples/configs/grpo_tiny.yaml
  nrl-launch plan --config examples/tiny-rl/examples/configs/grpo_tiny.yaml cluster.gpus_per_node=4
"""


@job_command(ALL_OPTIONS - SUBMIT_ONLY)
def plan(
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
    sweep: Sweep = None,
    sweep_file: SweepFile = None,
) -> None:
    """Print the Slurm allocation a NeMo RL config needs and its per-node GPU layout.

    nrl-launch plan --config recipe.yaml [OVERRIDES ...]: exit 0 when the config fits the job,
    2 with one line per problem when it does not. The job's flags and files (--nodes, -f,
    the profile) are checked against it too. A driver command (-- uv run examples/run_grpo.py
    --config FILE OVERRIDES, or ray.sub's COMMAND) is planned with the config and overrides it
    runs.
    """
    if sweep or sweep_file:  # every point of the grid, each with its verdict
        # A sweep's planning (its queueing core) loads for a sweep alone.
        from nrl_launch.cli import sweep as sweeps

        return sweeps.plan(flags, sweeps.Grid(tuple(sweep or ()), sweep_file))

    # The spec's reader (yaml) loads when plan runs, not for its --help (test_imports.py).
    from nrl_launch.api import specs

    planned = specs.plan_of(
        specs.spec_of(flags.prepare(check=False, need_driver=False, notes=False))
    )
    if planned.layout is None and planned.unchecked:
        raise UsageError(f"{planned.unchecked}: run plan where it is, or give --config FILE")
    if planned.layout is None:
        raise UsageError(
            "--config FILE: plan needs a NeMo RL config (or a driver command that gives one "
            "--config, e.g. ray.sub's COMMAND)"
        )
    failed = ConfigError(list(planned.problems)) if planned.problems else None
    if flags.json:
        data = planned.as_dict()
        if planned.spec.launch.backend == "slurm":
            data["gpu_hours"] = cost.gpu_hours_asked(planned.spec.launch)
        if failed is not None:  # as every command's error object has them (cli.main)
            data |= {"exit_code": int(failed.exit_code), "errors": list(planned.problems)}
        output.emit_json("plan", data, ok=failed is None)
    elif planned.layout.cluster_nodes:  # without its nodes and GPUs there is no allocation
        output.emit_text(_as_text(planned, planned.layout))
    if failed is not None:
        raise failed


def _as_text(planned: Plan, layout: Layout) -> str:
    overrides, spec = planned.overrides, planned.spec.launch
    total = layout.nodes * layout.gpus_per_node
    gpu_nodes = f"{layout.nodes} node(s) x {layout.gpus_per_node} GPU(s) = {total} GPU(s)"
    if spec.ray.dedicated_head:
        # Slurm gives the head the GPUs of every node: say that they are not used.
        gpu_nodes = (
            f"{layout.nodes + 1} Slurm nodes: 1 CPU Ray head (its GPUs idle) + {layout.nodes} "
            f"GPU node(s) x {layout.gpus_per_node} GPU(s) = {total} GPU(s)"
        )
    lines = [
        f"Config:      {planned.config}"
        + (f" + {len(overrides)} override(s)" if overrides else ""),
        f"Allocation:  {gpu_nodes}"
        f" (cluster.num_nodes={layout.cluster_nodes}"
        + "".join(f", + {n} {why}" for n, why in layout.extra_nodes)
        + ")",
    ]
    lines.append(f"Time limit:  {_time_limit(planned)}")
    steps = planned.steps
    lines.append(f"Steps:       {steps[1]} ({steps[0]})" if steps else "Steps:       not set")
    if layout.training:
        lines.append(f"Training:    {layout.training.describe()}")
    if layout.generation:
        lines.append(f"Generation:  {layout.generation.describe()}")
    else:
        lines.append("Generation:  none (every GPU trains)")
    lines += [f"Teacher:     {teacher.describe()}" for teacher in layout.teachers]
    if layout.reward_model:
        lines.append(f"Reward:      {layout.reward_model.describe()} (env.reward_model)")
    lines += ["", f"{'NODE':<6}{'ROLE':<22}{'TRAINING':<10}GENERATION"]
    lines += [
        f"{nodes:<6}{r.role:<22}{r.training_gpus:<10}{r.generation_gpus}"
        for nodes, r in _runs(list(planned.roles))
    ]
    lines += [f"Note:        {note}" for note in planned.spec.notes]
    if spec.backend == "slurm":
        lines.append(cost.asked_line(spec))

    if spec.driver.command:
        lines += ["", f"Driver:      {join(spec.driver.command)}"]
    if sandbox := spec.sandbox:
        lines.append(
            f"Sandbox:     {join(sandbox.command)} on every node, "
            f"{sandbox.image or 'without a container'}; ports {sandbox.ports()}"
        )
    if spec.pools:
        lines += ["", *pool_lines(spec)]
    if planned.refused:  # the config fits or not; submit would refuse the job for these too
        lines += ["", "Submit would refuse it here:"]
        lines += [f"  {line}" for line in planned.refused]
    lines += ["", "Fits." if planned.fits else f"{len(planned.problems)} problem(s):"]
    # Under their header, on stdout too (`plan > plan.txt` keeps them); the error lines on stderr
    # say them again, for the exit code's sake.
    lines += [f"  {problem}" for problem in planned.problems]
    return "\n".join(lines)


def _time_limit(planned: Plan) -> str:
    """The job's time limit as plan shows it, and where it comes from."""
    from nrl_launch import backends

    backend = planned.spec.launch.backend
    if not backends.time_limited(backend):
        return f"none (a {backend} job runs to its end)"
    return f"{planned.time_limit} (slurm.time)" if planned.time_limit else "the partition's default"


def pool_lines(spec: LaunchSpec) -> list[str]:
    """The pools' component and each pool's slice of it, as plan shows them."""
    gpus = spec.slurm.gpus_per_node
    lines = [
        f"Pools:       {spec.pool_nodes} node(s) more, in a second component of the job "
        f"(Slurm hetjob): component 0 trains on {spec.allocated_nodes} node(s)"
    ]
    for name, pool in spec.pools.items():
        mine = [s for s in slices(spec) if s.pool == name]
        first, last = mine[0].first, mine[-1].first + mine[-1].nodes - 1
        per = pool.nodes_per_replica(gpus)
        where = f"pool node {first}" if first == last else f"pool nodes {first}-{last}"
        lines.append(
            f"  {name}: {pool.replicas} replica(s) x {per} node(s) "
            f"({pool.tensor_parallel(gpus)} GPUs each) on {where}; its URL "
            f"http://<head>:{pool.balancer_port}/v1 replaces {pool.placeholder(name)}; "
            + ("required" if pool.required else "optional")
        )
    return lines


def _runs(roles: list[NodeRole]) -> list[tuple[str, NodeRole]]:
    """Nodes with the same role as one row ("0-31"): a 32-node layout stays readable."""
    rows: list[tuple[str, NodeRole]] = []
    start = 0
    for i, role in enumerate(roles):
        last = i + 1 == len(roles)
        if last or (
            roles[i + 1].role,
            roles[i + 1].training_gpus,
            roles[i + 1].generation_gpus,
        ) != (
            role.role,
            role.training_gpus,
            role.generation_gpus,
        ):
            rows.append((str(start) if start == i else f"{start}-{i}", roles[start]))
            start = i + 1
    return rows
