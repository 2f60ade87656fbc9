"""Every check made before a job is queued, once: `queueing.queue` refuses what they find,
`render` what they find without looking at this machine's files, `plan` and `doctor` report
it all. Each finding names its key: an error refuses the job, a warning is said."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from nrl_launch import backends, container_checks, output
from nrl_launch.container_image import Finding
from nrl_launch.jobs.prequeue import log_base_findings, secret_findings
from nrl_launch.spec import LaunchSpec
from nrl_launch.spec.sandbox import sandbox_mount_problems

__all__ = ["FROZEN_GIVEN", "checks", "findings", "refuse", "shape_checks"]

# What `driver.frozen` says when it is given: only `queue` sets it, from a copy it made.
FROZEN_GIVEN = (
    "driver.frozen: set by submit when it freezes the driver's code, never given (a job file, "
    "--set, or a record's spec re-submitted): drop it; --no-snapshot runs the checkout as it is"
)


def checks(
    spec: LaunchSpec,
    problems: Sequence[str] = (),
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    on_host: bool = True,
) -> list[tuple[str, list[Finding]]]:
    """Every check made before `spec` is queued (from `cwd`, with the secrets of `environ`),
    by name, each with what it found: errors refuse the job, warnings are said. `problems`:
    where its NeMo RL config does not fit (errors unless nemo_rl.check is false). Without
    `on_host` (render: a dry run, in CI too), only what the spec itself shows is checked, not
    this machine's files nor its secrets."""
    cwd = Path.cwd() if cwd is None else cwd
    environ = os.environ if environ is None else environ
    backend = backends.traits(spec.backend)
    config_error = spec.nemo_rl.check
    containers = container_checks.all_findings(
        spec, backend=backend, on_host=on_host, environ=environ
    )
    found = [
        *shape_checks(spec, cwd, environ),
        ("nemo_rl", [Finding("nemo_rl", p, error=config_error) for p in problems]),
        ("container", [Finding(f.key, f.message, f.error and config_error) for f in containers]),
    ]
    if backend.shares_files and on_host:  # else the log dir is on the backend's storage
        found.append(("logs.base_dir", log_base_findings(spec, cwd)))
    if backend.secrets_from_shell and on_host:
        found.append(("secrets", secret_findings(spec, environ)))
    return found


def shape_checks(
    spec: LaunchSpec, cwd: Path, environ: Mapping[str, str] | None = None
) -> list[tuple[str, list[Finding]]]:
    """The checks of what the spec itself says, whatever the machine: its frozen code (never
    given) and its sandbox's mounts (never the log dirs nor the state dir, as `environ` places
    it). Loading a spec refuses these first, before anything is said about it
    (`specs.resolve`)."""
    environ = os.environ if environ is None else environ
    frozen = [Finding("driver.frozen", FROZEN_GIVEN, error=True)] if spec.driver.frozen else []
    exposed = sandbox_mount_problems(spec, cwd, environ)
    return [
        ("driver", frozen),
        ("sandbox.mounts", [Finding("sandbox.mounts", line, error=True) for line in exposed]),
    ]


def findings(
    spec: LaunchSpec, problems: Sequence[str] = (), *, on_host: bool = True
) -> list[Finding]:
    """What `checks` found, errors first, each once."""
    found = [f for _, group in checks(spec, problems, on_host=on_host) for f in group]
    return list(dict.fromkeys(sorted(found, key=lambda f: not f.error)))


def refuse(found: Sequence[Finding], label: str = "") -> list[str]:
    """The error lines among `found` (prefixed by `label`, a sweep's point), and each warning
    said once; nothing is said when there are errors (they come first, alone)."""
    errors = [f"{label}: {f.message}" if label else f.message for f in found if f.error]
    if not errors:
        for finding in found:
            output.warn(finding.message)
    return errors
