"""The one Jinja environment. Templates live in the top-level templates/ folder.

`StrictUndefined` turns a misspelled variable into an error instead of an empty string, and
`finalize` refuses to print any string that did not pass through the `q` (shell-quote) filter, so
no user value can reach a script unquoted. Numbers print as they are. The filter quotes for a
script (`quote(..., script=True)`): a value with `$`, a backquote or a backslash is written
$'...', which shellcheck reads as literal.

`#SBATCH` lines are the one exception: bash reads them as comments, and sbatch reads them with
quoting rules of its own, so they are quoted by `backends.slurm.sbatch_directives` and printed
as the `SbatchDirective` it returns (which `finalize` lets through, as it does a quoted word).
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from nrl_launch import paths
from nrl_launch.shell import ShellWord, join, quote

__all__ = ["SbatchDirective", "render"]


class SbatchDirective(str):
    """One `#SBATCH` line, each word quoted the way sbatch reads it (not bash: for bash the line
    is a comment). Made only by `backends.slurm.sbatch_directives`."""

    __slots__ = ()


def _only_quoted(value: Any) -> Any:
    if isinstance(value, (ShellWord, SbatchDirective)):
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


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(paths.templates_dir()),
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
