"""Golden renders of every example job: the script users get, pinned byte for byte.

To accept a deliberate change, rerun with NRL_LAUNCH_ACCEPT_GOLDEN=1 and review the diff:

    NRL_LAUNCH_ACCEPT_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli, shellcheck
from tests.golden_cases import (
    CASES,
    GOLDEN,
    NEMO_CHECKOUT,
    PYXIS_FLAGS,
    Case,
    container_args,
    golden_path,
    render,
)


def test_every_example_has_a_golden() -> None:
    assert len(CASES) >= 7
    names = {golden_path(c).relative_to(GOLDEN) for c in CASES}
    stale = {p.relative_to(GOLDEN) for p in GOLDEN.rglob("*.sbatch")} - names
    assert not stale, f"golden files with no example: {sorted(stale)}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_render_matches_golden(cli: Cli, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    out = render(cli, case, monkeypatch)
    golden = golden_path(case)
    if os.environ.get("NRL_LAUNCH_ACCEPT_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(out, encoding="utf-8")
    expected = golden.read_text(encoding="utf-8") if golden.exists() else ""
    if out != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                out.splitlines(keepends=True),
                str(golden),
                "rendered",
            )
        )
        pytest.fail(
            f"{case.name} renders differently from {golden.name}:\n{diff}\n"
            "If the change is intended: NRL_LAUNCH_ACCEPT_GOLDEN=1 python -m pytest "
            "tests/test_golden.py"
        )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_golden_is_valid_bash(case: Case) -> None:
    result = subprocess.run(["bash", "-n", str(golden_path(case))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_golden_is_shellcheck_clean(case: Case) -> None:
    result = shellcheck(golden_path(case))
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_render_is_deterministic(cli: Cli, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    assert render(cli, case, monkeypatch) == render(cli, case, monkeypatch)


def test_header_names_version_and_submit_command(cli: Cli) -> None:
    from nrl_launch import __version__

    lines = cli("render", "-f", str(EXAMPLES / "grpo-2node.yaml")).out.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[1].startswith(f"# Rendered by nrl-launch {__version__}")
    assert lines[2].startswith("# Submit with: sbatch --parsable ")
    assert lines[2].endswith(" nrl-launch.sbatch")


def test_sbatch_flags_are_sorted_and_complete(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    scenario = EXAMPLES / "scenarios" / "nemotron-3-nano-30b-32node"
    monkeypatch.chdir(NEMO_CHECKOUT)
    result = cli(
        "render",
        "--json",
        "--profile",
        str(scenario / "profile.yaml"),
        "-f",
        str(scenario / "job.yaml"),
    )
    argv = json.loads(result.out)["argv"]
    flags = argv[2:-1]
    assert argv[:2] == ["sbatch", "--parsable"]
    assert flags == sorted(flags)
    assert "--nodes=32" in flags
    assert "--gres=gpu:8" in flags
    assert "--account=my_account" in flags
    assert "--job-name=nemotron-nano-30b" in flags
    assert "--time=8:00:00" in flags
    assert "--exclusive" in flags
    assert "--export=ALL" in flags  # secrets travel by name in the exported environment


PYXIS_CASES = [
    c
    for c in CASES
    if golden_path(c).exists() and "\nNRL_CONTAINER_RUNTIME=pyxis\n" in golden_path(c).read_text()
]


@pytest.mark.parametrize("case", PYXIS_CASES, ids=lambda c: c.name)
def test_golden_container_args_are_pyxis_flags(case: Case) -> None:
    """Run the golden's own set_container_args in bash: every argument it gives srun is a pyxis
    flag, the image and workdir are set, and every mount (the log dir included) is SRC:DST[:FLAGS]
    with absolute paths."""
    args = container_args(golden_path(case), "ray-head")
    assert set(args) <= PYXIS_FLAGS, set(args) - PYXIS_FLAGS
    assert args["--container-image"] and args["--container-workdir"].startswith("/")
    assert args["--container-name"] == "ray-head"
    mounts = args["--container-mounts"].split(",")
    assert "/shared/logs/77-logs:/shared/logs/77-logs" in mounts
    for mount in mounts:
        src, dst, *flags = mount.split(":")
        assert src.startswith("/") and dst.startswith("/") and len(flags) <= 1, mount


@pytest.mark.parametrize("case", PYXIS_CASES, ids=lambda c: c.name)
def test_golden_attach_reenters_the_named_container_without_an_image(case: Case) -> None:
    """Attach names the node's container and gives no image: pyxis enters the container the
    job's step made, importing (pulling) nothing."""
    args = container_args(golden_path(case), "ray-worker", "attach")
    assert set(args) <= PYXIS_FLAGS and "--container-image" not in args
    assert args["--container-name"] == "ray-worker"


def test_attach_without_a_container_workdir_runs_on_a_login_node(cli: Cli, tmp_path: Path) -> None:
    """No container.workdir: the workdir is the submit dir, which attach knows from its script
    (no SLURM_SUBMIT_DIR on a login node)."""
    script = tmp_path / "job.sbatch"
    image = "nvcr.io/nvidia/nemo-rl:v0.6.0"
    assert cli("render", "--interactive", "--container", image, "-o", str(script)).code == 0
    args = container_args(script, "ray-head", "attach")
    assert args["--container-workdir"] == "/submit" and "--container-image" not in args


def test_some_example_uses_pyxis() -> None:
    assert len(PYXIS_CASES) >= 4


def test_local_render_is_valid_and_shellcheck_clean(cli: Cli, tmp_path: Path) -> None:
    """The local backend's script (run for real in test_local_backend.py) passes the same
    checks as the Slurm goldens."""
    script = tmp_path / "local.sh"
    result = cli("render", "--backend", "local", "-o", str(script), "--", "python", "x.py")
    assert result.code == 0, result.err
    assert result.out.strip() == f"bash {script} JOBID"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    checked = shellcheck(script)
    assert checked.returncode == 0, checked.stdout


def test_the_docs_name_every_example() -> None:
    """The paragraph on examples/ (docs/quickstart.md) names each thing in it, and nothing that
    is not."""
    import re

    from tests.conftest import doc_page

    text = doc_page("`examples/` has").read_text()
    paragraph = text[text.index("`examples/` has") :].split("\n\n")[0]
    named = {n.split("/")[0] for n in re.findall(r"`([\w.-]+(?:/[\w.-]+)*/?)`", paragraph)}
    present = {p.name for p in EXAMPLES.iterdir() if not p.name.startswith((".", "__"))}
    assert present <= named | {"examples"}, sorted(present - named)
    assert named - {"examples"} <= present, sorted(named - present)
