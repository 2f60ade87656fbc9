"""`nrl-launch render --header`: the part of the script a Slurm user reads (the #SBATCH lines,
the job's values, its driver), without the node program every job of its kind shares."""

from __future__ import annotations

from tests.conftest import REPO, Cli

EXAMPLE = str(REPO / "examples" / "grpo-2node.yaml")


def test_the_header_is_the_script_s_own_part_and_short(cli: Cli) -> None:
    whole = cli("render", "-f", EXAMPLE)
    header = cli("render", "-f", EXAMPLE, "--header")
    assert whole.code == header.code == 0, header.err
    assert whole.out.startswith(header.out.rstrip())  # its first lines, as they are
    lines = header.out.splitlines()
    assert len(lines) < 150 < len(whole.out.splitlines())
    assert any(line.startswith("#SBATCH --nodes=2") for line in lines)
    assert any(line.startswith("NRL_DRIVER=(") for line in lines)
    assert "nrl-launch node program" not in header.out
