"""Recipes for real on the dev cluster: `submit grpo --config FILE OVERRIDES` sizes the job from
the config and the driver receives exactly the argv the user meant; `--chain` runs one job after
another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.conftest import job_status, wait_for_clean_nodes
from tests.conftest import Cli, wait_until

pytestmark = pytest.mark.cluster
NEMO = Path(__file__).parents[1] / "data" / "nemo_rl" / "examples" / "configs"

# A stand-in for examples/run_grpo.py: it records its argv and the cluster it sees.
DRIVER = """\
import json, os, sys
import ray
ray.init()
gpus = int(ray.cluster_resources().get("GPU", 0))
with open(os.environ["ARGV_OUT"], "w") as out:
    json.dump({"argv": sys.argv[1:], "gpus": gpus, "nodes": len(ray.nodes())}, out)
"""


@pytest.fixture
def recipe(tmp_path: Path, cluster_job: list[str]) -> list[str]:
    """A profile pointing the grpo recipe at the stand-in driver, run with the venv's python."""
    (tmp_path / "driver.py").write_text(DRIVER)
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "nemo_rl:\n"
        "  launcher: [python]\n"
        f"  drivers:\n    grpo: {tmp_path / 'driver.py'}\n"
        "slurm:\n  exclude: node[2-3]\n"
    )
    return ["--profile", str(profile), *cluster_job, "--env", f"ARGV_OUT={tmp_path / 'argv.json'}"]


def config(tmp_path: Path, nodes: int, gpus: int) -> Path:
    path = tmp_path / "grpo.yaml"
    path.write_text(
        f"defaults: {NEMO / 'grpo_base.yaml'}\n"
        f"cluster: {{num_nodes: {nodes}, gpus_per_node: {gpus}}}\n"
        f"checkpointing: {{checkpoint_dir: {tmp_path / 'ckpt'}}}\n"
        f"logger: {{log_dir: {tmp_path / 'logs'}}}\n"
    )
    return path


def test_recipe_job_is_sized_by_its_config(cli: Cli, recipe: list[str], tmp_path: Path) -> None:
    cfg = config(tmp_path, nodes=2, gpus=8)
    overrides = [
        "policy.model_name=/models/it's a $(whoami) run",
        "++logger.wandb.name=${oc.env:USER}",
    ]
    result = cli("submit", "--wait", "-q", "grpo", "--config", str(cfg), *overrides, *recipe)
    assert result.code == 0, result.out + result.err
    status = job_status(cli, result.out.split()[0])
    assert status["phase"] == "COMPLETED"
    seen = json.loads((tmp_path / "argv.json").read_text())
    assert seen["nodes"] == 2 and seen["gpus"] == 16  # the nodes and GPUs came from the config
    # --time 10 is within the 15-minute save margin: no deadline is passed (a warning says so).
    assert seen["argv"] == ["--config", str(cfg), *overrides]
    assert "checkpointing.checkpoint_must_save_by not set: the time limit 10" in result.err
    wait_for_clean_nodes(60)


def test_chain_runs_its_jobs_one_after_another(cli: Cli, recipe: list[str], tmp_path: Path) -> None:
    cfg = config(tmp_path, nodes=1, gpus=8)
    result = cli(
        "submit",
        "--json",
        "--chain",
        "2",
        "grpo",
        "--config",
        str(cfg),
        *recipe,
        "--set",
        "slurm.job_name=chain-test",
        "--time",
        "20",
    )
    assert result.code == 0, result.err
    first, second = json.loads(result.out)["chain"]
    wait_until(lambda: job_status(cli, second)["phase"] == "COMPLETED", 240)
    assert job_status(cli, first)["phase"] == "COMPLETED"
    timings = [_timeline(Path(job_status(cli, j)["log_dir"])) for j in (first, second)]
    # The second job started only after the first had ended (Slurm's singleton dependency).
    assert timings[1]["started"] >= timings[0]["driver_ended"]
    seen = json.loads((tmp_path / "argv.json").read_text())
    # Set on the node when the driver started: the job's end (20 min) less the 15-minute
    # margin, less the time the job took to get there.
    key, value = seen["argv"][-1].split("=")
    assert key == "++checkpointing.checkpoint_must_save_by"
    days, hours, minutes, seconds = (int(p) for p in value.split(":"))
    assert 120 < ((days * 24 + hours) * 60 + minutes) * 60 + seconds <= 300, value


def _timeline(log_dir: Path) -> dict[str, float]:
    """Each phase's epoch time, from the job's timeline file."""
    phases = {}
    for line in (log_dir / "timeline").read_text().splitlines():
        name, at = line.split()
        phases[name] = float(at)
    return phases
