"""The node program (nrl_launch/node/): static bash that every job script carries verbatim after
its rendered header. Checked on its own (shellcheck, file by file and assembled), and held to
what a render ends with."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nrl_launch import node
from nrl_launch.backends import local, slurm
from nrl_launch.doctor.probe import probe_request
from tests.conftest import need_tool
from tests.helpers import spec

NODE_FILES = sorted(Path(node.__file__).parent.glob("*.sh"))
# (kind, sandbox, pools)
KINDS: list[tuple[node.Kind, bool, bool]] = [
    ("slurm", False, False),
    ("slurm", True, False),
    ("slurm", False, True),
    ("local", False, False),
    ("local", False, True),
    ("lepton", False, False),
]
KIND_IDS = ["slurm", "slurm-sandbox", "slurm-pools", "local", "local-pools", "lepton"]
# A job with a pool whose URL goes to the driver.
POOLS = {
    "driver": {"command": ["python", "train.py", "++judge=__JUDGE_URL__"]},
    "pools": {"judge": {"replicas": 2, "command": ["serve"], "balancer_port": 8100}},
}
# The Slurm scripts that run no Ray: a plain command's (`run`, pull's, pull --force's: with
# remove_first.sh) and doctor's probe's. Each program ends with its entry point.
NO_RAY: list[tuple[node.Kind, bool, str]] = [
    ("plain", False, "esac"),
    ("plain", True, "esac"),
    ("probe", False, "probe_main"),
]


def _shellcheck(path: Path, *exclude: str) -> str:
    args = [need_tool("shellcheck"), "--shell=bash", "--severity=style"]
    if exclude:
        args.append("--exclude=" + ",".join(exclude))
    done = subprocess.run([*args, str(path)], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode else ""


def test_every_node_file_is_plain_bash_in_a_program() -> None:
    """No Jinja in any file (a job's values are the header's), each well under 500 lines, and
    every one is part of some kind's program."""
    assert len(NODE_FILES) >= 10
    used = {
        path
        for kind, sandbox, pools in KINDS
        for path in node.files(kind, sandbox=sandbox, pools=pools)
    }
    used |= {path for kind, first, _ in NO_RAY for path in node.files(kind, remove_first=first)}
    for path in NODE_FILES:
        text = path.read_text(encoding="utf-8")
        assert "{{" not in text and "{%" not in text and "{#" not in text, path.name
        assert len(text.splitlines()) < 400, path.name
        assert path in used, path.name


@pytest.mark.parametrize("path", NODE_FILES, ids=lambda p: p.name)
def test_each_node_file_is_shellcheck_clean_on_its_own(path: Path) -> None:
    """SC2034 (a variable assigned and not used) aside: a file's values are read by the others
    (the ports' arrays by the head and workers, NRL_CONTAINER_ARGS by the steps)."""
    assert _shellcheck(path, "SC2034") == ""


@pytest.mark.parametrize(("kind", "sandbox", "pools"), KINDS, ids=KIND_IDS)
def test_each_assembled_program_is_shellcheck_clean(
    kind: node.Kind, sandbox: bool, pools: bool, tmp_path: Path
) -> None:
    """The program as a job carries it, without its header: only the header's values are
    unknown to it (SC2034 aside, as for one file: the header's job_env and ports read some)."""
    path = tmp_path / f"{kind}.sh"
    path.write_text(node.program(kind, sandbox=sandbox, pools=pools), encoding="utf-8")
    assert _shellcheck(path, "SC2034") == ""
    # It ends with the mode dispatch.
    assert node.program(kind, sandbox=sandbox, pools=pools).rstrip().endswith("esac")


def _render(kind: str) -> str:
    if kind == "local":
        return local.plan(spec(backend="local", container={"runtime": "none"})).script
    if kind == "slurm-sandbox":
        return slurm.plan(spec(sandbox={"command": ["x"], "unsafe_on_host": True})).script
    if kind == "slurm-pools":
        return slurm.plan(spec(**POOLS)).script
    return slurm.plan(spec()).script


@pytest.mark.parametrize("render", ["slurm", "slurm-sandbox", "slurm-pools", "local"])
def test_a_render_ends_with_exactly_the_program_after_the_marker(render: str) -> None:
    """Above the marker, the job's header; after it, the kind's program, byte for byte."""
    kind: node.Kind = "local" if render == "local" else "slurm"
    text = _render(render)
    assert text.count(node.MARKER) == 1
    header, program = text.split(node.MARKER)
    assert program == node.program(
        kind, sandbox=render == "slurm-sandbox", pools=render == "slurm-pools"
    )
    assert header.startswith("#!/usr/bin/env bash\n")
    assert "\ncase ${1:-} in" not in header


@pytest.mark.parametrize(
    ("kind", "remove_first", "last"), NO_RAY, ids=["plain", "plain-remove-first", "probe"]
)
def test_each_program_without_ray_is_shellcheck_clean(
    kind: node.Kind, remove_first: bool, last: str, tmp_path: Path
) -> None:
    """As a Ray job's: shellcheck-clean without its header, and ending with its entry point."""
    text = node.program(kind, remove_first=remove_first)
    path = tmp_path / f"{kind}.sh"
    path.write_text(text, encoding="utf-8")
    assert _shellcheck(path, "SC2034") == ""
    assert text.rstrip().endswith(last)


def _render_no_ray(kind: str) -> str:
    if kind == "probe":
        dirs = [("logs.base_dir", Path("/shared/logs"))]
        return probe_request(spec(), dirs, Path("/shared/probe.sbatch"))[1]
    return slurm.plan_plain(spec(), remove_first="/x.sqsh" if kind == "pull" else None).script


@pytest.mark.parametrize("kind", ["run", "pull", "probe"])
def test_a_plain_job_or_probe_is_its_header_then_exactly_its_program(kind: str) -> None:
    """Built as a Ray job is: a header of values (no function, no Jinja left in bash), the
    marker, then the program, byte for byte."""
    text = _render_no_ray(kind)
    assert text.count(node.MARKER) == 1
    header, program = text.split(node.MARKER)
    which: node.Kind = "probe" if kind == "probe" else "plain"
    assert program == node.program(which, remove_first=kind == "pull")
    # The header defines no function of its own: job_env, the same for every kind, aside.
    assert re.findall(r"^(\w+)\(\) \{", header, flags=re.MULTILINE) == ["job_env"]
