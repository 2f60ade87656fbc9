"""Attacks on a user's job by the others a shared cluster holds, on the dev cluster, for real.

nrl-user runs the job (from a shell with umask 002, as on many clusters); nrl-other, who shares
the login node, the nodes, the file system and a Unix group (nrl-team) with nrl-user, attacks
it; so does the code in its sandbox, which a model wrote (sandbox_attacker.py, in a pyxis
container of the test image). Both users are made by `scripts/dev-cluster up`. Every attempt
must fail, the job must end as it would have, and no secret's value may appear anywhere the
attackers can read. Each test names the finding of the security review it guards (issue 25).

The users run nrl-launch with the system's Python (the test venv's interpreter may sit where
only root can read) on the test venv's packages.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, unavailable, wait_until

pytestmark = pytest.mark.cluster
HERE = Path(__file__).resolve().parent
USER, OTHER = "nrl-user", "nrl-other"
PYTHON = "/usr/bin/python3"
# util-linux's runuser, in sbin (not always on root's PATH in a test runner).
RUNUSER = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
SITE = sysconfig.get_paths()["purelib"]
STATE_SAVE = Path(os.environ.get("DEV_CLUSTER_DIR", "/var/lib/nrl-dev-cluster")) / "state"


@dataclass(frozen=True)
class Users:
    """Where the users work: `base` (0755), nrl-user's own dir in it (0700), and a dir every
    user can write (1777, sticky), as a shared scratch dir is."""

    base: Path
    own: Path
    shared: Path


def as_user(
    user: str,
    *argv: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`argv` run as `user` (runuser), in a login-like environment of theirs plus `env`, with
    umask 002 (group-writable by default, as many sites set it)."""
    base = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": f"/home/{user}",
        "USER": user,
        "LOGNAME": user,
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{REPO / 'src'}:{SITE}",
    }
    return subprocess.run(
        [RUNUSER, "-u", user, "--", "bash", "-c", 'umask 002; exec "$@"', "as-user", *argv],
        env={**base, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def nrl(
    user: str,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`nrl-launch ARGS` as `user`."""
    return as_user(user, PYTHON, "-m", "nrl_launch", *args, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def users(dev_cluster: None) -> Iterator[Users]:  # noqa: ARG001 - the cluster must be up
    for name in (USER, OTHER):
        if subprocess.run(["id", name], capture_output=True, check=False).returncode != 0:
            unavailable(f"the dev cluster has no user {name}: restart it with scripts/dev-cluster")
    if not Path(PYTHON).exists():
        unavailable(f"{PYTHON} is missing: the other users run nrl-launch with it")
    base = Path(tempfile.mkdtemp(prefix="nrl-attacks-", dir="/tmp"))
    base.chmod(0o755)
    own, shared = base / "user", base / "shared"
    own.mkdir(mode=0o700)
    shutil.chown(own, USER, USER)
    shared.mkdir()
    shared.chmod(0o1777)
    yield Users(base, own, shared)
    shutil.rmtree(base, ignore_errors=True)


def status_of(job_id: str, env: dict[str, str]) -> dict[str, Any]:
    done = nrl(USER, "status", job_id, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["jobs"][0]  # type: ignore[no-any-return]


# ---- A job with a sandbox, attacked while it runs ----


@dataclass(frozen=True)
class Attacked:
    job_id: str
    log_dir: Path
    env: dict[str, str]  # nrl-user's shell: its state dir and the secrets
    secrets: tuple[str, ...]  # the values no attacker may see
    marker: Path  # appears if a script the sandbox wrote to ever runs
    go: Path  # the driver ends once this appears


@pytest.fixture(scope="module")
def attacked(users: Users, test_image: Path) -> Iterator[Attacked]:
    """nrl-user's 2-node job, in containers of the test image, with the attacker as its sandbox,
    up and waiting (its driver holds an actor on each node) once every sandbox has attacked."""
    tag = uuid.uuid4().hex[:12]
    secrets = (f"hf_SENTINEL{tag}", f"sk-SENTINEL{tag}")
    env = {
        "NRL_LAUNCH_STATE_DIR": str(users.own / "state"),
        # A declared secret (HF_TOKEN, optional by default), and a credential the job never
        # names, exported in the shell it is submitted from.
        "HF_TOKEN": secrets[0],
        "OPENAI_API_KEY": secrets[1],
    }
    scratch = users.own / "scratch"
    scratch.mkdir(mode=0o700)
    shutil.chown(scratch, USER, USER)
    marker = users.base / f"PLANTED-{tag}"
    job = {
        "sandbox": {
            "image": str(test_image),
            "command": [
                "python3",
                str(HERE / "sandbox_attacker.py"),
                str(marker),
                str(users.own / "logs"),
            ],
            "mounts": [f"{REPO}:{REPO}:ro"],
        }
    }
    (users.own / "job.yaml").write_text(yaml.safe_dump(job))
    shutil.chown(users.own / "job.yaml", USER, USER)
    submitted = nrl(
        USER, "submit", "-f", str(users.own / "job.yaml"), "--nodes", "2",
        "--set", "slurm.exclude=node[2-3]", "--container", str(test_image),
        "--mount", f"{REPO}:{REPO}:ro", "--mount", str(scratch),
        "--set", f"container.workdir={REPO}", "--log-dir", str(users.own / "logs"),
        "--time", "15", "--", "python3", str(HERE / "attack_driver.py"), str(scratch / "go"), "2",
        env=env, cwd=users.own,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.split()[2]
    log_dir = users.own / "logs" / f"{job_id}-logs"

    def ready() -> bool:
        status = status_of(job_id, env)
        assert status["phase"] not in ("FAILED", "CANCELLED", "TIMEOUT"), status
        driver = log_dir / "ray-driver.log"
        return driver.exists() and "READY-FOR-ATTACKS" in driver.read_text()

    wait_until(ready, 600)
    yield Attacked(job_id, log_dir, env, secrets, marker, scratch / "go")
    (scratch / "go").touch()
    nrl(USER, "cancel", job_id, env=env)


def attack_reports(log_dir: Path) -> dict[str, dict[str, Any]]:
    """Each node's sandbox report (sandbox_attacker.py's ATTACK line), by node."""
    reports = {}
    for log in log_dir.glob("sandbox-*.log"):
        line = next(x for x in log.read_text().splitlines() if x.startswith("ATTACK "))
        reports[log.stem.removeprefix("sandbox-")] = json.loads(line[len("ATTACK ") :])
    return reports


def test_model_code_in_the_sandbox_reaches_no_log_dir_token_secret_or_process(
    attacked: Attacked,
) -> None:
    """C1, H3: the sandbox mounts only its exchange dir, runs from no file it can write, gets an
    environment of names nrl-launch lists, and (PID and user namespaces of its own) sees and
    signals none of the job's processes: every attempt of sandbox_attacker.py failed."""
    reports = attack_reports(attacked.log_dir)
    assert sorted(reports) == ["node0", "node1"]
    for node, report in reports.items():
        text = json.dumps(report)
        for secret in attacked.secrets:
            assert secret not in text, node
        # It found the log dir's path (above its exchange dir), and could do nothing there.
        assert str(attacked.log_dir) in report["log_dirs_found"], node
        tried = {k: v for k, v in report.items() if k.startswith(("append to", "read", "write"))}
        assert tried, node
        assert not [k for k, v in tried.items() if v.startswith("done")], (node, tried)
        # Its own processes only: nothing else of the node to read or to stop.
        assert report["processes_seen"] <= 2, (node, report["processes_seen"])
        assert report["signalable"] == [], node
        assert sorted(report["own_environ"]) == sorted(
            set(report["own_environ"]) - {"HF_TOKEN", "OPENAI_API_KEY", "RAY_AUTH_TOKEN_PATH"}
        )
        assert report["own_environ"].get("NEMO_SKILLS_SANDBOX_BLOCK_NETWORK") == "1"
    # The job's own files are as the job wrote them.
    assert not attacked.marker.exists()
    assert "driver_ended 1" not in (attacked.log_dir / "timeline").read_text()


def test_another_user_reads_none_of_the_job_s_files(users: Users, attacked: Attacked) -> None:
    """H1, H2: the log dir is the job's own (0700, made fresh by the job), whatever umask it was
    submitted with (002 here); the job's Slurm output and nrl-launch's state are nrl-user's."""
    mode = attacked.log_dir.stat().st_mode & 0o777
    assert mode == 0o700, oct(mode)
    targets = [
        attacked.log_dir,
        attacked.log_dir / "ray-auth-token",
        attacked.log_dir / "spec.json",
        attacked.log_dir / "ray-driver.log",
        attacked.log_dir / "job.sbatch",
        attacked.log_dir.parent / f"slurm-{attacked.job_id}.out",
        users.own / "state" / "jobs" / f"{attacked.job_id}.json",
    ]
    for target in targets:
        tried = as_user(OTHER, "cat" if not target.is_dir() else "ls", str(target))
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, target
    for path in attacked.log_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert path.stat().st_mode & 0o077 == 0, path


def test_another_user_reads_no_environment_of_the_job_s_processes(attacked: Attacked) -> None:
    """The job's processes on every node (seen from the login side's /proc, the nodes' parent
    PID namespace) hold the secrets; another user can read none of their environments."""
    pids = [
        p.parent.name
        for p in Path("/proc").glob("[0-9]*/status")
        if f"Uid:\t{_uid(USER)}\t" in _read(p)
    ]
    assert pids  # the job runs
    probe = "for p in \"$@\"; do cat /proc/$p/environ 2>/dev/null; done | tr '\\0' '\\n'"
    tried = as_user(OTHER, "bash", "-c", probe, "probe", *pids)
    for secret in attacked.secrets:
        assert secret not in tried.stdout


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_no_ray_port_lets_another_user_in_without_the_token(attacked: Attacked) -> None:
    """L7: every Ray server of the job refuses a client without its token (gRPC
    UNAUTHENTICATED, HTTP 401), on both nodes, the core workers' ports included. Ray's
    Prometheus metrics answer anyone: numbers, with no secret or token in them
    (docs/security.md)."""
    done = as_user(OTHER, PYTHON, str(HERE / "ray_ports_probe.py"), "node0", "node1")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    token = (attacked.log_dir / "ray-auth-token").read_text().strip()
    for host in ("node0", "node1"):
        assert report[f"{host}:workers"], host  # the driver's actors run there
        metrics = report.pop(f"{host}:metrics")
        report.pop(f"{host}:workers")
        for body in metrics.values():
            assert token not in body and not any(s in body for s in attacked.secrets)
    answered = {k: v for k, v in report.items() if not v.startswith("refused")}
    metrics_ports = {"1309", "44227", "44217"}
    assert {k for k in answered if k.split(":")[1] not in metrics_ports} == set(), answered
    # The head's servers are really there, and said no.
    for port in ("1200", "1201", "1301", "1303", "1307", "8265/api/jobs/"):
        assert report[f"node0:{port}"].startswith("refused: UNAUTHENTICATED") or report[
            f"node0:{port}"
        ].startswith("refused: HTTP 401"), (port, report[f"node0:{port}"])


def test_a_log_dir_another_user_plants_is_neither_read_nor_run(attacked: Attacked) -> None:
    """H1: in a base dir another user can write (here: made group-writable for nrl-team, as a
    shared project dir is), nrl-other plants a newer run's log dir for the job, with an attach
    script and an ENDED. status does not believe it, and attach runs nothing from it (nor from
    the job's own log dir while others can replace it); with the base dir the user's own again,
    attach works."""
    base, above = attacked.log_dir.parent, attacked.log_dir.parent.parent
    for shared, mode in ((above, 0o2750), (base, 0o2770)):
        shutil.chown(shared, USER, "nrl-team")
        shared.chmod(mode)
    try:
        fake = base / f"{attacked.job_id}-9-logs"
        script = f"#!/bin/bash\ntouch {attacked.marker}\n"
        planted = as_user(
            OTHER, "bash", "-c",
            'mkdir "$1" && printf "%s" "$2" >"$1/$3-attach.sh" && '
            'echo "driver exited with code 0" >"$1/ENDED"',
            "plant", str(fake), script, attacked.job_id,
        )  # fmt: skip
        assert planted.returncode == 0, planted.stderr
        status = nrl(USER, "status", attacked.job_id, "--json", env=attacked.env)
        assert status.returncode == 0, status.stderr
        job = json.loads(status.stdout)["jobs"][0]
        assert job["phase"] == "RUNNING" and job["log_dir"] == str(attacked.log_dir)
        assert f"ignoring {fake.name}, not job {attacked.job_id}'s" in status.stderr
        attach = nrl(USER, "attach", attacked.job_id, "--", "true", env=attacked.env)
        assert attach.returncode == 4, attach.stdout + attach.stderr
        assert "writable by group nrl-team" in attach.stderr
        assert not attacked.marker.exists()
        shutil.rmtree(fake)
    finally:
        for own in (base, above):
            shutil.chown(own, USER, USER)
            own.chmod(0o700)
    attach = nrl(USER, "attach", attacked.job_id, "--", "bash", "-c", "echo attached-$((6*7))",
                 env=attacked.env)  # fmt: skip
    assert attach.returncode == 0, attach.stderr
    assert "attached-42" in attach.stdout
    assert not attacked.marker.exists()


def test_the_job_ends_as_it_would_have_and_nothing_planted_ever_ran(attacked: Attacked) -> None:
    """C1's end: the job's result is its driver's (no forged ENDED, no forged timings), its
    containers were removed by the job.sbatch it wrote (not one the sandbox changed), and no
    secret value is in anything the sandbox could write."""
    attacked.go.touch()
    wait_until(lambda: status_of(attacked.job_id, attacked.env)["phase"] != "RUNNING", 300)
    status = status_of(attacked.job_id, attacked.env)
    assert status["phase"] == "COMPLETED", status
    assert (attacked.log_dir / "ENDED").read_text() == "driver exited with code 0\n"
    driver = (attacked.log_dir / "ray-driver.log").read_text()
    assert "HF_TOKEN reached the driver: True" in driver and "go: True" in driver
    for line in (attacked.log_dir / "timeline").read_text().splitlines():
        name, at = line.split(" ")
        float(at)  # every line is a phase and a time: nothing forged in
        assert "$" not in name
    assert not attacked.marker.exists()
    exchange = attacked.log_dir / "sandbox"
    for path in [*exchange.rglob("*"), *attacked.log_dir.glob("sandbox-*.log")]:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert not any(s in text for s in attacked.secrets), path


# ---- A log dir made first, and secrets Slurm never holds ----


def _next_job_id() -> int:
    """The id Slurm gives the next job (ids are sequential): one more than a job queued now."""
    done = subprocess.run(
        ["sbatch", "--parsable", "--wrap", "true", "-o", "/dev/null", "-J", "nrl-next-id"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout.strip().split(";")[0]) + 1


def test_a_log_dir_made_first_by_another_user_is_refused(users: Users) -> None:
    """H1: in a dir every user can write (sticky, as /scratch), nrl-other makes the next jobs'
    log dirs first, with files nrl-user's job would write its token and script into. submit
    refuses the dir (nothing queued); a job.sbatch submitted there by hand refuses to start and
    writes nothing into nrl-other's files."""
    env = {"NRL_LAUNCH_STATE_DIR": str(users.own / "state2")}
    first = _next_job_id()
    plant = (
        'for id in $(seq "$1" $(($1 + 10))); do d="$2/$id-logs"; mkdir -m 777 "$d"; '
        'for f in ray-auth-token job.sbatch spec.json timeline; do : >"$d/$f"; chmod 666 "$d/$f"; '
        "done; done"
    )
    planted = as_user(OTHER, "bash", "-c", plant, "plant", str(first), str(users.shared))
    assert planted.returncode == 0, planted.stderr
    args = ["--container-runtime", "none", "--log-dir", str(users.shared), "--time", "5"]
    refused = nrl(USER, "run", *args, "--", "true", env=env, cwd=users.own)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"nrl-launch: error: logs.base_dir {users.shared}: ")
    assert "is writable by every user (mode 1777)" in refused.stderr
    queued = subprocess.run(["squeue", "-h", "-u", USER], capture_output=True, text=True).stdout
    assert queued.strip() == ""
    # By hand: the job script (run --dry-run prints it), with sbatch.
    job_id = _by_hand(users, args, env, "job.sbatch")
    planted_dir = users.shared / f"{job_id}-logs"
    assert planted_dir.is_dir()  # nrl-other's, planted for this id
    for name in ("ray-auth-token", "job.sbatch", "spec.json", "timeline"):
        assert (planted_dir / name).stat().st_size == 0, name
    output = (users.shared / f"slurm-{job_id}.out").read_text()
    assert f"nrl-launch refused to start the job: its log dir {planted_dir} exists already" in (
        output
    )


def test_a_log_base_an_acl_opens_to_another_user_is_refused(users: Users) -> None:
    """Issue 34, finding 1: nrl-user's own log base (0755) with a POSIX ACL that lets nrl-other
    write, as a user might set to share logs with a teammate: nrl-other could make or replace the
    next job's log dir there. submit refuses it (nothing queued); a job.sbatch submitted there by
    hand refuses to start, and makes no log dir there."""
    base = users.base / "acl-logs"
    base.mkdir(mode=0o755)
    shutil.chown(base, USER, USER)
    opened = as_user(USER, "setfacl", "-m", f"u:{OTHER}:rwx", str(base))
    assert opened.returncode == 0, opened.stderr
    probe = as_user(OTHER, "mkdir", str(base / "probe"))
    assert probe.returncode == 0, probe.stderr  # the ACL does let nrl-other in
    (base / "probe").rmdir()
    env = {"NRL_LAUNCH_STATE_DIR": str(users.own / "state-acl")}
    args = ["--container-runtime", "none", "--log-dir", str(base), "--time", "5"]
    refused = nrl(USER, "run", *args, "--", "true", env=env, cwd=users.own)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.startswith(
        f"nrl-launch: error: logs.base_dir {base}: {base} is writable by user {OTHER} through "
        "its ACL (mode 0775"
    ), refused.stderr
    queued = subprocess.run(["squeue", "-h", "-u", USER], capture_output=True, text=True).stdout
    assert queued.strip() == ""
    job_id = _by_hand(users, args, env, "job-acl.sbatch")
    assert not (base / f"{job_id}-logs").exists()
    output = (base / f"slurm-{job_id}.out").read_text()
    assert f"nrl-launch refused to start the job: {base} is writable by " in output, output


@pytest.mark.slurm_smoke
def test_secrets_in_a_file_are_never_held_by_slurm(users: Users) -> None:
    """M1: with slurm.secrets_via file the job gets its secrets from a 0600 file and Slurm's
    stored copy of the job's environment holds none of them; by default (env) it does, which
    is what docs/security.md says."""
    tag = uuid.uuid4().hex[:12]
    held = {}
    for via in ("env", "file"):
        secret = f"hf_SENTINEL{via}{tag}"
        env = {"NRL_LAUNCH_STATE_DIR": str(users.own / f"state-{via}"), "HF_TOKEN": secret}
        # The job runs until the test has read Slurm's copy of its environment (Slurm drops it
        # when the job ends): however slow the machine, the copy is there to be read.
        release = users.own / f"read-{via}"
        # The job checks the value by its digest: the command itself (in spec.json and what
        # Slurm stores of the job) must not hold the secret the test looks for.
        digest = hashlib.sha256(secret.encode()).hexdigest()
        check = (
            f'test "$(printf %s "$HF_TOKEN" | sha256sum)" = "{digest}  -" && '
            f"for _ in $(seq 600); do [ -e {release} ] && exit 0; sleep 0.5; done; exit 1"
        )
        run = nrl(
            USER, "run", "--container-runtime", "none", "--log-dir", str(users.own / "logs"),
            "--time", "5", "--set", f"slurm.secrets_via={via}", "--", "bash", "-c", check,
            env=env, cwd=users.own,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        job_id = run.stdout.split()[2].rstrip(":")  # "Submitted job 42: bash -c ..."
        environment = f"hash.*/job.{job_id}/environment"
        wait_until(lambda e=environment: bool(list(STATE_SAVE.glob(e))), 60)
        held[via] = secret.encode() in next(STATE_SAVE.glob(environment)).read_bytes()
        release.touch()
        wait_until(lambda j=job_id, e=env: status_of(j, e)["phase"] == "COMPLETED", 120)
        if via == "file":
            assert not list((users.own / "state-file" / "scripts").glob("*.secrets"))
    assert held == {"env": True, "file": False}


def _by_hand(users: Users, args: list[str], env: dict[str, str], name: str) -> str:
    """Submit `run --dry-run ARGS -- true`'s script as nrl-user with sbatch itself, as a user
    who bypasses nrl-launch would; its job id, once it has ended."""
    script = users.own / name
    rendered = nrl(USER, "run", "--dry-run", *args, "--", "true", env=env, cwd=users.own)
    assert rendered.returncode == 0, rendered.stderr
    script.write_text(rendered.stdout)
    shutil.chown(script, USER, USER)
    by_hand = as_user(USER, "sbatch", "--parsable", str(script), cwd=users.own)
    assert by_hand.returncode == 0, by_hand.stderr
    job_id = by_hand.stdout.strip()

    def ended() -> bool:
        queue = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
        return queue.stdout.strip() == ""

    wait_until(ended, 120)
    return job_id


@pytest.mark.parametrize("requeue", ["false", "true"])
def test_the_secrets_file_goes_as_soon_as_no_run_can_read_it(users: Users, requeue: str) -> None:
    """Issue 34, finding 9: the file of the secrets' values outlived a cancelled job. A job
    Slurm never requeues (slurm.requeue false) removes it as soon as its batch step has read
    it, while it runs; one Slurm may requeue keeps it while it runs (a requeued run reads it),
    and it is gone once the job is cancelled and over."""
    state = users.own / f"state-requeue-{requeue}"
    env = {"NRL_LAUNCH_STATE_DIR": str(state), "HF_TOKEN": f"hf_{uuid.uuid4().hex}"}
    run = nrl(
        USER, "run", "--container-runtime", "none", "--log-dir", str(users.own / "logs"),
        "--time", "5", "--set", "slurm.secrets_via=file", "--set", f"slurm.requeue={requeue}",
        "--", "sleep", "300", env=env, cwd=users.own,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.split()[2].rstrip(":")  # "Submitted job 42: sleep 300"
    scripts = state / "scripts"
    try:
        wait_until(lambda: status_of(job_id, env)["phase"] == "RUNNING", 120)
        if requeue == "false":
            wait_until(lambda: not list(scripts.glob("*.secrets")), 60)
        else:
            assert list(scripts.glob("*.secrets"))
    finally:
        nrl(USER, "cancel", job_id, env=env)
    wait_until(lambda: status_of(job_id, env)["phase"] == "CANCELLED", 120)
    assert not list(scripts.glob("*.secrets"))
