"""From a laptop (this test process, outside the login host) over real ssh: one Ray job on the
dev cluster through its whole cycle with --remote: submit with code sync (the copy frozen by the
cluster's submit), status and list (one ssh per cluster), attach (a command, and a shell in a
terminal), logs -f and dashboard --open through a dropped connection, cancel."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.cluster.login import LoginHost
from tests.cluster.terminal import Terminal
from tests.conftest import REPO, wait_until
from tests.helpers import git

pytestmark = pytest.mark.cluster

# Prints the marker of the synced code, then numbered lines until it is cancelled.
DRIVER = """\
import itertools, pathlib, time
print("marker:", pathlib.Path("marker.txt").read_text().strip(), flush=True)
for i in itertools.count(1):
    print(f"line {i}", flush=True)
    time.sleep(0.05)
"""
# Ray's temp dir, nrl-user's own: the nodes share /tmp/ray with root's jobs, whose
# ray_current_cluster (0600) makes `ray start` fail for another user (an issue of its own).
RAY_TMPDIR = "/tmp/nrl-remote-test-ray"
WRAPPER = '#!/bin/sh\necho ssh >> "$SSH_CALLS"\nexec /usr/bin/ssh "$@"\n'


class Lines:
    """A process's stdout, read line by line on a thread of its own."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def join(self) -> None:
        self._thread.join(timeout=30)


def test_a_job_from_the_laptop(login_host: LoginHost, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    (laptop / "config" / "nrl-launch").mkdir(parents=True)
    workdir = "nrl-launch-remote-test"
    (laptop / "config" / "nrl-launch" / "remotes.yaml").write_text(
        f"dev:\n  host: {login_host.host}\n  ssh_options: [-F, {login_host.ssh_config}]\n"
        f"  workdir: ~/{workdir}/code\n"
    )
    (laptop / "bin").mkdir()
    (laptop / "bin" / "ssh").write_text(WRAPPER)
    (laptop / "bin" / "ssh").chmod(0o755)
    calls = laptop / "ssh-calls"
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(laptop / "config"),
        "NRL_LAUNCH_STATE_DIR": str(laptop / "state"),
        "PATH": f"{laptop / 'bin'}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO / "src"),
        "SSH_CALLS": str(calls),
    }
    project = tmp_path / "project"
    project.mkdir()
    (project / "driver.py").write_text(DRIVER)
    (project / "marker.txt").write_text("synced\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "the driver")

    def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nrl_launch", *args],
            capture_output=True, text=True, env=env, cwd=project, timeout=timeout,
        )  # fmt: skip

    def popen(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "nrl_launch", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project,
        )  # fmt: skip

    job_id = ""
    following: list[tuple[subprocess.Popen[str], Lines]] = []
    try:
        submitted = cli(
            "--remote", "dev", "submit", "--container-runtime", "none", "--nodes", "1",
            "--time", "5", "--env", f"RAY_TMPDIR={RAY_TMPDIR}", "--", "python", "driver.py",
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        job_id = re.search(r"Submitted job (\d+) to dev \(login\)", submitted.stdout)[1]  # type: ignore[index]
        assert f"nrl-launch logs {job_id} -f" in submitted.stdout
        (project / "marker.txt").write_text("changed on the laptop after submit\n")

        def phase() -> str:
            done = cli("status", job_id, "--json")  # no --remote: the record routes it
            assert done.returncode == 0, done.stderr
            found = json.loads(done.stdout)["jobs"][0]
            assert found["phase"] not in ("FAILED", "TIMEOUT"), found
            return str(found["phase"])

        wait_until(lambda: phase() == "RUNNING", timeout=180)
        # The cluster's submit froze the synced copy into the job's log base (driver.snapshot).
        code = json.loads(cli("status", job_id, "--json").stdout)["jobs"][0]["code"]
        assert code and "/code-snapshots/" in code["snapshot"], code

        calls.write_text("")
        listed = cli("list", "--json")
        assert listed.returncode == 0, listed.stderr
        jobs = {(j["remote"], j["job_id"]) for j in json.loads(listed.stdout)["jobs"]}
        assert ("dev", job_id) in jobs
        assert len(calls.read_text().splitlines()) == 1  # one ssh for the cluster

        attached = cli("attach", job_id, "--", "bash", "-c", "echo attached on $(hostname)")
        assert attached.returncode == 0, attached.stderr
        assert re.fullmatch(r"attached on node\d\n", attached.stdout), attached.stdout
        # The pty path: a shell on the job's head node over `ssh -t`, typed into as a person does.
        laptop_env = ("XDG_CONFIG_HOME", "NRL_LAUNCH_STATE_DIR", "PATH", "PYTHONPATH", "SSH_CALLS")
        assignments = [f"{name}={env[name]}" for name in laptop_env]
        shell = shlex.join(
            ["env", *assignments, sys.executable, "-m", "nrl_launch", "attach", job_id]
        )
        with Terminal(shell, f"nrl-remote-attach-{job_id}", cwd=project) as terminal:
            terminal.wait_for_prompt()
            terminal.type('echo "on $(hostname): $((6 * 7))"')
            wait_until(lambda: re.search(r"on node\d: 42", terminal.screen()) is not None, 60)
            terminal.type("exit")

        logs = popen("logs", job_id, "-f")
        dashboard = popen("dashboard", job_id, "--open")
        log_lines, opened = Lines(logs), Lines(dashboard)
        following += [(logs, log_lines), (dashboard, opened)]
        wait_until(lambda: "line 40\n" in log_lines.lines, timeout=60)
        wait_until(lambda: "open http://127.0.0.1:" in opened.text(), timeout=60)
        url = re.search(r"open (http://127\.0\.0\.1:\d+)", opened.text())[1]  # type: ignore[index]

        # Ray's token auth is on: the dashboard asks for the job's token, whose file it names.
        token_file = re.search(r"the contents of (\S+) on login", opened.text())[1]  # type: ignore[index]
        token = Path(token_file).read_text().strip()  # the shared filesystem, read as root here

        def version() -> str:
            request = urllib.request.Request(
                f"{url}/api/version", headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.read().decode()

        assert "ray_version" in version()
        assert login_host.drop_connections() >= 2  # the log's and the tunnel's
        seen = len(log_lines.lines)
        wait_until(lambda: len(log_lines.lines) > seen + 40, timeout=90)

        def through_tunnel() -> bool:
            try:
                return "ray_version" in version()
            except OSError:
                return False

        wait_until(through_tunnel, timeout=90)

        cancelled = cli("cancel", job_id)
        assert cancelled.returncode == 0, cancelled.stderr
        assert logs.wait(timeout=120) == 1  # as local logs -f: 1 for a cancelled job
        assert dashboard.wait(timeout=120) == 0  # the job ended: the tunnel closes
        wait_until(lambda: phase() == "CANCELLED", timeout=60)
    finally:
        errors = []
        for proc, lines in following:
            proc.kill()
            proc.wait()
            lines.join()
            assert proc.stdout is not None and proc.stderr is not None
            errors.append(proc.stderr.read())
            proc.stdout.close()
            proc.stderr.close()
        if job_id:
            login_host.run(f"scancel {job_id}")
    text = log_lines.text()
    assert text.startswith("marker: synced\nline 1\n"), text[:200]
    numbers = [int(line.split()[1]) for line in log_lines.lines[1:] if line.startswith("line ")]
    assert numbers == list(range(1, len(numbers) + 1))  # every line once, in order
    assert "connection to login lost" in errors[0], errors[0]
    assert "reopening the tunnel on 127.0.0.1" in errors[1], errors[1]
    shutil.rmtree(login_host.home / workdir, ignore_errors=True)
