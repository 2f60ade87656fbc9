"""Checkpoints as NeMo RL lays them out: `<checkpoint_dir>/step_N/` with `training_info.json`,
`config.yaml` and `policy/{weights,optimizer}.pt`. Each is written as `tmp_step_N` and renamed
only when complete, so the newest `step_N` is always whole; a run resumes from it."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

STEP = re.compile(r"step_(\d+)")


class Checkpoints:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.enabled = bool(cfg.get("enabled", False))
        self.root = Path(cfg.get("checkpoint_dir") or "results")
        self.period = int(cfg.get("save_period") or 0)
        self.keep = cfg.get("keep_top_k")

    def latest(self) -> tuple[int, Path] | None:
        """The newest complete checkpoint, (step, dir), or None."""
        if not self.enabled or not self.root.is_dir():
            return None
        steps = [
            (int(m.group(1)), p)
            for p in self.root.iterdir()
            if (m := STEP.fullmatch(p.name)) and (p / "training_info.json").is_file()
        ]
        return max(steps, default=None)

    def begin(self, step: int) -> Path:
        """A fresh `tmp_step_N` to write into (left over ones are removed first)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for stale in self.root.glob("tmp_step_*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = self.root / f"tmp_step_{step}"
        (tmp / "policy").mkdir(parents=True)
        return tmp

    def commit(self, tmp: Path, step: int, info: dict[str, Any], config: dict[str, Any]) -> Path:
        """Write the metadata, then rename `tmp_step_N` to `step_N` in one step."""
        (tmp / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        with open(tmp / "training_info.json", "w") as out:
            json.dump({**info, "step": step, "saved_at": time.time()}, out)
            out.flush()
            os.fsync(out.fileno())
        final = self.root / f"step_{step}"
        if final.exists():  # the same step saved again (a rerun): replace it whole
            shutil.rmtree(final)
        tmp.rename(final)
        self._prune()
        return final

    def due(self, step: int, last: bool) -> bool:
        return self.enabled and (last or (self.period > 0 and step % self.period == 0))

    def _prune(self) -> None:
        if not self.keep:
            return
        steps = sorted(
            int(m.group(1)) for p in self.root.iterdir() if (m := STEP.fullmatch(p.name))
        )
        for step in steps[: -int(self.keep)]:
            shutil.rmtree(self.root / f"step_{step}", ignore_errors=True)
