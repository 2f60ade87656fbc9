"""The job script's #SBATCH lines, read by the real sbatch (Slurm 22.05 on the dev cluster): they
give back every flag of the sbatch argv unchanged, hostile values included, and the copy a job
leaves in its log dir resubmits by hand with a plain `sbatch job.sbatch`, as ray.sub does.

`sbatch -vvv` logs each argument it takes from the script ("Found in script, argument ..."),
before it parses or checks any: that is what these tests compare with the argv.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nrl_launch.backends import Request, slurm, state_phase
from nrl_launch.spec import LaunchSpec
from tests.cluster.conftest import ON_NODE0_AND_1, job_status, wait_for_clean_nodes
from tests.conftest import Cli, wait_until
from tests.helpers import SBATCH_HOSTILE, sbatch_reads

pytestmark = pytest.mark.cluster
FOUND = 'sbatch: debug2: Found in script, argument "'
# The fields whose values go on an #SBATCH line as they are.
FIELDS = ("job_name", "account", "partition", "qos", "reservation", "exclude", "dependency")


def found_in_script(path: Path) -> list[str]:
    """The arguments the real sbatch takes from the #SBATCH lines of the script at `path`
    (--test-only: nothing is queued, and a value the controller refuses is refused after)."""
    run = subprocess.run(
        ["sbatch", "-vvv", "--test-only", str(path)], capture_output=True, check=False
    )
    lines = run.stderr.decode("utf-8", "surrogateescape").split("\n")
    assert not [line for line in lines if "Unmatched" in line or "Unexpected" in line], lines
    return [line[len(FOUND) : -1] for line in lines if line.startswith(FOUND)]


def hostile_specs() -> list[LaunchSpec]:
    """Every SBATCH_HOSTILE value in every field, spread over a few specs (each value in turn in
    each field), and all of them in the extra args of each: as `--comment=V` and as
    `--comment V`."""
    values = [v for v in SBATCH_HOSTILE if v.strip()]  # the fields take no blank value
    extra = [w for v in SBATCH_HOSTILE for w in (f"--comment={v}", "--comment", v)]
    specs = []
    for start in range(0, len(values), len(FIELDS)):
        fields = {f: values[(start + i) % len(values)] for i, f in enumerate(FIELDS)}
        fields["job_name"] = "".join(c for c in fields["job_name"] if c.isprintable()) or "x"
        for field in FIELDS[1:]:  # Slurm's names and lists have no spaces: refused (one word)
            fields[field] = "".join(c for c in fields[field] if not c.isspace()) or "x"
        log_dir = values[start].replace("%", "").replace("\\", "") or "x"
        data = {
            "driver": {"command": ["true"]},
            "slurm": {**fields, "extra_args": extra},
            "logs": {"base_dir": log_dir},
        }
        specs.append(LaunchSpec.model_validate(data))
    return specs


@pytest.mark.usefixtures("dev_cluster")
def test_sbatch_reads_every_hostile_value_back(tmp_path: Path) -> None:
    """One sbatch call per spec (a handful): every value in every field, as the flags of the
    argv, and as nrl-launch's model of sbatch's reading (tests/test_sbatch_lines) says."""
    requests: list[Request] = [slurm.plan(s) for s in hostile_specs()]
    requests.append(slurm.plan_plain(hostile_specs()[0]))
    for i, request in enumerate(requests):
        path = tmp_path / f"{i}.sbatch"
        path.write_text(request.script, encoding="utf-8")
        argv = list(request.argv[2:-1])  # less sbatch, --parsable and the script
        assert found_in_script(path) == argv
        assert sbatch_reads(request.script) == argv


# Held jobs' (job name, account, comment as extra args): quotes, `#`, `$`, backslashes, blanks
# (not in an account: a Slurm name has none), non-ASCII and control characters, and words sbatch
# reads as a separator or refuses bare.
HELD = [
    ("two words #1 'it's' \"q\"", "acc#1'it's'", ["--comment", "hetjob"]),
    ("$(touch /tmp/nrl-pwned) `id` ${HOME} \\", ":acct", ["--comment", ':x "y"\t# z \\n']),
    ("naïve ☃ {#x #} 🚀", "naïve☃$(id)", ["--comment=\x1b[31m\x7f red \\ #"]),
]


@pytest.mark.usefixtures("dev_cluster")
def test_held_jobs_have_the_hostile_values(tmp_path: Path) -> None:
    """Queued for real (held, then cancelled): Slurm's jobs have the name, account and comment
    their #SBATCH lines gave them."""
    jobs = {}
    for i, (job_name, account, extra) in enumerate(HELD):
        data = {
            "driver": {"command": ["true"]},
            "slurm": {
                "job_name": job_name,
                "account": account,
                "nodes": 1,
                "gpus_per_node": 0,
                "exclusive": False,
                "extra_args": [*extra, "--hold"],
            },
            "logs": {"base_dir": str(tmp_path)},
        }
        path = tmp_path / f"{i}.sbatch"
        path.write_text(slurm.plan_plain(LaunchSpec.model_validate(data)).script, encoding="utf-8")
        queued = subprocess.run(
            ["sbatch", "--parsable", str(path)], capture_output=True, text=True, check=True
        )
        comment = extra[-1].removeprefix("--comment=")
        jobs[queued.stdout.strip()] = [job_name, account, comment]
    try:
        shown = subprocess.run(
            ["squeue", "-h", "--states=all", "-j", ",".join(jobs), "-o", "%i\x1f%j\x1f%a\x1f%k"],
            capture_output=True,
            check=True,
        ).stdout.decode()
        got = {line.split("\x1f")[0]: line.split("\x1f")[1:] for line in shown.split("\n") if line}
        assert got == jobs
    finally:
        subprocess.run(["scancel", *jobs], check=True)


@pytest.mark.parametrize("command", ["submit", "run"], ids=["ray-job", "plain-job"])
def test_the_log_dir_s_job_sbatch_resubmits_by_hand(
    cli: Cli, cluster_job: list[str], command: str
) -> None:
    """`sbatch job.sbatch` from the submit dir, with no flag: a job of the same name on the same
    nodes, which runs to COMPLETED with log dirs of its own."""
    # No blank in it: the dev cluster's `sacct -c` (Slurm's jobcomp/filetxt reader) cannot read
    # a job name with one, and says UNKNOWN for the job's state (the held jobs test blanks).
    name = "resubmit-it's#1"
    job = [*ON_NODE0_AND_1, *cluster_job, "--job-name", name]
    result = cli(command, "--wait", "-q", *job, "--", "hostname")
    assert result.code == 0, result.out + result.err
    first = result.out.split()[0]
    log_dir = Path(job_status(cli, first)["log_dir"])

    again = subprocess.run(
        ["sbatch", str(log_dir / "job.sbatch")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    matched = re.fullmatch(r"Submitted batch job (\d+)\n", again.stdout)
    assert matched, again.stdout
    second = matched[1]

    def ended() -> bool:
        view = slurm.scheduler_views([second]).get(second)
        return view is not None and state_phase(view.state).terminal

    wait_until(ended, 180)
    view = slurm.scheduler_views([second])[second]
    assert (view.state, view.exit_code) == ("COMPLETED", 0)
    shown = subprocess.run(
        ["squeue", "-h", "--states=all", "-j", f"{first},{second}", "-o", "%i|%j|%D|%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = {line.split("|")[0]: line.split("|")[1:] for line in shown.splitlines()}
    assert jobs[second] == jobs[first] == [name, "2", "node[0-1]"]
    resubmitted = log_dir.parent / f"{second}-logs"
    assert (resubmitted / "ENDED").exists()
    # Its own copy is the same script: it resubmits again the same way.
    assert (resubmitted / "job.sbatch").read_text() == (log_dir / "job.sbatch").read_text()
    assert (log_dir.parent / slurm.batch_output(second)).exists()  # --output came along too
    wait_for_clean_nodes(60)
