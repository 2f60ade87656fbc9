"""How the API says what the CLI would print: as Python warnings, attributed to the caller."""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from nrl_launch import output

__all__ = ["NrlLaunchNote", "NrlLaunchWarning", "as_warning", "quiet"]


class NrlLaunchWarning(UserWarning):
    """What `nrl-launch` would print as `nrl-launch: warning: ...`: one line."""


class NrlLaunchNote(UserWarning):
    """What `nrl-launch` would print as `nrl-launch: note: ...` (a value it derived)."""


_P = ParamSpec("_P")
_T = TypeVar("_T")
# Where nrl_launch's modules are, as their frames name them: a warning is the caller's, outside.
_PACKAGE = str(Path(__file__).parent.parent) + os.sep


def as_warning(kind: str, message: str) -> None:
    """A warning or note said while an API function runs: a Python warning, attributed to the
    caller's line (the first frame outside nrl_launch)."""
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    category = NrlLaunchNote if kind == "note" else NrlLaunchWarning
    warnings.warn(message, category, stacklevel=level)


def quiet(function: Callable[_P, _T]) -> Callable[_P, _T]:
    """`function` with nothing printed: warnings and notes reach its caller as Python ones."""

    @functools.wraps(function)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with output.heard_by(as_warning):
            return function(*args, **kwargs)

    return run
