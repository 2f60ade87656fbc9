"""The options of sweeps and experiments (submit and plan's --sweep, list/status/cancel's
--experiment), declared once here as `Annotated` types, as cli/options.py declares the job's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from nrl_launch.cli.options import option_info

__all__ = ["ExperimentFilter", "ExperimentName", "MaxRunning", "Sweep", "SweepFile"]

_SWEEP = "Sweep"

Sweep = Annotated[
    list[str] | None,
    option_info(
        "--sweep",
        help="One job per value, as one experiment: KEY=V1,V2,... appended to each driver as "
        "Hydra's KEY=V; given again, the product of the values.",
        panel=_SWEEP,
        metavar="KEY=VALUES",
    ),
]
SweepFile = Annotated[
    Path | None,
    option_info(
        "--sweep-file",
        help="YAML of KEY: [V1, V2, ...], swept as --sweep (together with them).",
        panel=_SWEEP,
        metavar="FILE",
    ),
]
ExperimentName = Annotated[
    str | None,
    option_info(
        "--experiment",
        help="The experiment the sweep's jobs belong to (default: a name made up and printed).",
        panel=_SWEEP,
        metavar="NAME",
    ),
]
MaxRunning = Annotated[
    int | None,
    option_info(
        "--max-running",
        help="Run at most K of the sweep's jobs at once: K lanes, each job starting when the "
        "one before it in its lane ends (Slurm's afterany dependency).",
        panel=_SWEEP,
        metavar="K",
    ),
]
ExperimentFilter = Annotated[
    str | None,
    option_info(
        "--experiment",
        help="The jobs of this experiment (submit --sweep), with a summary line.",
        metavar="NAME",
    ),
]
