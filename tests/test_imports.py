"""The CLI stays fast: `ray` is never imported on the render path, and `--help` imports none
of the heavy libraries (they load inside the commands that need them). And the package is
layered: its modules import only downward (LAYERS), and never in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.helpers import imported, roots

GRPO_TINY = str(EXAMPLES / "tiny-rl/examples/configs/grpo_tiny.yaml")


def test_render_never_imports_ray() -> None:
    modules = imported("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    assert "nrl_launch.backends.slurm" in modules  # the render path really ran
    assert "ray" not in roots(modules)


def test_config_show_never_imports_ray() -> None:
    assert "ray" not in roots(imported("config", "show", "--interactive"))


def test_help_imports_no_heavy_library() -> None:
    heavy = {"ray", "pydantic", "jinja2", "yaml", "omegaconf", "rich"}
    assert not roots(imported("--help")) & heavy
    # typer itself converts a command's option values with pydantic (typer >= 0.22), so a
    # command's --help loads pydantic; nothing of ours may load more.
    assert not roots(imported("render", "--help")) & (heavy - {"pydantic"})


def test_a_command_imports_only_what_it_runs() -> None:
    # Only the command that runs is imported and built (cli._app), not the other commands.
    modules = imported("render", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    commands = {m for m in modules if m.startswith("nrl_launch.cli.")}
    assert commands == {"nrl_launch.cli.render", "nrl_launch.cli.options"}
    # Without --config there is no NeMo RL config to read; without -o no script to write.
    assert not roots(modules) & {"omegaconf", "rich"}
    assert not {"nrl_launch.nemorl.layout", "nrl_launch.jobs.launch"} & modules
    plan = imported("plan", "--config", str(EXAMPLES / "tiny-rl/examples/configs/grpo_tiny.yaml"))
    assert "omegaconf" in roots(plan) and not roots(plan) & {"jinja2", "rich"}


def test_the_python_api_imports_as_lightly_as_the_cli() -> None:
    heavy = {"ray", "torch", "leptonai", "pydantic", "jinja2", "yaml", "omegaconf", "rich", "typer"}
    assert not roots(imported(code="import nrl_launch.api")) & heavy
    # Planning reads the spec and the NeMo RL config: no job script, no Ray, no terminal.
    plan = f"from nrl_launch import api; api.plan(api.load_spec(config={GRPO_TINY!r}))"
    assert not roots(imported(code=plan)) & {"ray", "torch", "leptonai", "jinja2", "rich", "typer"}


# ---- Layering: the package's modules import only downward, and never in a circle ----

# The layers of src/nrl_launch, lowest first. A module may import modules of its own layer and
# of the layers below it, never of one above. A name stands for the module and everything under
# it; the longest name that matches a module decides its layer (nrl_launch itself, the package's
# __init__, is the lowest). The graph counts every import: at the top of a module and inside its
# functions alike, except those under `if TYPE_CHECKING:`, which never run.
LAYERS: list[tuple[str, ...]] = [
    # The base: errors, quoting, on-disk locations, the one subprocess module, output.
    (
        "nrl_launch",
        "nrl_launch.errors",
        "nrl_launch.shell",
        "nrl_launch.paths",
        "nrl_launch.runner",
        "nrl_launch.output",
        "nrl_launch.storage",
        "nrl_launch.trust",
    ),
    ("nrl_launch.spec",),  # the job spec: model, layering of its sources, warnings
    ("nrl_launch.nemorl",),  # the NeMo RL config read against the spec
    # What the job's container and script need: image checks, the templates and the node program.
    (
        "nrl_launch.enroot",
        "nrl_launch.image_ray",
        "nrl_launch.container_image",
        "nrl_launch.container_checks",
        "nrl_launch.templating",
        "nrl_launch.node",
    ),
    ("nrl_launch.backends",),  # where a job runs: plan (render) and talk to the scheduler
    # job records and their state; the checks; remote clusters' ssh, sync and records
    ("nrl_launch.jobs", "nrl_launch.doctor", "nrl_launch.remote"),
    ("nrl_launch.api",),  # the Python API: what the commands do, as functions (they call it)
    # the commands run on a remote cluster (--remote): they read this machine's jobs through the
    # API, and the CLI hands them its commands (to tell options from JOBIDs); never the CLI
    ("nrl_launch.remote.forward", "nrl_launch.remote.listing"),
    ("nrl_launch.cli", "nrl_launch.__main__"),  # the command line, on top of everything
]

SRC = Path(__file__).resolve().parent.parent / "src"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(inner) for inner in ast.walk(node)}
    return guarded


def import_graph() -> dict[str, set[str]]:
    """Each module of the package, and the package's modules it imports."""
    paths = {_module_name(p): p for p in sorted((SRC / "nrl_launch").rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = _type_checking_only(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{name}: a relative import"
                # `from a import b` imports module a.b when there is one, else a name of a.
                targets |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                    for a in node.names
                }
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def layer(module: str) -> int:
    matches = [
        (len(prefix), index)
        for index, names in enumerate(LAYERS)
        for prefix in names
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1]


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        assert module == "nrl_launch" or layer(module) > 0 or module in LAYERS[0], module


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if layer(target) > layer(module)
    ]
    assert upward == []


def test_no_import_circles() -> None:
    graph = import_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circle = [*path[path.index(module) :], module]
            raise AssertionError("import circle: " + " -> ".join(circle))
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_package_imports_the_cli() -> None:
    # The CLI is the top: remote (forward, listing) gets what it needs from below it.
    upward = [
        f"{module} imports {target}"
        for module, targets in sorted(import_graph().items())
        if not module.startswith(("nrl_launch.cli", "nrl_launch.__main__"))
        for target in sorted(targets)
        if target == "nrl_launch.cli" or target.startswith("nrl_launch.cli.")
    ]
    assert upward == []


def test_no_package_circles() -> None:
    # Packages (nrl_launch.X and all under it) too: cli -> remote -> cli was one.
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        graph.setdefault(package(module), set()).update(
            package(t) for t in targets if package(t) != package(module)
        )

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for target in graph.get(todo.pop(), set()) - seen:
                seen.add(target)
                todo.append(target)
        return seen

    circles = {p: sorted(t for t in graph[p] if p in reach(t)) for p in graph if p in reach(p)}
    assert circles == {}
