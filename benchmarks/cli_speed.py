"""How fast the CLI starts, measured as a user feels it: a fresh process each run.

Times `python -c pass` (the floor), `nrl-launch --help`, `nrl-launch render` of a 2-node
job and `nrl-launch plan` of a 32-node NeMo RL recipe, and reports whether `ray` (or any heavy
module) was imported on those paths.

    python benchmarks/cli_speed.py [--runs 15]

Targets on the project's 2-core machine (median): --help <= 150 ms, render <= 250 ms,
plan <= 300 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "examples" / "grpo-2node.yaml"
# plan reads a NeMo RL config through OmegaConf: a 32-node recipe with a defaults chain.
CONFIG = (
    REPO
    / "tests/data/nemo_rl/examples/configs/recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.yaml"
)
# The console script users run; `python -m nrl_launch` where it is not installed.
_SCRIPT = Path(sys.executable).with_name("nrl-launch")
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "nrl_launch"]
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "nrl-launch --help": [*CLI, "--help"],
    "nrl-launch render (2 nodes)": [*CLI, "render", "-f", str(JOB)],
    "nrl-launch plan (32-node recipe)": [*CLI, "plan", "--config", str(CONFIG)],
}
TARGETS_MS = {
    "nrl-launch --help": 150,
    "nrl-launch render (2 nodes)": 250,
    "nrl-launch plan (32-node recipe)": 300,
}
HEAVY = ("ray", "torch", "numpy", "pandas")
# What the render path cannot avoid: the cost of importing each library in a fresh process.
IMPORTS = {
    "typer": "import typer",
    "pydantic (BaseModel)": "from pydantic import BaseModel",
    "jinja2": "import jinja2",
    "yaml": "import yaml",
    "nrl_launch.spec (pydantic + the spec's models)": "import nrl_launch.spec",
    "all of the render path": (
        "import nrl_launch.cli.render, nrl_launch.container_checks, nrl_launch.backends.slurm"
    ),
}


def time_runs(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, capture_output=True, check=True)  # warm the page cache and .pyc files
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def python_argv(argv: list[str]) -> list[str]:
    """`argv` run under the interpreter explicitly, so that -X options can be added."""
    return [sys.executable, "-m", "nrl_launch", *argv[1:]] if argv[0] == str(_SCRIPT) else argv


def imported_modules(argv: list[str]) -> set[str]:
    """Every module a run imports, from `python -X importtime`."""
    argv = python_argv(argv)
    run = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, check=True
    )
    names = set()
    for line in run.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(
        f"# CLI start-up, {args.runs} runs each ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()})\n"
    )
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        # No .pyc files are written for nrl-launch's own sources (an installed copy has them):
        # every run compiles them again, 20-50 ms on the project's machine.
        print("PYTHONDONTWRITEBYTECODE is set: each run compiles nrl-launch's sources again.\n")
    print("| command | median ms | min ms | max ms | target | heavy imports |")
    print("|---|---|---|---|---|---|")
    ok = True
    for name, argv in CASES.items():
        times = time_runs(argv, args.runs)
        median = statistics.median(times)
        target = TARGETS_MS.get(name)
        heavy = sorted(m for m in imported_modules(argv) if m.split(".")[0] in HEAVY)
        verdict = (
            "" if target is None else f"<= {target} ({'met' if median <= target else 'MISSED'})"
        )
        ok &= target is None or median <= target
        print(
            f"| `{name}` | {median:.0f} | {min(times):.0f} | {max(times):.0f} | {verdict} | "
            f"{', '.join(heavy) or 'none'} |"
        )
    floor = statistics.median(time_runs(CASES["python -c pass"], args.runs))
    print(
        f"\n# Import cost in a fresh process (median ms above `python -c pass` = {floor:.0f} ms)\n"
    )
    print("| import | ms |")
    print("|---|---|")
    for name, statement in IMPORTS.items():
        median = statistics.median(time_runs([sys.executable, "-c", statement], args.runs))
        print(f"| {name} | {median - floor:.0f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
