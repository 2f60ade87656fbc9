"""The driver's startup shim: NeMo RL's save deadline, counted from the job's end.

The node program writes this file, verbatim, as `sitecustomize.py` into a directory of the job's
log dir and puts that directory first on the driver's PYTHONPATH (node/deadline.sh). Python
imports it at start-up. With NRL_SAVE_BY_EPOCH set (the epoch by which the driver must have
saved: the job's end less the margin), it wraps the `__init__` of the timer class
NRL_TIMER_CLASS names (`module:Class`, NeMo RL's `nemo_rl.utils.timer:TimeoutChecker`) as soon
as that module is imported: after the original, `last_save_time` (seconds after `start_time`,
when `check_save()` says save) is cut to `save_by - start_time`. NeMo RL starts that clock after
its own setup (its issue #3596), which takes 20-30 minutes at scale: this makes the deadline
the job's, whatever the setup took.

Standard library only; it never raises into the driver (a failure is one warning line on
stderr, and the plain checkpoint_must_save_by the node passed still applies), and it then runs
the `sitecustomize` it hides (one further on sys.path: images and venvs may have their own).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import time
from types import ModuleType
from typing import Any

_SAY = "nrl-launch"


def _warn(text: str) -> None:
    with contextlib.suppress(Exception):  # a closed stderr must not stop the driver
        print(f"{_SAY}: warning: {text}", file=sys.stderr, flush=True)


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(epoch))


def _wrap(cls: Any, where: str, save_by: float) -> None:
    """Wrap `cls.__init__`: after it, last_save_time is at most save_by - start_time."""
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            start = float(self.start_time)
            given = float(self.last_save_time)
        except Exception:  # never into the driver
            _warn(
                f"{where} has no start_time/last_save_time: the save deadline is the config's "
                "checkpoint_must_save_by, counted from when the timer started"
            )
            return
        try:
            self.last_save_time = min(given, save_by - start)
            print(
                f"{_SAY}: {where} saves by {_clock(save_by)} "
                f"({save_by - start:.0f} s after it started; the job's end less the margin)",
                file=sys.stderr,
                flush=True,
            )
        except Exception as exc:  # never into the driver
            _warn(f"could not set the save deadline of {where}: {exc}")

    try:
        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        __init__.__doc__ = getattr(original, "__doc__", None)
    except Exception:  # never into the driver
        pass
    cls.__init__ = __init__


def _patch(module: ModuleType, name: str, where: str, save_by: float) -> None:
    try:
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            _warn(
                f"{where} is not a class in {module.__name__}: the save deadline is the "
                "config's checkpoint_must_save_by, counted from when NeMo RL's timer started "
                "(set nemo_rl.timer_class for a fork)"
            )
            return
        _wrap(cls, where, save_by)
    except Exception as exc:  # never into the driver
        _warn(f"could not wrap {where}: {exc}")


class _Loader(importlib.abc.Loader):
    """The timer module's own loader, then the patch."""

    def __init__(self, loader: Any, patch: Any) -> None:
        self._loader = loader
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, attr: str) -> Any:  # get_source, get_filename, ... as the original
        return getattr(self._loader, attr)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the timer's module, the others' spec with a patching loader."""

    def __init__(self, module: str, patch: Any) -> None:
        self._module = module
        self._patch = patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self._module:
            return None
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = _Loader(spec.loader, self._patch)
            return spec
        except Exception as exc:  # never into the driver
            _warn(f"could not watch for {self._module}: {exc}")
            return None


def _install() -> None:
    value = os.environ.get("NRL_SAVE_BY_EPOCH", "")
    if not value:
        return
    where = os.environ.get("NRL_TIMER_CLASS") or "nemo_rl.utils.timer:TimeoutChecker"
    try:
        save_by = float(value)
        module, _, name = where.partition(":")
        if not module or not name:
            raise ValueError("expected module:Class")
    except ValueError as exc:
        _warn(f"NRL_SAVE_BY_EPOCH={value!r} NRL_TIMER_CLASS={where!r}: {exc}")
        return

    def patch(loaded: ModuleType) -> None:
        _patch(loaded, name, where, save_by)

    if module in sys.modules:
        patch(sys.modules[module])
        return
    sys.meta_path.insert(0, _Finder(module, patch))


def _chain() -> None:
    """Run the sitecustomize this file hides: the next one on sys.path, as if Python had found
    it (under the same name)."""
    # os.path, not pathlib: the shim runs in every start of the driver's Python.
    here = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]  # noqa: PTH100
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":  # as the driver's start-up shim only, never when imported
    try:
        _install()
    except Exception as _exc:  # never into the driver
        _warn(f"the save-deadline shim failed: {_exc}")
    _chain()
