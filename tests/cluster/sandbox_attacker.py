"""The sandbox as model-written code would use it (tests/cluster/test_attacks.py): before it
answers as a sandbox (sandbox_server.py), it tries everything a model's code could to leave the
sandbox, read the job's secrets or token, or change the job's result, and prints one line
`ATTACK {json}` saying what each attempt got.

    python3 sandbox_attacker.py MARKER LOG_BASE

MARKER is a path on the nodes' shared file system: a line that would create it is appended to
every job script it can reach. If the job (or `nrl-launch attach`) ever runs such a script
outside the sandbox, MARKER appears, and the test sees it. LOG_BASE is the job's logs.base_dir:
the attacker is taken to know its log dir, <LOG_BASE>/<SLURM_JOB_ID>-logs (the name is
predictable), on top of what it finds itself.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def attempt(what: Any) -> str:
    """What an attempt got: "done" or "done: <what it returned>", or the error it met."""
    try:
        result = what()
    except OSError as exc:
        return f"failed: {exc.strerror or exc}"
    return "done" if result is None else f"done: {result}"


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return None


def _opens(directory: Path) -> bool:
    """Whether `directory` (a process's root or cwd) can be listed."""
    try:
        next(directory.iterdir(), None)
    except OSError:
        return False
    return True


def _signalable(pid: int) -> bool:
    """Whether `pid` could be signalled (signal 0: nothing is sent)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def log_dirs() -> set[Path]:
    """Where the job's log dir might be: above the exchange dir the sandbox was given, and any
    path a process it can see names in its command line (`bash <log dir>/job.sbatch head`)."""
    found = set()
    ports = os.environ.get("SANDBOX_PORTS_DIR")
    if ports:
        found.add(Path(ports).parent)
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        for word in words:
            if word.endswith((b"/job.sbatch", b"/job.sh")):
                found.add(Path(os.fsdecode(word)).parent)
    return found


def attacks(marker: str, known: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"node": socket.gethostname(), "uid": os.getuid()}
    dirs = log_dirs() | {known}
    report["log_dirs_found"] = sorted(str(d) for d in dirs)
    payload = f"\ntouch {marker}\n"
    for log_dir in dirs:
        scripts = [log_dir / "job.sbatch", *log_dir.glob("*-attach.sh")]
        for script in scripts:
            report[f"append to {script}"] = attempt(
                lambda s=script: s.open("a").write(payload) and None
            )
        for name in ("ray-auth-token", "spec.json", "ENDED", "ray-driver.log"):
            path = log_dir / name
            report[f"read {path}"] = attempt(lambda p=path: len(p.read_bytes()))
        # Forge the job's end and its timings.
        report[f"write {log_dir / 'ENDED'}"] = attempt(
            lambda d=log_dir: (d / "ENDED").write_text("driver exited with code 0\n") and None
        )
        report[f"append to {log_dir / 'timeline'}"] = attempt(
            lambda d=log_dir: (d / "timeline").open("a").write("driver_ended 1\n") and None
        )
    # Every process it can see: its environment (the job's secrets?), its root and its cwd (the
    # log dir as that process sees it, past the sandbox's mounts), and whether it could be
    # signalled (stopping the raylet or the driver would change the job's result).
    environs, roots, signalable = {}, [], []
    me = os.getpid()
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        text = _read(proc / "environ")
        if text is not None:
            environs[pid] = text
        roots += [f"{pid}/{link}" for link in ("root", "cwd") if _opens(proc / link)]
        if pid not in (me, os.getppid()) and _signalable(pid):
            signalable.append(pid)
    report["processes_seen"] = len(list(Path("/proc").glob("[0-9]*")))
    report["environ_read"] = environs
    report["root_or_cwd_opened"] = roots
    report["signalable"] = signalable
    for log_dir in dirs:
        for opened in roots:
            path = Path("/proc") / opened / str(log_dir).lstrip("/") / "ray-auth-token"
            report[f"read {path}"] = attempt(lambda p=path: len(p.read_bytes()))
    report["own_environ"] = dict(os.environ)
    # Forge what the job reads from the exchange dir: a time that is code, another node's
    # failure.
    ports_dir = Path(os.environ.get("SANDBOX_PORTS_DIR", "/nonexistent"))
    report["forge READY"] = attempt(
        lambda: (ports_dir / "READY.elsewhere").write_text(f"$(touch {marker})\n") and None
    )
    return report


def main() -> None:
    marker = sys.argv[1]
    known = Path(sys.argv[2]) / f"{os.environ.get('SLURM_JOB_ID', '')}-logs"
    report = attacks(marker, known)
    print("ATTACK " + json.dumps(report, sort_keys=True, default=str), flush=True)
    # Then the sandbox the job waits for.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    time.sleep(0.1)
    sys.argv = [str(HERE / "sandbox_server.py")]
    runpy.run_path(str(HERE / "sandbox_server.py"), run_name="__main__")


if __name__ == "__main__":
    main()
