"""The templates compiled ahead of time, as the wheel carries them (`templating.precompile`, run
by hatch_build.py when the wheel is built), render every golden case byte for byte as the
templates compiled from their source do (test_golden holds those to the golden files); and a
compiled copy that was not made from the template as it is now, by this Jinja, is never used:
the template is compiled from its source instead, as in a checkout."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import pytest

from nrl_launch import paths, templating
from tests.conftest import Cli
from tests.golden_cases import CASES, Case, render


def _package(target: Path) -> ModuleType:
    """The compiled templates in `target`, as the wheel's nrl_launch._templates_compiled."""
    spec = importlib.util.spec_from_file_location(
        templating.PRECOMPILED_PACKAGE, target / "__init__.py"
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    return package


@pytest.fixture(autouse=True)
def fresh_environment() -> Iterator[None]:
    """Each test builds its Jinja environment anew, and leaves none behind."""
    templating._environment.cache_clear()
    yield
    templating._environment.cache_clear()


def _spy_on_compiling(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on: the names of the templates Jinja compiles from their source."""
    names: list[str] = []
    original = jinja2.Environment.compile

    def compile_(
        self: jinja2.Environment, source: str, name: str | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        names.append(str(name))
        return original(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", compile_)
    return names


def _use(monkeypatch: pytest.MonkeyPatch, target: Path, templates: Path | None = None) -> None:
    """Compile the templates into `target` and have templating take them from there."""
    templating.precompile(target, templates)
    package = _package(target)
    monkeypatch.setattr(templating, "_precompiled_package", lambda: package)
    templating._environment.cache_clear()  # precompile built one: the next render builds anew


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_compiled_templates_render_every_golden(
    cli: Cli, case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from_source = render(cli, case, monkeypatch)  # what test_golden holds to its golden file
    _use(monkeypatch, tmp_path / "compiled")
    compiled = _spy_on_compiling(monkeypatch)
    assert render(cli, case, monkeypatch) == from_source
    assert compiled == []  # every template came from its compiled copy


def test_a_compiled_copy_is_used_only_for_the_source_it_was_made_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(paths.templates_dir(), templates)
    target = tmp_path / "compiled"
    _use(monkeypatch, target, templates)
    names = sorted(p.name for p in templates.glob("*.j2"))
    edited = templates / "slurm.sbatch.j2"
    edited.write_text(edited.read_text(encoding="utf-8") + "# edited after compiling\n")
    templating._environment.cache_clear()

    env = templating._environment(templates)
    loaded = {name: env.get_template(name) for name in names}
    for name, template in loaded.items():
        code_file = Path(template.root_render_func.__code__.co_filename)
        if name == "slurm.sbatch.j2":  # its source changed: compiled from it, as it is now
            assert code_file == edited
        else:
            assert code_file.parent == target, name
        assert template.filename == str(templates / name)  # errors name the template


def test_a_compiled_copy_from_another_jinja_is_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _use(monkeypatch, tmp_path / "compiled")
    monkeypatch.setattr(jinja2, "__version__", "0.0.0")
    templating._environment.cache_clear()
    compiled = _spy_on_compiling(monkeypatch)
    template = templating._environment().get_template("slurm.sbatch.j2")
    assert "slurm.sbatch.j2" in compiled
    code_file = Path(template.root_render_func.__code__.co_filename)
    assert code_file == paths.templates_dir() / "slurm.sbatch.j2"


def test_a_checkout_has_no_compiled_templates() -> None:
    # An editable install compiles the templates as they are (the wheel's build makes them).
    assert templating._precompiled_package() is None
