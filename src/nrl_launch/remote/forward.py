"""A command given `--remote NAME|HOST` (or naming a job submitted to a remote cluster) runs on
that cluster's login node, through the user's own ssh, by the nrl-launch installed there.

- submit, run: the project is synced first (sync.py); the laptop records the job (records.py).
- render, plan, doctor: in a checkout, synced the same way, and the copy removed afterwards.
- status JOBID, logs, cancel, stop, dashboard, and the rest: forwarded as they are, their
  output passed through and their exit code kept.
- logs -f: reconnects after a dropped connection, where the output stopped (follow.py).
- attach: a terminal through `ssh -t`. dashboard --open: a held tunnel (tunnel.py).
- list, status with no JOBID (and no option but --json): this machine's jobs and every
  cluster's, one ssh per cluster (listing.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nrl_launch import output, runner
from nrl_launch.errors import UsageError
from nrl_launch.remote import follow, listing, profiles, records, ssh, sync, tunnel, words
from nrl_launch.remote.profiles import Remote
from nrl_launch.remote.words import Word

__all__ = ["route", "take_remote"]

# What the forwarder does with a command. Which of its words are options, their values or JOBIDs
# is for the command's own declaration to say (words.py), never a list here.
_SUBMITS = {"submit", "run"}  # sync the project and keep it: the job runs it
_CHECKS = {"render", "plan", "doctor"}  # sync it (a checkout's files), then remove it
_LISTS = {"list", "status"}  # with no JOBID: every cluster's jobs (listing.py)


def take_remote(args: list[str], environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """`--remote X` (or --remote=X) out of the words before `--`; else $NRL_LAUNCH_REMOTE."""
    end = args.index("--") if "--" in args else len(args)
    own, rest, value = [], args[end:], None
    given = iter(args[:end])
    for arg in given:
        if arg == "--remote":
            value = next(given, None)
            if value is None:
                raise UsageError("--remote: expected a remote's name or an ssh destination")
        elif arg.startswith("--remote="):
            value = arg.removeprefix("--remote=")
        else:
            own.append(arg)
    if value is None:
        value = environ.get(profiles.ENV) or None
    if value == "":
        raise UsageError("--remote: expected a remote's name or an ssh destination")
    return value, own + rest


def route(value: str | None, args: list[str], command_of: Callable[[str], Any]) -> int | None:
    """Run `args` (a command line without --remote) on the remote `value` names, or, without
    one, on the cluster a named job was submitted to; None: it runs here. `command_of(NAME)`:
    the CLI's own (click) command NAME, whose options and arguments say what each word is."""
    environ = os.environ
    command = args[0] if args else ""
    typed = words.split(words.Grammar.of(command_of(command)), args[1:])
    ids = words.job_ids(typed)
    # Every cluster's jobs: list and status with no JOBID and no option but --json.
    listed = command in _LISTS and not ids
    listed &= all(w.names == ("--json",) for w in typed if w.kind == "option")
    if value is None:
        if listed and records.clusters(environ):
            return listing.show(command, args[1:], None)
        remote = _remote_of_jobs(ids)
        if remote is None:
            return None
    else:
        remote = profiles.resolve(value, environ)
        ssh.check_installed(remote, environ)
        if listed:
            return listing.show(command, args[1:], remote)
    return _forward(remote, args, typed, ids)


def _remote_of_jobs(ids: Sequence[str]) -> Remote | None:
    """The cluster the named jobs were submitted to from here (jobs recorded here run here)."""
    found = {
        job.remote.name: job.remote
        for job_id in ids
        if not records.local_job(job_id)
        for job in [records.find(job_id, os.environ)]
        if job is not None
    }
    if not found:
        return None
    if len(found) > 1:
        raise UsageError(
            f"the jobs named run on several clusters ({', '.join(sorted(found))}): "
            "one command per cluster, with --remote NAME"
        )
    (name, remote), *_ = found.items()
    return profiles.load(os.environ).get(name, remote)


def _forward(remote: Remote, args: list[str], typed: Sequence[Word], ids: Sequence[str]) -> int:
    command = args[0] if args else ""
    if command in _SUBMITS:
        return _submit(remote, command, typed)
    if command in _CHECKS:
        return _checked(remote, args)
    if command == "attach":
        tty = ["-t"] if sys.stdin.isatty() else []
        line = ssh.command_line(remote, args, announce=False)
        argv = ssh.argv(remote, line, tty=bool(tty))
        runner.become(argv, dict(os.environ))
    if command == "logs" and words.given(typed, "--follow"):
        return follow.follow(remote, typed, ids[0] if ids else "")
    if command == "dashboard" and words.given(typed, "--open"):
        return tunnel.hold(remote, typed, ids[0] if ids else "")
    code, _ = ssh.run(remote, ssh.command_line(remote, args))
    return code


def _checked(remote: Remote, args: list[str]) -> int:
    """render, plan, doctor: in a checkout, against a copy of it on the cluster (the job
    files, profile and NeMo RL config it names), removed once they have run."""
    try:
        project = sync.find_project(Path.cwd(), args[0])
    except UsageError:  # not in a checkout: they run in the remote's home, as given
        code, _ = ssh.run(remote, ssh.command_line(remote, args))
        return code
    there = sync.upload(remote, project)
    line = ssh.command_line(
        remote,
        sync.rewrite(args, project.root, there),
        cwd=_in(there, project),
        after=f"rm -rf {ssh.word(there)}",
    )
    code, _ = ssh.run(remote, line)
    return code


def _in(there: str, project: sync.Project) -> str:
    rel = project.cwd.as_posix()
    return there if rel == "." else f"{there}/{rel}"


def _submit(remote: Remote, command: str, typed: Sequence[Word]) -> int:
    """Sync the checkout, submit from its copy (the remote prints --json), record the job
    here, print what local submit prints; with --wait, follow it there. The remote submit
    freezes the copy as a local one freezes the checkout (driver.snapshot), unless told not to."""
    wait = words.given(typed, "--wait")
    quiet = words.given(typed, "--quiet")
    as_json = words.given(typed, "--json")
    kept = words.without(typed, "--wait", "--json", "--quiet")
    end = next((i for i, w in enumerate(kept) if w.kind == "end"), len(kept))
    project = sync.find_project(Path.cwd(), command)
    there = sync.upload(remote, project)
    args = sync.rewrite(
        [*words.texts(kept[:end]), "--json", *words.texts(kept[end:])], project.root, there
    )
    line = ssh.command_line(remote, [command, *args], cwd=_in(there, project))
    code, out = ssh.run(remote, line, capture=True)
    if code != 0:
        if as_json:
            output.write(out)
        return code
    data = json.loads(out)
    # Each id names a file here: only a job id's shape is taken (records.checked_id).
    ids = [records.checked_id(remote, i) for i in data.get("chain") or [data.get("job_id")]]
    for job_id in ids:
        records.save(
            records.RemoteJob(
                remote=remote,
                job_id=job_id,
                log_dir=data.get("log_dir", ""),
                code_dir=there,
                commit=project.commit,
                dirty=project.dirty,
                submitted_at=time.time(),
            ),
            os.environ,
        )
    data = {k: v for k, v in data.items() if k not in ("nrl_launch_json", "command", "ok")}
    data |= {
        "remote": remote.name,
        "code_dir": there,
        "commit": project.commit,
        "dirty": project.dirty,
    }
    job_id = ids[0]
    if as_json and not wait:
        output.emit_json(command, data)
    elif quiet:
        output.emit_text("\n".join(ids))
    elif not as_json:
        code_line = (project.commit or "no commit yet")[:12] + (
            " (+ uncommitted changes)" if project.dirty else ""
        )
        output.emit_text(
            f"Submitted job {' '.join(ids)} to {remote.name} ({remote.host}); logs there in "
            f"{data.get('log_dir', '?')}\n"
            f"  code: {code_line}, synced to {there}\n"
            f"  nrl-launch status {job_id}    nrl-launch logs {job_id} -f    "
            f"nrl-launch cancel {job_id}"
        )
    if not wait:
        return 0
    if not as_json:
        code, _ = ssh.run(remote, ssh.command_line(remote, ["status", job_id, "--watch"]))
        return code
    code, _ = ssh.run(remote, ssh.command_line(remote, ["status", job_id, "--watch"]), capture=True)
    _, status = ssh.run(
        remote, ssh.command_line(remote, ["status", job_id, "--json"]), capture=True
    )
    jobs = json.loads(status).get("jobs") or [None]
    output.emit_json(command, data | {"status": jobs[0]})
    return code
