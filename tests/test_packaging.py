"""The wheel carries every template, and the installed package renders from it alone."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("nrl_launch-*.whl")
    return built


@pytest.mark.slow
def test_wheel_contains_every_template(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = sorted(
        p.relative_to(REPO / "templates") for p in (REPO / "templates").rglob("*.j2")
    )
    assert templates
    for template in templates:
        assert f"nrl_launch/templates/{template.as_posix()}" in names
    assert "nrl_launch/cli/__init__.py" in names
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))
    )
    assert b"nrl-launch = nrl_launch.cli:main" in entry_points


@pytest.mark.slow
def test_unpacked_wheel_renders_with_its_own_templates(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import nrl_launch.paths as p, sys; print(p.templates_dir()); "
            "sys.argv = ['nrl-launch', 'render', '-f', sys.argv[1]]; "
            "from nrl_launch.cli import main; main()",
            str(EXAMPLES / "grpo-2node.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert run.returncode == 0, run.stderr
    templates_dir, script = run.stdout.split("\n", 1)
    assert templates_dir == str(site / "nrl_launch" / "templates")
    assert script.startswith("#!/usr/bin/env bash")


def test_python_dash_m_runs_the_cli() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "nrl_launch", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0
    assert run.stdout.startswith("nrl-launch ")
