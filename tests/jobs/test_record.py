"""nrl-launch's own state: job records survive concurrent submits, corruption and old versions.

Records are written atomically (paths.write_atomically: a temp file renamed into place), one
file per job id; scripts are named by submit time and pid. Nothing here needs a cluster: the
Slurm commands are fakes (tests/fakes.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nrl_launch.jobs import record
from tests.conftest import Cli
from tests.fakes import FakeSlurm
from tests.helpers import TEST_DATA

RECORDS = TEST_DATA / "records"
JOB = ["--nodes", "2", "--container-runtime", "none", "--", "python", "train.py"]


def leftovers(directory: Path) -> list[str]:
    """Temp files of an interrupted atomic write (`.NAME.RANDOM.tmp`)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_twenty_concurrent_submits_leave_twenty_intact_records(
    slurm: FakeSlurm, tmp_path: Path, isolated: Path
) -> None:
    """20 `nrl-launch submit` processes at once; sbatch answers each with an id of its own (its
    pid) after a random few ms, so the records and scripts are written interleaved."""
    slurm.script("sbatch", '/bin/sleep "0.0$((RANDOM % 10))"\nprintf "%s\\n" "$$"')
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "nrl_launch", "submit", "--quiet", *JOB],
            cwd=isolated,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(20)
    ]
    outcomes = [(p.communicate(timeout=120), p.returncode) for p in procs]
    assert [code for _, code in outcomes] == [0] * 20, [err for (_, err), _ in outcomes]
    ids = [out.strip() for (out, _), _ in outcomes]
    assert len(set(ids)) == 20 and all(i.isdigit() for i in ids)
    assert len(slurm.calls("sbatch")) == 20

    state = tmp_path / "state"
    jobs, scripts = state / "jobs", state / "scripts"
    assert sorted(p.name for p in jobs.iterdir()) == sorted(f"{i}.json" for i in ids)
    records = [record.load(i, state) for i in ids]
    assert [r.job_id for r in records] == ids
    assert all(r.nodes == 2 and r.argv[-1] == r.script_path for r in records)
    # One script per job, each the one its record and its sbatch call name, none half written.
    assert sorted(str(p) for p in scripts.iterdir()) == sorted(r.script_path for r in records)
    # The same job each time: whole, the scripts differ only where they name themselves.
    texts = {Path(r.script_path).read_text().replace(r.script_path, "SCRIPT") for r in records}
    assert len(texts) == 1 and texts.pop().endswith("\nesac\n")
    assert leftovers(jobs) == [] and leftovers(scripts) == []
    listed, warnings = record.load_all(state)
    assert sorted(r.job_id for r in listed) == sorted(ids) and warnings == []


def save(state: Path, job_id: str, submitted_at: float = 1.0) -> None:
    record.save(
        record.JobRecord(
            job_id=job_id,
            backend="slurm",
            job_name="good",
            nodes=2,
            submitted_at=submitted_at,
            submit_dir="/s",
            log_dir=f"/s/{job_id}-logs",
            script_path="/s/x.sh",
            argv=["sbatch", "/s/x.sh"],
            spec={},
        ),
        state,
    )


GOOD = json.loads(
    record.JobRecord(
        job_id="0",
        backend="slurm",
        job_name="j",
        nodes=2,
        submitted_at=1.0,
        submit_dir="/s",
        log_dir="/s/0-logs",
        script_path="/s/x.sh",
        argv=[],
        spec={},
    ).model_dump_json()
)

# (job id, file content, what the one line must say)
CORRUPT: list[tuple[str, bytes, str]] = [
    ("20", b"{not json", "not a JSON job record (Expecting property name"),
    ("21", b"[1, 2]", "not a JSON object but a list"),
    ("22", json.dumps(GOOD | {"job_id": "22", "nodes": "two"}).encode(), "nodes: input should be"),
    ("23", json.dumps(GOOD | {"job_id": "23", "backend": 7}).encode(), "backend: input should be"),
    (
        "24",
        json.dumps(GOOD | {"job_id": "24", "schema_version": 2}).encode(),
        "written by a newer nrl-launch (schema version 2; this one reads up to 1)",
    ),
    ("25", json.dumps({"job_id": "25"}).encode(), "schema_version is None, not a version"),
    ("26", json.dumps(GOOD | {"job_id": "27"}).encode(), "it holds job '27', not '26'"),
    ("28", b"\xff\xfe{}", "not a JSON job record ('utf-8' codec can't decode byte 0xff"),
    ("29", b"", "not a JSON job record (Expecting value"),
]


def test_corrupt_records_warn_once_each_and_list_shows_the_rest(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    save(state, "10", submitted_at=1.0)
    save(state, "11", submitted_at=2.0)
    for job_id, content, _ in CORRUPT:
        (state / "jobs" / f"{job_id}.json").write_bytes(content)
    slurm.answer("squeue", "10|PENDING|Priority|2|\n11|PENDING|Priority|2|\n")
    result = cli("list")
    assert result.code == 0, result.err
    assert [line.split("\t")[0] for line in result.out.splitlines()] == ["11", "10"]
    warnings = result.err.splitlines()
    assert len(warnings) == len(CORRUPT)
    for line, (job_id, _, reason) in zip(warnings, CORRUPT, strict=True):
        assert line.startswith(f"nrl-launch: warning: job record {state}/jobs/{job_id}.json is")
        assert reason in line
    listed = cli("list", "--json")
    assert listed.code == 0
    assert [j["job_id"] for j in json.loads(listed.out)["jobs"]] == ["11", "10"]


@pytest.mark.parametrize(("job_id", "content", "reason"), CORRUPT, ids=[c[0] for c in CORRUPT])
def test_status_of_a_corrupt_record_is_one_line_exit_4(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path, job_id: str, content: bytes, reason: str
) -> None:
    jobs = tmp_path / "state" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / f"{job_id}.json").write_bytes(content)
    result = cli("status", job_id)
    assert result.code == 4
    assert result.out == ""
    assert result.err.startswith(f"nrl-launch: error: job record {jobs}/{job_id}.json is unread")
    assert reason in result.err and result.err.count("\n") == 1
    assert slurm.calls() == []  # refused before asking Slurm anything


def old_records(state: Path, root: Path) -> list[str]:
    """Records as users of early versions have them, written by nrl-launch itself at 775784e
    (the first release: no pid, runs or kind) and at 9fe1e4b (pid, no runs or kind), with the
    paths moved under `root`."""
    jobs = state / "jobs"
    jobs.mkdir(parents=True)
    ids = []
    for fixture in sorted(RECORDS.glob("v1-*.json")):
        text = fixture.read_text().replace("/home/alice/RL", str(root))
        data = json.loads(text)
        assert data["schema_version"] == 1 and not {"kind", "runs"} & set(data)
        (jobs / f"{data['job_id']}.json").write_text(text)
        ids.append(data["job_id"])
    return ids


def test_a_version_1_record_of_an_old_nrl_launch_loads(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ids = old_records(state, tmp_path)
    assert ids == ["4242", "4243"]
    for job_id in ids:
        rec = record.load(job_id, state)
        assert (rec.kind, rec.runs, rec.pid, rec.nodes) == ("ray", [], None, 2)
        assert rec.log_dir == f"{tmp_path}/logs/{job_id}-logs"


def test_status_list_and_logs_work_on_old_records(
    cli: Cli, slurm: FakeSlurm, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    old_records(state, tmp_path)
    slurm.answer("squeue", "4242|RUNNING|None|2|node[0-1]\n4243|PENDING|Resources|2|\n")
    listed = cli("list")
    assert listed.code == 0 and listed.err == ""
    assert [line.split("\t")[:4] for line in listed.out.splitlines()] == [
        ["4243", "nrl-launch", "2", "PENDING"],
        ["4242", "nrl-launch", "2", "STARTING"],
    ]
    logs = tmp_path / "logs" / "4242-logs"
    logs.mkdir(parents=True)
    (logs / "STARTED_RAY_HEAD").touch()
    (logs / "ray-driver.log").write_text("step 1\n")
    (logs / "timeline").write_text("driver_started 3.0\n")
    (logs / "readiness.json").write_text('{"nodes": 2, "nodes_expected": 2}')
    status = cli("status", "4242", "4243", "--json")
    assert status.code == 0, status.err
    phases = {j["job_id"]: j["phase"] for j in json.loads(status.out)["jobs"]}
    assert phases == {"4242": "RUNNING", "4243": "PENDING"}
    assert cli("logs", "4242").out == "step 1\n"
    # Reading an old record never rewrites it.
    for fixture in RECORDS.glob("v1-*.json"):
        data = json.loads(fixture.read_text().replace("/home/alice/RL", str(tmp_path)))
        assert json.loads((state / "jobs" / f"{data['job_id']}.json").read_text()) == data
