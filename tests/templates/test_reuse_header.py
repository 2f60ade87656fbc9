"""container.reuse in the job's header: the value the node program reads, and what the header
says about it (a registry tag is never reused)."""

from __future__ import annotations

import pytest

from nrl_launch.backends import slurm
from tests.helpers import bash_values, spec


def _header(image: str, reuse: bool) -> str:
    script = slurm.plan(spec(container={"image": image, "reuse": reuse})).script
    return script.split("# ---- nrl-launch node program")[0]


@pytest.mark.parametrize("reuse", [True, False])
def test_the_header_sets_reuse_as_the_spec_says(reuse: bool) -> None:
    script = slurm.plan(spec(container={"image": "/x/img.sqsh", "reuse": reuse})).script
    assert bash_values(script, 'printf "%s\\0" "$NRL_CONTAINER_REUSE"') == [str(int(reuse))]


def test_reuse_is_off_unless_asked_and_without_a_container() -> None:
    assert "NRL_CONTAINER_REUSE=0" in _header("/x/img.sqsh", reuse=False)
    none = slurm.plan(spec(container={"runtime": "none"})).script
    assert "NRL_CONTAINER_REUSE" not in none.split("# ---- nrl-launch node program")[0]


@pytest.mark.parametrize(
    ("image", "said"),
    [
        ("nvcr.io/nvidia/nemo-rl:v0.4.0", True),
        ("nvcr.io/nvidia/nemo-rl@sha256:" + "0" * 64, False),
        ("/shared/nemo-rl.sqsh", False),
        ("./nemo-rl.sqsh", False),
    ],
)
def test_a_registry_tag_is_said_to_be_never_reused(image: str, said: bool) -> None:
    assert ("registry tag, which can move" in _header(image, reuse=True)) is said
    assert "registry tag, which can move" not in _header(image, reuse=False)
