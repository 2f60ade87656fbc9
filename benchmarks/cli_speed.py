"""How fast the CLI starts, measured as a user feels it: a fresh process each run.

Times `python -c pass` (the floor), `nrl-launch --help`, `nrl-launch render` of a 2-node
job and `nrl-launch plan` of a 32-node NeMo RL recipe, and reports whether `ray` (or any heavy
module) was imported on those paths.

    python benchmarks/cli_speed.py [--runs 15] [--wheel]

Two forms of nrl-launch can be measured, and the report names which each number is:

- editable: the checkout this interpreter runs (`pip install -e .`). Where
  PYTHONDONTWRITEBYTECODE is set (the project's machine sets it), Python writes no .pyc files,
  so every run compiles nrl-launch's own sources again, and its templates too.
- wheel (`--wheel`): a wheel built from this checkout and installed with pip into a throwaway
  venv, the way users install it: pip writes the .pyc files at install (whatever
  PYTHONDONTWRITEBYTECODE says), and the wheel carries the templates compiled (templating.py).
  The venv reads the same third-party packages as this one (a .pth file naming this
  interpreter's site-packages), so the two differ only in nrl-launch itself. The runs of both
  are interleaved, so that a busy machine slows both alike.

Besides the wall-clock time, each run's CPU time (user + system, from wait4) is reported: on a
machine shared with other work it moves much less than the wall clock.

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
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "examples" / "grpo-2node.yaml"
# plan reads a NeMo RL config through OmegaConf: a 32-node recipe with a defaults chain.
CONFIG = (
    REPO
    / "tests/data/nemo_rl/examples/configs/recipes/llm/grpo-qwen2.5-32b-32n8g-fsdp2tp8-actckpt.yaml"
)
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


def cases(python: str) -> dict[str, list[str]]:
    """The commands timed, run by the console script next to `python` (as users run it), or
    by `python -m nrl_launch` where there is none."""
    script = Path(python).with_name("nrl-launch")
    cli = [str(script)] if script.exists() else [python, "-m", "nrl_launch"]
    return {
        "python -c pass": [python, "-c", "pass"],
        "the floor and one pydantic model": [python, "-c", FLOOR_AND_A_MODEL],
        "nrl-launch --help": [*cli, "--help"],
        "nrl-launch render (2 nodes)": [*cli, "render", "-f", str(JOB)],
        "nrl-launch plan (32-node recipe)": [*cli, "plan", "--config", str(CONFIG)],
    }


def run_once(argv: list[str]) -> tuple[float, float]:
    """One fresh process: its wall-clock and CPU (user + system) milliseconds."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{argv} failed ({process.returncode}): {stderr.decode()[-2000:]}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def time_runs(argvs: list[list[str]], runs: int) -> list[tuple[list[float], list[float]]]:
    """Each argv `runs` times, interleaved (the order alternating), after one warm-up run each
    (the page cache, and .pyc files where they are written): per argv, wall and CPU times."""
    for argv in argvs:
        run_once(argv)
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in argvs]
    for i in range(runs):
        order = list(enumerate(argvs))
        for index, argv in order if i % 2 == 0 else order[::-1]:
            wall, cpu = run_once(argv)
            times[index][0].append(wall)
            times[index][1].append(cpu)
    return times


def python_argv(argv: list[str]) -> list[str]:
    """`argv` run under the interpreter explicitly, so that -X options can be added."""
    if argv[0].endswith("nrl-launch"):
        return [str(Path(argv[0]).with_name("python")), "-m", "nrl_launch", *argv[1:]]
    return argv


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


def install_wheel(workdir: Path) -> str:
    """Build a wheel of this checkout, install it into a throwaway venv in `workdir` (pip
    byte-compiles it, as for users) and return that venv's python. The venv reads the third-party
    packages from this interpreter's site-packages (a .pth file), not from the network."""
    dist = workdir / "dist"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        check=True,
    )
    (wheel,) = dist.glob("nrl_launch-*.whl")
    env_dir = workdir / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # After the venv's own site-packages: its nrl_launch is the wheel's, its dependencies ours.
    (Path(site) / "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [*pip, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    return str(python)


# The floor the start-up ratios are taken against (issue 34): the three libraries every command
# of the CLI stands on, imported in a fresh process.
FLOOR = "import typer, pydantic, jinja2"
# `import pydantic` loads no model machinery (its names load when first used): the first model
# does, and every command that reads a spec defines its models. Shown beside the floor.
FLOOR_AND_A_MODEL = f"{FLOOR}\nclass Model(pydantic.BaseModel):\n    x: int = 1"
RATIO_TARGETS = {"nrl-launch render (2 nodes)": 2.0, "nrl-launch plan (32-node recipe)": 3.0}


def report(forms: dict[str, str], runs: int) -> bool:
    """Time every case in every form, interleaved with the floor (FLOOR, run by the same
    interpreter); print one table; whether targets are met (by each form). The ratio is the
    median of each round's time over the floor's in that round (paired runs)."""
    print(
        "| command | form | median ms | min ms | max ms | CPU median ms | target "
        "| ratio to floor (paired) | heavy |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    table = {form: cases(python) for form, python in forms.items()}
    for name in table[next(iter(forms))]:
        argvs = [table[form][name] for form in forms]
        floors = [[python, "-c", FLOOR] for python in forms.values()]
        timed = time_runs([*argvs, *floors], runs)
        for k, (form, argv) in enumerate(zip(forms, argvs, strict=True)):
            (wall, cpu), (floor, _) = timed[k], timed[len(argvs) + k]
            median = statistics.median(wall)
            target = TARGETS_MS.get(name)
            ratio = statistics.median(w / f for w, f in zip(wall, floor, strict=True))
            aim = RATIO_TARGETS.get(name)
            shown = f"{ratio:.2f}" + (f" (<= {aim}: {'met' if ratio <= aim else 'MISSED'})"
                                      if aim else "")  # fmt: skip
            heavy = sorted(m for m in imported_modules(argv) if m.split(".")[0] in HEAVY)
            verdict = (
                "" if target is None else f"<= {target} ({'met' if median <= target else 'MISSED'})"
            )
            ok &= target is None or median <= target
            print(
                f"| `{name}` | {form} | {median:.0f} | {min(wall):.0f} | {max(wall):.0f} | "
                f"{statistics.median(cpu):.0f} | {verdict} | {shown} | "
                f"{', '.join(heavy) or 'none'} |"
            )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--wheel",
        action="store_true",
        help="also measure a wheel of this checkout installed with pip (as users run it)",
    )
    parser.add_argument("--no-imports", action="store_true", help="skip the table of import costs")
    args = parser.parse_args()
    print(
        f"# CLI start-up, {args.runs} runs each ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f})\n"
    )
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print(
            "PYTHONDONTWRITEBYTECODE is set: each run of the editable checkout compiles "
            "nrl-launch's sources and templates again (an installed wheel has its .pyc files).\n"
        )
    with tempfile.TemporaryDirectory(prefix="nrl-launch-cli-speed-") as workdir:
        forms = {"editable": sys.executable}
        if args.wheel:
            forms["wheel"] = install_wheel(Path(workdir))
        ok = report(forms, args.runs)
    if args.no_imports:
        return 0 if ok else 1
    floor = statistics.median(time_runs([[sys.executable, "-c", "pass"]], args.runs)[0][0])
    print(
        f"\n# Import cost in a fresh process, editable checkout (median ms above "
        f"`python -c pass` = {floor:.0f} ms)\n"
    )
    print("| import | ms |")
    print("|---|---|")
    for name, statement in IMPORTS.items():
        ((wall, _),) = time_runs([[sys.executable, "-c", statement]], args.runs)
        print(f"| {name} | {statistics.median(wall) - floor:.0f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
