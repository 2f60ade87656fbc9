"""Per-step metrics: one JSON line each in `<log_dir>/exp_NNN/metrics.jsonl`, and a line in the
driver's log a person can read."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


class Metrics:
    def __init__(self, exp_dir: Path) -> None:
        self.path = exp_dir / "metrics.jsonl"

    def log(self, step: int, values: dict[str, Any]) -> None:
        with open(self.path, "a") as out:
            out.write(json.dumps({"step": step, "time": time.time(), **values}) + "\n")


def say(text: str) -> None:
    print(text, flush=True)
