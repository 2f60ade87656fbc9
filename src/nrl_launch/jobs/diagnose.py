"""Why a job failed, from the known signatures in its logs: one cause and the file and line
that show it. Pure apart from reading the log dir and the batch job's own output (where pyxis
and enroot say why a container did not start: see pyxis_errors)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nrl_launch.jobs import pyxis_errors
from nrl_launch.jobs.status import main_log

__all__ = ["SIGNATURES", "Diagnosis", "diagnose"]


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    where: str | None = None  # "ray-head.log line 12"; None when the job's ENDED says it

    def __str__(self) -> str:
        return f"{self.cause} (see {self.where})" if self.where else self.cause


# Most specific first: a version mismatch also makes nodes fail to join, and so on.
SIGNATURES: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"Version mismatch: The cluster was started with"),
        "Ray or Python versions differ between nodes: use one container or venv everywhere",
    ),
    (
        re.compile(r"already (?:in use|occupied)|Address already in use"),
        "a port is already in use: another Ray or job holds it; change ray.ports",
    ),
    (
        re.compile(r"ray is not on PATH|ray: command not found|No module named '?ray'?\b"),
        "Ray is missing from the node's environment: check container.image or the setup command",
    ),
    (
        # enroot import fetches with curl: 5/6 name not resolved, 7 no connection, 28 time-out,
        # 35/60 TLS. The node cannot reach the registry (many clusters' compute nodes cannot).
        re.compile(r"curl: \((?:5|6|7|28|35|60)\) "),
        "the node cannot reach the container registry: pull where the registry is reachable, "
        "or import the image elsewhere and copy the .sqsh to shared storage",
    ),
    (
        re.compile(r"FileNotFoundError.*run_config\.yaml"),
        "the HF cache is not on storage every node sees: set caches.hf_home to a shared path",
    ),
    (
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|out of memory|oom-kill|OOM killer",
            re.IGNORECASE,
        ),
        "out of memory",
    ),
    (
        re.compile(r"not every node joined within"),
        "a node never joined the Ray cluster: see its ray-worker-K.log",
    ),
]

# How a job that would not start says why, where it has no log dir to write ENDED in.
_REFUSED = re.compile(r"nrl-launch refused to start the job: (.*)")

# The end of a log is where a failure shows; a multi-GB driver log is not read whole.
_TAIL_BYTES = 1 << 20


def _tail(path: Path) -> tuple[str, bool]:
    """The end of the file, and whether that is the whole file."""
    try:
        with open(path, "rb") as f:
            start = max(0, path.stat().st_size - _TAIL_BYTES)
            f.seek(start)
            return f.read().decode("utf-8", errors="replace"), start == 0
    except OSError:
        return "", True


def diagnose(log_dir: Path | None, batch_output: Path | None = None) -> Diagnosis | None:
    """The first known signature found in the job's ENDED and logs, or None. A container that
    pyxis could not start comes first: it is why the step failed, whatever the logs say after
    (`batch_output` is the batch job's own output, slurm-<JOBID>.out, where pyxis writes)."""
    if batch_output is not None:
        text, whole = _tail(batch_output)
        failure = pyxis_errors.find(text)
        if failure is not None:
            where = f"line {failure.line}" if whole else "near the end"
            return Diagnosis(failure.cause, f"{batch_output.name} {where}")
        # The job's own refusal before it had a log dir (nrl_launch/node/common.sh).
        refused = _REFUSED.search(text)
        if refused:
            line = text.count("\n", 0, refused.start()) + 1
            where = f"line {line}" if whole else "near the end"
            return Diagnosis(refused[1].strip(), f"{batch_output.name} {where}")
    if log_dir is None:
        return None
    # A Ray job's driver log, or a plain job's (run, pull): its command's output on every node.
    names = ["ENDED", main_log("ray"), main_log("plain"), "ray-head.log"]
    files = [log_dir / name for name in names]
    files += sorted(log_dir.glob("ray-worker-*.log"))
    texts = [(path.name, *_tail(path)) for path in files]
    for pattern, cause in SIGNATURES:
        for name, text, whole in texts:
            match = pattern.search(text)
            if not match:
                continue
            if name == "ENDED":  # the job's own words say it, and name the log to read
                return Diagnosis(cause)
            where = f"line {text.count(chr(10), 0, match.start()) + 1}" if whole else "near the end"
            return Diagnosis(cause, f"{name} {where}")
    # No known signature: the driver's (or command's) own last error, when it failed.
    ended = texts[0][1]
    for name, text, whole in texts[1:3]:
        if _FAILED_ITSELF.search(ended) and (found := _last_error(text)):
            error, at = found
            where = f"line {at}" if whole else "near the end"
            return Diagnosis(f"its last error: {error}", f"{name} {where}")
    return None


# How ENDED says the driver (or a plain job's command) failed by itself, with a code not 0.
_FAILED_ITSELF = re.compile(r"(?:driver|command) exited with code [1-9]")
# The last line of a Python traceback (ModuleNotFoundError: No module named 'x'), or a line a
# program writes its error on (error: ..., ERROR ..., FATAL ...).
_ERROR_LINE = re.compile(
    r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt)\b.*|.*\b(?:error|ERROR|FATAL|Fatal)\b.*)$"
)


# srun's labels (`0: ` before each line of a multi-node job's job.log), and the lines srun and
# slurmstepd add about a task's exit: the program's own words are after, or elsewhere.
_LABEL = re.compile(r"^\d+: ")
_SLURM_LINE = re.compile(r"^(?:srun|slurmstepd(?:-[\w.-]+)?): ")


def _last_error(text: str) -> tuple[str, int] | None:
    """The last line of `text` that says an error, in the program's own words, and its line
    number (the whole line, cut to 300 characters); None when none does."""
    lines = text.splitlines()
    for number in range(len(lines), 0, -1):
        line = _LABEL.sub("", lines[number - 1].strip()).strip()
        if line and not _SLURM_LINE.match(line) and _ERROR_LINE.match(line):
            return " ".join(line.split())[:300], number
    return None
