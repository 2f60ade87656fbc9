"""`nrl-launch doctor`: check that the job fits the cluster before it is queued."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nrl_launch import output
from nrl_launch.cli.options import ALL_OPTIONS, SUBMIT_ONLY, JobFlags, job_command
from nrl_launch.errors import CheckFailedError, ConfigError, UsageError

if TYPE_CHECKING:
    from nrl_launch.doctor import Check
    from nrl_launch.nemorl.job import Prepared
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
    from nrl_launch import backends
    from nrl_launch import doctor as checks

    resolved = _resolve(flags)
    prepared = _prepared(resolved)
    spec = prepared.spec
    if on_nodes and not backends.get(spec.backend).slurm_cluster:
        raise UsageError(f"--on-nodes runs a Slurm job: it needs backend slurm, not {spec.backend}")
    used = checks.settings(resolved, on_nodes=on_nodes)
    if not flags.json:
        _print_settings(used)
    found: list[Check] = []

    def show(check: Check) -> None:
        found.append(check)
        if not flags.json:
            output.emit_text(f"{_LABELS[check.status]:<4}  {check.name}: {check.detail}")

    cwd = Path.cwd()
    for check in checks.local_checks(spec, cwd, resolved.sources, _before_queue(prepared)):
        show(check)
    if on_nodes and any(c.failed for c in found):
        show(checks.Check("on nodes", "warn", "not run: fix the failed checks above first"))
    elif on_nodes:
        from nrl_launch.doctor.on_nodes import probe_nodes

        for check in probe_nodes(spec, cwd, probe_timeout, _progress(not flags.json)):
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
    from nrl_launch.spec.layers import DEFAULT  # loaded already: the spec was resolved

    output.emit_text("Settings")
    for key, value, source in used:
        origin = "default" if source == DEFAULT else f"from {source}"
        output.emit_text(f"  {key} = {_shown(value)}  ({origin})")
    output.emit_text("")


def _resolve(flags: JobFlags) -> Resolved:
    """The spec; doctor needs no driver, so a spec without one is checked as an interactive
    job (a driver given by the user, in a file or after --, is kept)."""
    from nrl_launch.spec import layers

    try:
        return flags.resolve()
    except ConfigError as exc:
        if not any(p.startswith("driver.command is not set") for p in exc.problems):
            raise
    return flags.resolve(base=[layers.Setting("interactive", True, "doctor")])


def _prepared(resolved: Resolved) -> Prepared:
    """The spec as submit would queue it: sized by its NeMo RL config, whose problems are
    kept (not raised: doctor reports them as checks)."""
    from nrl_launch import backends
    from nrl_launch.backends import rules
    from nrl_launch.nemorl.job import prepare

    time_limited = backends.time_limited(resolved.spec.backend)
    return prepare(resolved, time_limited=time_limited, backend_rules=rules.check, check=False)


def _before_queue(prepared: Prepared) -> list[Check]:
    """What submit's own checks before the queue (`api.checks`, the ones submit refuses a
    job for) find, as doctor's checks: an error fails, a warning warns (what they pass, the
    checks doctor runs of its own say)."""
    from nrl_launch.api import checks as submit_checks
    from nrl_launch.doctor import Check

    return [
        Check(f.key, "fail" if f.error else "warn", f.message.removeprefix(f.key).lstrip(": "))
        for _, group in submit_checks.checks(prepared.spec, prepared.problems)
        for f in group
    ]


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
