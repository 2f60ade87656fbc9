"""`nrl-launch doctor`: check that the job fits the cluster before it is queued."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch import backends, output
from nrl_launch.backends import rules
from nrl_launch.cli.options import ALL_OPTIONS, SUBMIT_ONLY, JobFlags, job_command
from nrl_launch.errors import CheckFailedError, ConfigError, UsageError
from nrl_launch.spec.setting import DEFAULT, Setting

if TYPE_CHECKING:
    from nrl_launch.doctor import Check
    from nrl_launch.spec.layers import Resolved

EXAMPLES = """\
Examples:
  nrl-launch doctor -f examples/grpo-2node.yaml
  nrl-launch doctor -f examples/grpo-2node.yaml --on-nodes     # also on the job's nodes
"""


_LABELS = {"ok": "ok", "warn": "warn", "fail": "FAIL"}


@job_command(ALL_OPTIONS - SUBMIT_ONLY)
def doctor(
    on_nodes: Annotated[
        bool,
        typer.Option(
            "--on-nodes",
            help="Also run a short probe job on the job's nodes: GPUs, then the setup command, "
            "Ray and the shared dirs as the job sees them (in its container, if it has one).",
        ),
    ] = False,
    probe_timeout: Annotated[
        int,
        typer.Option(
            "--probe-timeout",
            min=1,
            help="Seconds to wait for the probe job (queue time included); then it is cancelled.",
            metavar="SECONDS",
        ),
    ] = 300,
    *,
    flags: JobFlags,  # the job options (job_command): here in --help, --json and CMD last
) -> None:
    """Check the job against the cluster: Slurm, partition, account, nodes, GPUs, container,
    mounts, and the log and cache dirs. Exits 6 when a check fails; nothing is queued (except
    the probe job of --on-nodes)."""
    # The checks (jinja2 for the probe job) and the spec's reader (yaml) load when doctor runs,
    # not for its --help (tests/doctor/test_doctor.py).
    from nrl_launch.api import checks as submit_checks
    from nrl_launch.doctor import Check, local_checks, settings
    from nrl_launch.doctor import on_nodes as probing
    from nrl_launch.nemorl.job import prepare

    resolved = _resolve(flags)
    time_limited = backends.time_limited(resolved.spec.backend)
    prepared = prepare(resolved, time_limited=time_limited, backend_rules=rules.check, check=False)
    spec = prepared.spec
    if on_nodes and not backends.get(spec.backend).slurm_cluster:
        raise UsageError(f"--on-nodes runs a Slurm job: it needs backend slurm, not {spec.backend}")
    used = settings(resolved, on_nodes=on_nodes)
    if not flags.json:
        _print_settings(used)
    found: list[Check] = []

    def show(check: Check) -> None:
        found.append(check)
        if not flags.json:
            output.emit_text(f"{_LABELS[check.status]:<4}  {check.name}: {check.detail}")

    cwd = Path.cwd()
    # What submit's own checks before the queue (`api.checks`) would refuse the job for, each
    # a failed check of doctor's; of what they only warn about, the log base's (doctor has no
    # check of its own for it); the rest submit says when it runs.
    before_queue = [
        Check(f.key, "fail" if f.error else "warn", f.message.removeprefix(f.key).lstrip(": "))
        for name, group in submit_checks.checks(prepared.spec, prepared.problems)
        for f in group
        if f.error or name == "logs.base_dir"
    ]
    for check in local_checks(spec, cwd, resolved.sources, before_queue):
        show(check)
    if on_nodes and any(c.failed for c in found):
        show(Check("on nodes", "warn", "not run: fix the failed checks above first"))
    elif on_nodes:
        for check in probing.probe_nodes(spec, cwd, probe_timeout, _progress(not flags.json)):
            show(check)
    failed = [c for c in found if c.failed]
    if flags.json:
        output.emit_json(
            "doctor",
            {
                "checks": [{"name": c.name, "status": c.status, "detail": c.detail} for c in found],
                "settings": {k: {"value": v, "source": s} for k, v, s in used},
            },
            ok=not failed,
        )
    if failed:
        raise CheckFailedError(f"doctor: {_count(len(failed), 'check')} failed: {_names(failed)}")
    if not flags.json:
        warned = sum(c.status == "warn" for c in found)
        also = f" ({_count(warned, 'warning')})" if warned else ""
        output.emit_text(f"\nAll {_count(len(found), 'check')} passed{also}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(failed: list[Check], most: int = 6) -> str:
    """The failed checks' names, a few of them: on 32 nodes one problem may fail 32 lines."""
    names = list(dict.fromkeys(c.name for c in failed))
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _print_settings(used: list[tuple[str, Any, str]]) -> None:
    output.emit_text("Settings")
    for key, value, source in used:
        origin = "default" if source == DEFAULT else f"from {source}"
        output.emit_text(f"  {key} = {_shown(value)}  ({origin})")
    output.emit_text("")


def _resolve(flags: JobFlags) -> Resolved:
    """The spec; doctor needs no driver, so a spec without one is checked as an interactive
    job (a driver given by the user, in a file or after --, is kept)."""
    try:
        return flags.resolve()
    except ConfigError as exc:
        if not any(p.startswith("driver.command is not set") for p in exc.problems):
            raise
    return flags.resolve(base=[Setting("interactive", True, "doctor")])


def _shown(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "(none)"
    return str(value)


def _progress(text: bool) -> Callable[[str], None]:
    """Where the probe job stands while doctor waits for it (text output only)."""

    def say(message: str) -> None:
        if text:
            output.emit_text(f"wait  {message}")

    return say
