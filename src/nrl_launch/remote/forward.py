"""A command given `--remote NAME|HOST` (or naming a job submitted to a remote cluster) runs on
that cluster's login node, through the user's own ssh, by the nrl-launch installed there.

- submit, run: the project is synced first (sync.py); the laptop records the job (records.py).
- render, plan, doctor: in a checkout, synced the same way, and the copy removed afterwards.
- status JOBID, logs, cancel, stop, dashboard, and the rest: forwarded as they are, their
  output passed through and their exit code kept.
- logs -f: reconnects after a dropped connection, where the output stopped (follow.py).
- attach: a terminal through `ssh -t`. dashboard --open: a held tunnel (tunnel.py).
- list, status with no JOBID: this machine's jobs and every cluster's, one ssh per cluster
  (listing.py).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from nrl_launch import output, runner
from nrl_launch.errors import UsageError
from nrl_launch.remote import follow, listing, profiles, records, ssh, sync, tunnel
from nrl_launch.remote.profiles import Remote

__all__ = ["route", "take_remote"]

# Commands whose first words name jobs, and options of theirs that take a value.
_JOB_COMMANDS = {"status", "logs", "attach", "cancel", "stop", "dashboard"}
_VALUED = {"--node", "--tail", "--port", "--from-byte"}
_SUBMITS = {"submit", "run"}  # sync the project and keep it: the job runs it
_CHECKS = {"render", "plan", "doctor"}  # sync it (a checkout's files), then remove it


def take_remote(args: list[str], environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """`--remote X` (or --remote=X) out of the words before `--`; else $NRL_LAUNCH_REMOTE."""
    end = args.index("--") if "--" in args else len(args)
    own, rest, value = [], args[end:], None
    words = iter(args[:end])
    for arg in words:
        if arg == "--remote":
            value = next(words, None)
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


def route(value: str | None, args: list[str]) -> int | None:
    """Run `args` (a command line without --remote) on the remote `value` names, or, without
    one, on the cluster a named job was submitted to; None: it runs here."""
    environ = os.environ
    command = args[0] if args else ""
    ids = _job_ids(args[1:]) if command in _JOB_COMMANDS else []
    if value is None:
        if command in ("list", "status") and not ids and records.clusters(environ):
            return listing.show(command, args[1:], None)
        remote = _remote_of_jobs(ids)
        if remote is None:
            return None
    else:
        remote = profiles.resolve(value, environ)
        ssh.check_installed(remote, environ)
        if command in ("list", "status") and not ids and "--watch" not in args:
            return listing.show(command, args[1:], remote)
    return _forward(remote, args, ids)


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


def _job_ids(words: Sequence[str]) -> list[str]:
    """The JOBID words of a job command (before `--`; attach: its first only)."""
    ids: list[str] = []
    skip = False
    for arg in words:
        if arg == "--":
            break
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            ids.append(arg)
    return ids


def _forward(remote: Remote, args: list[str], ids: Sequence[str]) -> int:
    command = args[0] if args else ""
    own = args[: args.index("--")] if "--" in args else args
    if command in _SUBMITS:
        return _submit(remote, args)
    if command in _CHECKS:
        return _checked(remote, args)
    if command == "attach":
        tty = ["-t"] if sys.stdin.isatty() else []
        line = ssh.command_line(remote, args, announce=False)
        argv = ssh.argv(remote, line, tty=bool(tty))
        runner.become(argv, dict(os.environ))
    if command == "logs" and ({"-f", "--follow"} & set(own)):
        return follow.follow(remote, args, ids[0] if ids else "")
    if command == "dashboard" and "--open" in own:
        return tunnel.hold(remote, args, ids[0] if ids else "")
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


def _submit(remote: Remote, args: list[str]) -> int:
    """Sync the checkout, submit from its copy (the remote prints --json), record the job
    here, print what local submit prints; with --wait, follow it there."""
    import json

    command = args[0]
    end = args.index("--") if "--" in args else len(args)
    own, driver = args[1:end], args[end:]
    wait = "--wait" in own
    quiet = "-q" in own or "--quiet" in own
    as_json = "--json" in own
    own = [a for a in own if a not in ("--wait", "--json", "-q", "--quiet")]
    project = sync.find_project(Path.cwd(), command)
    there = sync.upload(remote, project)
    # The copy is already frozen: the remote's own snapshot of it would be a second copy.
    extra = ["--no-snapshot"] if command == "submit" else []
    words = [command, *sync.rewrite([*own, *extra, "--json", *driver], project.root, there)]
    code, out = ssh.run(
        remote, ssh.command_line(remote, words, cwd=_in(there, project)), capture=True
    )
    if code != 0:
        if as_json:
            output.write(out)
        return code
    data = json.loads(out)
    ids = data.get("chain") or [data["job_id"]]
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
    job_id = data["job_id"]
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
