"""The one Jinja environment. Templates live in the package, in nrl_launch/templates/.

`StrictUndefined` turns a misspelled variable into an error instead of an empty string, and
`finalize` refuses to print any string that did not pass through the `q` (shell-quote) filter, so
no user value can reach a script unquoted. Numbers print as they are. The filter quotes for a
script (`quote(..., script=True)`): a value with `$`, a backquote or a backslash is written
$'...', which shellcheck reads as literal.

`#SBATCH` lines are the one exception: bash reads them as comments, and sbatch reads them with
quoting rules of its own, so they are quoted by `backends.slurm.sbatch_directives` and printed
as the `SbatchDirective` it returns (which `finalize` lets through, as it does a quoted word).

Compiling the templates costs more than rendering them (~20 ms a run), so the wheel also carries
them compiled ahead of time, as Python modules in `nrl_launch._templates_compiled` (made by
`precompile` when the wheel is built: hatch_build.py), whose bytecode pip writes at install. A
compiled copy is used only for the exact source it was compiled from, by the same Jinja version
(its key); anything else (a source checkout, an edited template, another
Jinja) is compiled from the template as it is, as before. Either way the output is the same.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from collections.abc import MutableMapping
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import jinja2

from nrl_launch import paths
from nrl_launch.shell import ShellWord, join, quote

__all__ = ["PRECOMPILED_PACKAGE", "Comment", "SbatchDirective", "precompile", "render"]

# Where the wheel carries the compiled templates (made at build time; absent in a checkout).
PRECOMPILED_PACKAGE = "nrl_launch._templates_compiled"


class SbatchDirective(str):
    """One `#SBATCH` line, each word quoted the way sbatch reads it (not bash: for bash the line
    is a comment). Made only by `backends.slurm.sbatch_directives`."""

    __slots__ = ()


class Comment(str):
    """A comment line's text, nrl-launch's own words and numbers (no user value: none could end
    the line). Made only by backends.slurm.defaults_taken."""

    __slots__ = ()


def _only_quoted(value: Any) -> Any:
    if isinstance(value, (ShellWord, SbatchDirective, Comment)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise jinja2.TemplateError(f"unquoted value {value!r}: pass it through the q filter")


def _quote_filter(value: Any) -> ShellWord:
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises UndefinedError, naming the missing variable
    return quote(value, script=True)


def _join_filter(values: Any) -> ShellWord:
    return join(_quote_filter(v) for v in values)


class _Loader(jinja2.FileSystemLoader):
    """templates/, as FileSystemLoader loads them, but taking a template's code as compiled
    when the wheel was built (PRECOMPILED_PACKAGE) where that was made from this very source."""

    def load(
        self,
        environment: jinja2.Environment,
        name: str,
        globals: MutableMapping[str, Any] | None = None,
    ) -> jinja2.Template:
        source, filename, uptodate = self.get_source(environment, name)
        code = _precompiled(name, source)
        if code is None:
            code = environment.compile(source, name, filename)
        template = environment.template_class.from_code(
            environment, code, {} if globals is None else globals, uptodate
        )
        template.filename = filename  # errors name the template, not a compiled module
        return template


def _key(name: str, source: str) -> str:
    """What a compiled template was made from: its name and source, and the Jinja version (its
    compiled code calls Jinja's runtime). The environment's settings need no place in it: they
    are this module's, which the wheel carries with the compiled copies it made."""
    return hashlib.sha256(repr((jinja2.__version__, name, source)).encode()).hexdigest()


@functools.cache
def _precompiled_package() -> ModuleType | None:
    """The wheel's compiled templates (None in a source checkout)."""
    try:
        return importlib.import_module(PRECOMPILED_PACKAGE)
    except ImportError:
        return None


def _precompiled(name: str, source: str) -> CodeType | None:
    """`name`'s code as compiled when the wheel was built, if that was from `source` by this
    Jinja; from the bytecode pip wrote at install where there is one."""
    package = _precompiled_package()
    if package is None or package.__file__ is None:
        return None
    if getattr(package, "KEYS", {}).get(name) != _key(name, source):
        return None  # compiled from another source, or by another Jinja
    module = f"{PRECOMPILED_PACKAGE}.{jinja2.ModuleLoader.get_template_key(name)}"
    path = Path(package.__file__).with_name(f"{module.rpartition('.')[2]}.py")
    try:
        return SourceFileLoader(module, str(path)).get_code(module)
    except (ImportError, OSError, SyntaxError):
        return None


@functools.cache
def _environment(templates: Path | None = None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_Loader(templates or paths.templates_dir()),
        undefined=jinja2.StrictUndefined,
        finalize=_only_quoted,
        autoescape=False,  # HTML escaping would corrupt shell; quoting is the q filter's job
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = _quote_filter
    env.filters["qjoin"] = _join_filter
    return env


def render(template: str, **context: Any) -> str:
    """Render one template from templates/ with `context`."""
    return _environment().get_template(template).render(**context)


def precompile(target: Path, templates: Path | None = None) -> list[str]:
    """Compile every template in `templates` (default: the ones render uses) into `target`, the
    package PRECOMPILED_PACKAGE (the wheel's build does this: hatch_build.py): a module per
    template, as Jinja's compile_templates writes them, and their keys in its __init__.py.
    Returns the templates' names."""
    env = _environment(templates)
    loader = env.loader
    assert isinstance(loader, _Loader)
    target.mkdir(parents=True, exist_ok=True)
    keys = {}
    names = loader.list_templates()
    for name in names:
        source, filename, _ = loader.get_source(env, name)
        code = env.compile(source, name, filename, raw=True, defer_init=True)
        module = target / f"{jinja2.ModuleLoader.get_template_key(name)}.py"
        module.write_text(code, encoding="utf-8")
        keys[name] = _key(name, source)
    (target / "__init__.py").write_text(
        '"""nrl-launch\'s templates, compiled when the wheel was built (see templating.py)."""\n\n'
        f"KEYS = {keys!r}\n",
        encoding="utf-8",
    )
    return names
