"""`list` (and `status` with no JOBID) across clusters: this machine's jobs, and for every
cluster it has submitted to (or the one --remote names) that cluster's own `list --json`, over
ONE ssh per cluster, all at once; one table with a CLUSTER column ("here": this machine). A
cluster that cannot be reached is one warning, and the jobs submitted to it from here show as
UNKNOWN. The cluster's list is shown as it is: every job its nrl-launch has a record of.

This machine's jobs come from the API (api.tracking) and the job layer, as `status` has them:
nothing here imports the CLI, which imports this."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from nrl_launch import output
from nrl_launch.api import tracking
from nrl_launch.errors import RemoteError
from nrl_launch.jobs import query
from nrl_launch.remote import profiles, records, ssh
from nrl_launch.remote.profiles import Remote

if TYPE_CHECKING:
    pass

__all__ = ["merge", "show"]

HERE = "here"


def show(command: str, args: Sequence[str], remote: Remote | None) -> int:
    environ = os.environ
    if remote is not None:
        clusters = {remote.name: remote}
    else:
        known = profiles.load(environ)
        clusters = {n: known.get(n, r) for n, r in records.clusters(environ).items()}
    with ThreadPoolExecutor(max_workers=max(1, len(clusters))) as pool:
        asked = {name: pool.submit(_ask, r) for name, r in clusters.items()}
        local = tracking.records()
        here = [
            r.model_dump(mode="json") | {"status": s.as_json()}
            for r, s in zip(local, query.overview(local), strict=True)
        ]
        answers = {name: future.result() for name, future in asked.items()}
    for name, answer in answers.items():
        if isinstance(answer, str):
            output.warn(f"{answer}; its jobs show as UNKNOWN")
            answers[name] = [_unknown(job) for job in records.jobs_of(name, environ)]
    jobs = merge(here, {n: a for n, a in answers.items() if isinstance(a, list)})
    if "--json" in args:
        output.emit_json(command, {"jobs": jobs})
    else:
        output.table(
            ["CLUSTER", "JOBID", "NAME", "NODES", "STATE", "SUBMITTED", "DETAIL"],
            [_row(job) for job in jobs],
        )
    return 0


def _ask(remote: Remote) -> list[dict[str, Any]] | str:
    """The cluster's jobs, or why they could not be had (one line)."""
    try:
        code, out = ssh.run(
            remote, ssh.command_line(remote, ["list", "--json"]), capture=True, quiet_stderr=True
        )
        if code != 0:
            return f"remote {remote.name}: nrl-launch list failed there (exit {code})"
        jobs = json.loads(out).get("jobs")
    except RemoteError as exc:
        return exc.message
    except ValueError:
        return f"remote {remote.name}: nrl-launch list --json printed no JSON object"
    return [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []


def merge(
    here: list[dict[str, Any]], remote: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Every job with its "remote" (None: this machine's), newest first."""
    jobs = [job | {"remote": None} for job in here]
    jobs += [job | {"remote": name} for name, found in remote.items() for job in found]
    return sorted(jobs, key=lambda j: -float(j.get("submitted_at") or 0))


def _unknown(job: records.RemoteJob) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "job_name": "",
        "nodes": None,
        "submitted_at": job.submitted_at,
        "log_dir": job.log_dir,
        "status": {"phase": "UNKNOWN", "detail": f"{job.remote.host} could not be reached"},
    }


def _row(job: dict[str, Any]) -> list[str]:
    status = job.get("status") or {}
    submitted = float(job.get("submitted_at") or 0)
    return [
        job["remote"] or HERE,
        str(job.get("job_id", "")),
        str(job.get("job_name") or ""),
        str(job.get("nodes") or ""),
        str(status.get("phase", "UNKNOWN")),
        time.strftime("%Y-%m-%d %H:%M", time.localtime(submitted)) if submitted else "",
        str(status.get("detail", "")),
    ]
