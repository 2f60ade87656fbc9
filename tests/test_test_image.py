"""The container tests' image (scripts/test-image) holds the venv and puts it first on PATH.

Reads the image for the current recipe without running it, and only when it is already built:
building it takes a minute and needs root (`scripts/test-image build`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "test-image"


@pytest.fixture(scope="module")
def image() -> Path:
    out = subprocess.run([SCRIPT, "path"], check=True, capture_output=True, text=True)
    path = Path(out.stdout.strip())
    if not path.is_file():
        pytest.skip(f"the test image is not built ({path}): run scripts/test-image build")
    if shutil.which("unsquashfs") is None:
        pytest.skip("unsquashfs is not installed (squashfs-tools)")
    return path


def cat(image: Path, member: str) -> str:
    out = subprocess.run(
        ["unsquashfs", "-cat", str(image), member], check=True, capture_output=True, text=True
    )
    return out.stdout


@pytest.mark.slow
def test_image_has_the_venv_first_on_path(image: Path) -> None:
    listed = subprocess.run(
        ["unsquashfs", "-l", str(image), "opt/venv/bin"], check=True, capture_output=True, text=True
    ).stdout.split()
    for tool in ("ray", "uv", "python"):
        assert f"squashfs-root/opt/venv/bin/{tool}" in listed
    environment = dict(
        line.split("=", 1) for line in cat(image, "etc/environment").splitlines() if "=" in line
    )
    assert environment["PATH"].startswith("/opt/venv/bin:")
    # enroot's login shell reads /etc/profile: Debian's would reset PATH and drop the venv.
    assert "PATH=" not in cat(image, "etc/profile")
    # The label names the recipe the image was built from, as its file name does.
    assert image.name == f"nrl-test-{cat(image, 'etc/nrl-test-image').strip()}.sqsh"
