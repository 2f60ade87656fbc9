"""The wheel's build hook: compiles the templates into Python modules the wheel carries
(`nrl_launch._templates_compiled`), so that an installed nrl-launch loads their bytecode, which
pip writes at install, instead of compiling the templates on every run. See templating.py: a
compiled template is used only for the exact source, Jinja version and settings it was made
from. An editable install gets none (it compiles the templates as they are, as they change)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class PrecompiledTemplates(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        self._out = Path(tempfile.mkdtemp(prefix="nrl-launch-templates-"))
        sys.path.insert(0, str(root / "src"))
        try:
            from nrl_launch.templating import precompile
        finally:
            sys.path.remove(str(root / "src"))
        precompile(self._out, templates=root / "src" / "nrl_launch" / "templates")
        build_data["force_include"][str(self._out)] = "nrl_launch/_templates_compiled"

    def finalize(  # the interface's arguments; only the temporary directory matters here
        self,
        version: str,  # noqa: ARG002
        build_data: dict[str, Any],  # noqa: ARG002
        artifact_path: str,  # noqa: ARG002
    ) -> None:
        out = getattr(self, "_out", None)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
