"""The wheel carries every template, compiled too, and the installed package renders from it
alone."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import jinja2
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
        p.relative_to(REPO / "src" / "nrl_launch" / "templates")
        for p in (REPO / "src" / "nrl_launch" / "templates").rglob("*.j2")
    )
    assert templates
    for template in templates:
        assert f"nrl_launch/templates/{template.as_posix()}" in names
    assert "nrl_launch/cli/__init__.py" in names
    # The node program, which every job script carries after its header (nrl_launch/node/).
    node = sorted((REPO / "src" / "nrl_launch" / "node").glob("*.sh"))
    assert len(node) >= 10
    for path in node:
        assert f"nrl_launch/node/{path.name}" in names
    assert "nrl_launch/node/__init__.py" in names
    # Each compiled too, as a module (templating.precompile, run by hatch_build.py).
    for template in templates:
        key = jinja2.ModuleLoader.get_template_key(template.as_posix())
        assert f"nrl_launch/_templates_compiled/{key}.py" in names
    assert "nrl_launch/_templates_compiled/__init__.py" in names
    entry_points = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))
    )
    assert b"nrl-launch = nrl_launch.cli:main" in entry_points


def _run_unpacked(
    wheel: Path, site: Path, code: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """`python -c CODE ARGS...` with the wheel unpacked into `site` as the package's source, run
    from site's parent."""
    zipfile.ZipFile(wheel).extractall(site)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=site.parent,
        env={**os.environ, "PYTHONPATH": str(site)},
    )


@pytest.mark.slow
def test_unpacked_wheel_renders_with_its_own_templates(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    run = _run_unpacked(
        wheel,
        site,
        "import nrl_launch.paths as p, sys; print(p.templates_dir()); "
        "sys.argv = ['nrl-launch', 'render', '-f', sys.argv[1]]; "
        "from nrl_launch.cli import main; main()",
        str(EXAMPLES / "grpo-2node.yaml"),
    )
    assert run.returncode == 0, run.stderr
    templates_dir, script = run.stdout.split("\n", 1)
    assert templates_dir == str(site / "nrl_launch" / "templates")
    assert script.startswith("#!/usr/bin/env bash")


# Renders the job in argv[1] with the installed package, then prints (to stderr) the file each
# template's code came from.
_RENDER_AND_SAY_WHENCE = """
import sys
from nrl_launch import templating
from nrl_launch.cli import main
try:
    main(["render", "-f", sys.argv[1]])
finally:
    env = templating._environment()
    for name in env.list_templates():
        code = env.get_template(name).root_render_func.__code__
        print(name, code.co_filename, file=sys.stderr)
"""


@pytest.mark.slow
def test_unpacked_wheel_renders_from_its_compiled_templates(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    job = str(EXAMPLES / "grpo-2node.yaml")
    installed = _run_unpacked(wheel, site, _RENDER_AND_SAY_WHENCE, job)
    assert installed.returncode == 0, installed.stderr
    whence = dict(line.split(" ", 1) for line in installed.stderr.splitlines() if ".j2 " in line)
    templates = REPO / "src" / "nrl_launch" / "templates"
    assert set(whence) == {p.name for p in templates.glob("*.j2")}  # every one, compiled
    for name, code_file in whence.items():
        assert Path(code_file).parent == site / "nrl_launch" / "_templates_compiled", name
    # The same bytes as the checkout renders, compiling its templates from their source.
    checkout = subprocess.run(
        [sys.executable, "-m", "nrl_launch", "render", "-f", job],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert installed.stdout == checkout.stdout


def test_python_dash_m_runs_the_cli() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "nrl_launch", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0
    assert run.stdout.startswith("nrl-launch ")
