"""Reading the config as NeMo RL's drivers do: `--config FILE` and Hydra overrides after it.

The loading itself (the `defaults:` chain relative to each file, `_override_`, `key=v`, `+key=v`,
`++key=v`, `~key`, the `mul`/`add`/`div`/`max` resolvers) is nrl-launch's, so a run reads its
config exactly as `nrl-launch plan` did when it sized the job.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from nrl_launch.errors import ConfigError
from nrl_launch.nemorl import config as nemo_config
from nrl_launch.nemorl.job import ddhhmmss_minutes
from nrl_launch.nemorl.layout import Layout, compute


def load(argv: list[str], default: Path) -> tuple[dict[str, Any], Layout, Path]:
    """(the resolved config, its GPU layout, the config file); exits 2 with one line per
    problem when the config or an override is bad, or when the layout does not fit."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=Path, default=default)
    args, overrides = parser.parse_known_args(argv)
    try:
        loaded = nemo_config.load(args.config, overrides)
        from omegaconf import OmegaConf

        cfg = OmegaConf.to_container(loaded.tree, resolve=True)
    except ConfigError as err:
        fail(*err.problems)
    except Exception as err:  # an interpolation that does not resolve, say
        fail(f"{args.config}: {err}")
    layout = compute(loaded.value, loaded.present)
    if layout.problems:
        fail(*layout.problems)
    assert isinstance(cfg, dict)
    return cfg, layout, args.config


def fail(*lines: str) -> Any:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    sys.exit(2)


def next_experiment_dir(log_dir: str) -> Path:
    """`<log_dir>/exp_NNN`, one past the highest there, as NeMo RL names each run's logs."""
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    taken = [int(m.group(1)) for p in root.iterdir() if (m := re.fullmatch(r"exp_(\d+)", p.name))]
    while True:
        path = root / f"exp_{max(taken, default=0) + 1:03d}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            taken.append(int(path.name[4:]))


def ddhhmmss_seconds(text: str, key: str) -> float:
    """`DD:HH:MM:SS` (checkpointing.checkpoint_must_save_by) in seconds, read as nrl-launch reads
    it when it checks the value against the job's time limit."""
    minutes = ddhhmmss_minutes(str(text))
    if minutes is None:
        fail(f"{key}={text!r}: expected DD:HH:MM:SS, e.g. 00:03:45:00")
    return float(minutes) * 60


def ray_address() -> str:
    """This job's Ray: RAY_ADDRESS, which nrl-launch sets on the head; never a guess from
    /tmp/ray, which may name another job's cluster."""
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        fail("RAY_ADDRESS is not set: run this driver in a Ray job (nrl-launch submit sets it)")
    return str(address)
