"""The probe job of `doctor --on-nodes` (node/probe.sh after its header), run whole in a real bash
against fake srun and scontrol: each step's code reaches every node's bash, the report lands
where doctor reads it, and a job with a container (pyxis) checks it there, from the same code."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nrl_launch.doctor.probe import ProbeReport, parse_probe, probe_request
from tests.fakes import FakeSlurm
from tests.helpers import spec

PYXIS = {"image": "/shared/images/nemo-rl.sqsh"}


class Nodes:
    """Two fake nodes: srun runs the step's `bash -c CODE ...` once per node, here, with that
    node's name; with a container and `no_container`, pyxis fails before any task runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        fake = FakeSlurm(self.bin)
        hostnames = '[[ "$*" == "show hostnames node[0-1]" ]] && printf "node0\\nnode1\\n"'
        fake.script("scontrol", hostnames)
        # Its log: one line per call, srun's own arguments and the step (not the step's code).
        self.log = tmp_path / "srun-calls"
        srun = self.bin / "srun"
        srun.write_text(
            "#!/bin/bash\nargs=()\n"
            'while [[ $1 != bash ]]; do args+=("$1"); shift; done\n'
            f'printf "%s\\n" "${{args[*]}} step=$5" >>{self.log}\n'
            'if [[ -n ${FAKE_NO_CONTAINER:-} && " ${args[*]} " == *" --container-image="* ]]\n'
            "then\n"
            '  echo "pyxis: failed to import docker image" >&2; exit 1\nfi\n'
            'for node in node0 node1; do SLURMD_NODENAME=$node "$@"; done\n'
        )
        srun.chmod(0o755)
        (self.bin / "ray").write_text('#!/bin/bash\necho "ray, version 2.49.0"\n')
        (self.bin / "ray").chmod(0o755)
        self.logs = tmp_path / "logs"
        self.logs.mkdir()
        self.hf = tmp_path / "hf"
        self.hf.mkdir()

    def probe(self, no_container: bool = False, **values: object) -> ProbeReport:
        job = spec(slurm={"nodes": 2}, caches={"hf_home": str(self.hf)}, **values)
        dirs = [("logs.base_dir", self.logs), ("caches.hf_home", self.hf)]
        script = self.tmp / "probe.sbatch"
        script.write_text(probe_request(job, dirs, script)[1])
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "SLURM_JOB_ID": "9",
            "SLURM_JOB_NODELIST": "node[0-1]",
            "SLURM_SUBMIT_DIR": str(self.tmp),
            **({"FAKE_NO_CONTAINER": "1"} if no_container else {}),
        }
        done = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, check=False, env=env
        )
        # Everything goes to the report: the job's own output is /dev/null.
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        return parse_probe((self.logs / ".nrl-doctor-9.out").read_text())

    def srun(self) -> list[str]:
        """Each srun call: its arguments, then step=STEP."""
        return self.log.read_text().splitlines()

    def steps(self) -> list[str]:
        """Each srun call's step (host, info, read, clean)."""
        return [call.rpartition(" step=")[2] for call in self.srun()]


def _said(report: ProbeReport, what: str) -> list[tuple[str, str, str]]:
    return [(line.node, line.key, line.status) for line in report.of(what)]


def test_the_probe_runs_each_step_on_every_node_and_reports_where_doctor_reads(
    tmp_path: Path,
) -> None:
    nodes = Nodes(tmp_path)
    report = nodes.probe()
    assert (report.nodes, report.done) == (["node0", "node1"], True)
    assert _said(report, "host") == [("node0", "-", "ok"), ("node1", "-", "ok")]
    assert _said(report, "setup") == [("node0", "-", "ok"), ("node1", "-", "ok")]
    assert [line.detail for line in report.of("ray")] == [
        f"ray, version 2.49.0 ({nodes.bin}/ray)"
    ] * 2
    dirs = [("node0", "logs.base_dir", "ok"), ("node0", "caches.hf_home", "ok")]
    dirs += [("node1", "logs.base_dir", "ok"), ("node1", "caches.hf_home", "ok")]
    assert _said(report, "write") == dirs
    assert _said(report, "read") == dirs
    # No container: nothing is checked inside one, and no step gets pyxis flags.
    assert report.of("container") == [] and report.of("step") == []
    assert nodes.steps() == ["host", "info", "read", "clean"]
    assert not [c for c in nodes.srun() if "--container" in c or "--error" in c]
    # The clean step removed every node's file: the report is all that is left.
    assert [p.name for p in tmp_path.glob("*/.nrl-doctor-*")] == [".nrl-doctor-9.out"]


def test_a_setup_command_that_fails_is_reported_with_its_last_line(tmp_path: Path) -> None:
    report = Nodes(tmp_path).probe(setup="echo 'no such venv' >&2; false")
    assert [(line.status, line.detail) for line in report.of("setup")] == [
        ("failed", "exit 1: no such venv")
    ] * 2


def test_in_a_container_the_probe_checks_it_started_and_keeps_pyxis_s_words(
    tmp_path: Path,
) -> None:
    nodes = Nodes(tmp_path)
    report = nodes.probe(container=PYXIS)
    # Said from inside (here: the fake srun runs the task on this machine).
    assert _said(report, "container") == [("node0", "-", "ok"), ("node1", "-", "ok")]
    assert nodes.steps() == ["host", "info", "read", "clean"]
    host, info, read, clean = nodes.srun()
    assert "--container-image=/shared/images/nemo-rl.sqsh" in info.split()
    assert f"--error={nodes.logs}/.nrl-doctor-9-info-%N.err" in info.split()
    assert "--container-image=/shared/images/nemo-rl.sqsh" in read.split()
    assert not [c for c in (host, clean) if "--container" in c]


def test_a_container_that_starts_nowhere_ends_the_probe_after_its_info_step(
    tmp_path: Path,
) -> None:
    nodes = Nodes(tmp_path)
    report = nodes.probe(no_container=True, container=PYXIS)
    assert report.of("container") == []
    assert _said(report, "host") == [("node0", "-", "ok"), ("node1", "-", "ok")]
    assert [(line.key, line.status) for line in report.of("step")] == [("info", "failed")]
    assert report.done
    # No read step (pyxis would fail again), and nothing was written to clean.
    assert nodes.steps() == ["host", "info"]
