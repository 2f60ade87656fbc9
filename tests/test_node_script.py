"""The node steps' helpers, run in a real bash from a rendered script: finding Ray's Python, and
which of a node's enroot containers a pyxis job removes when it ends."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from nrl_launch.backends import slurm
from tests.test_quoting import bash_values, spec

PYXIS = {"image": "/shared/images/nemo-rl.sqsh", "mounts": ["/shared"], "workdir": "/shared"}


def _ray_python(path: Path) -> str:
    """What the rendered script's ray_python prints with `path` first on PATH."""
    script = slurm.plan(spec()).script
    function = script[script.index("ray_python() {") :].split("\n}\n")[0] + "\n}\n"
    return bash_values(function, f'PATH={path}:$PATH; printf "%s\\0" "$(ray_python)"')[0]


def test_ray_python_is_the_venv_s_when_ray_is_a_symlink_into_it(tmp_path: Path) -> None:
    """`ray` on PATH is /usr/local/bin/ray -> /opt/venv/bin/ray, and a Python without Ray sits
    next to the link: the counter must run the venv's."""
    venv = tmp_path / "opt" / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "ray").write_text(f"#!{venv / 'python'}\nimport ray\n")
    (venv / "ray").chmod(0o755)
    links = tmp_path / "usr" / "local" / "bin"
    links.mkdir(parents=True)
    (links / "ray").symlink_to(venv / "ray")
    (links / "python").write_text("#!/bin/sh\necho not the venv's\n")
    (links / "python").chmod(0o755)
    assert _ray_python(links) == str(venv / "python")


def test_ray_python_follows_the_link_when_the_first_line_names_no_python(tmp_path: Path) -> None:
    """pip writes a /bin/sh trampoline when the interpreter's path is too long for `#!`."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "ray").write_text("#!/bin/sh\n'''exec' \"$0\" \"$@\"\n' '''\n")
    (venv / "ray").chmod(0o755)
    links = tmp_path / "bin"
    links.mkdir()
    (links / "ray").symlink_to(venv / "ray")
    assert _ray_python(links) == str(venv / "python")


def _removed_on_a_node(tmp_path: Path, containers: list[str], running: str | None) -> list[str]:
    """What remove_containers_node asks enroot to remove, given what `enroot list` shows and
    the job ids squeue lists (None: squeue fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = shlex.join(["printf", "%s\\n", *containers]) if containers else "true"
    (bin_dir / "enroot").write_text(
        "#!/bin/bash\n"
        f"case $1 in\n  list) {listing} ;;\n"
        "  remove) shift; while [[ $1 == -* ]]; do shift; done\n"
        f'    printf "%s\\n" "$@" >{tmp_path / "removed"} ;;\nesac\n'
    )
    squeue = f'printf "%s\\n" {running}' if running is not None else "exit 1"
    (bin_dir / "squeue").write_text(f"#!/bin/bash\n{squeue}\n")
    for tool in ("enroot", "squeue"):
        (bin_dir / tool).chmod(0o755)
    script = slurm.plan(spec(container=PYXIS)).script
    probe = f"PATH={bin_dir}:$PATH NRL_CONTAINER_NAME=nrl-42 remove_containers_node"
    done = subprocess.run(
        ["bash", "-c", script.split("# ---- Batch step")[0] + "\n" + probe],
        capture_output=True,
        text=True,
        env={**os.environ, "NRL_LOG_DIR": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    removed = tmp_path / "removed"
    return removed.read_text().splitlines() if removed.exists() else []


def test_a_node_removes_this_job_s_container_under_either_scope(tmp_path: Path) -> None:
    containers = ["pyxis_nrl-42", "pyxis_42_nrl-42", "pyxis_nrl-420", "pyxis_mine", "other"]
    removed = _removed_on_a_node(tmp_path, containers, running="42 420")
    assert removed == ["pyxis_nrl-42", "pyxis_42_nrl-42"]


def test_a_node_removes_containers_of_nrl_jobs_that_no_longer_run(tmp_path: Path) -> None:
    """A job that scancel ended could not remove its containers: the next job does."""
    containers = ["pyxis_nrl-42", "pyxis_nrl-7", "pyxis_nrl-8-1", "pyxis_nrl-9", "pyxis_x-7"]
    removed = _removed_on_a_node(tmp_path, containers, running="42 9")
    assert removed == ["pyxis_nrl-42", "pyxis_nrl-7", "pyxis_nrl-8-1"]


def test_without_squeue_only_this_job_s_containers_go(tmp_path: Path) -> None:
    removed = _removed_on_a_node(tmp_path, ["pyxis_nrl-42", "pyxis_nrl-7"], running=None)
    assert removed == ["pyxis_nrl-42"]


def test_a_node_with_no_container_of_the_job_removes_nothing(tmp_path: Path) -> None:
    assert _removed_on_a_node(tmp_path, ["pyxis_mine"], running="42") == []
