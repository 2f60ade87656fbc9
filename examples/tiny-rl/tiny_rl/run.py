"""What GRPO and SFT share: the config, the workers on the allocation, resuming from the newest
checkpoint, saving, and `checkpoint_must_save_by`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import ray
import torch

from tiny_rl import config as config_io
from tiny_rl.checkpoint import Checkpoints
from tiny_rl.cluster import Workers, connect, launch
from tiny_rl.metrics import Metrics, say
from tiny_rl.timer import TimeoutChecker


class Run:
    def __init__(self, argv: list[str], default_config: Path, algo: str) -> None:
        self.cfg, self.layout, self.config_path = config_io.load(argv, default_config)
        self.algo = algo
        self.section: dict[str, Any] = self.cfg[algo]
        self._supported()
        self.seed = int(self.section.get("seed", 42))
        self.max_steps = int(self.section["max_num_steps"])
        self.ckpt = Checkpoints(self.cfg.get("checkpointing") or {})
        must = self.ckpt.enabled and (self.cfg["checkpointing"].get("checkpoint_must_save_by"))
        key = "checkpointing.checkpoint_must_save_by"
        if must:
            config_io.ddhhmmss_seconds(must, key)  # one clear line when malformed
        self.exp_dir = config_io.next_experiment_dir(self.cfg["logger"]["log_dir"])
        self.metrics = Metrics(self.exp_dir)
        say(f"{algo}: config {self.config_path}, logs {self.exp_dir}")
        connect(config_io.ray_address())
        policy = self.cfg["policy"]
        self.model = policy["model"]
        self.workers: Workers = launch(self.layout, self.model, self.seed, policy["optimizer"])
        self._report_placement()
        self.step = self._resume()
        # NeMo RL's setup beyond this (loading weights, compiling, warming vLLM) takes 20-30
        # minutes at scale; tiny_rl.setup_s stands for it.
        setup_s = float((self.cfg.get("tiny_rl") or {}).get("setup_s", 0))
        if setup_s > 0:
            say(f"setup: {setup_s:g} s more (tiny_rl.setup_s), as NeMo RL's own setup")
            time.sleep(setup_s)
        # As NeMo RL's (nemo_rl/utils/timer.py, its issue #3596): the timer is built now, after
        # the setup, and its clock of checkpoint_must_save_by starts with it.
        self.timer = TimeoutChecker(str(must) if must else None, fit_last_save_time=True)
        self.timer.start_iterations()

    def _supported(self) -> None:
        training = self.layout.training
        if training is None or training.backend != "dtensor":
            config_io.fail("policy.dtensor_cfg.enabled: tiny-rl trains with FSDP2 only")
        dcfg = "policy.dtensor_cfg"
        if training.tp != 1 or training.cp != 1:
            config_io.fail(
                f"{dcfg}.tensor_parallel_size={training.tp}, context_parallel_size={training.cp}: "
                "tiny-rl shards training with FSDP2 alone (both must be 1)"
            )

    def _report_placement(self) -> None:
        placement = self.workers.placement
        (self.exp_dir / "placement.json").write_text(json.dumps(placement, indent=2))
        t, g = placement["training"], placement["generation"]
        engines = (
            f"{g['engines']} generation engine(s) x TP{g['tp']} on {g['gpus']} GPU(s)"
            f"{', colocated' if g['colocated'] else ''}"
            if g["engines"]
            else "no generation"
        )
        say(
            f"placement: {t['gpus']} FSDP2 training rank(s) ({placement['backend']}), {engines}; "
            f"every GPU carries work ({self.workers.started_s:.1f} s to start)"
        )
        for node in placement["nodes"]:
            gpus = "; ".join(f"GPU {k}: {', '.join(v)}" for k, v in node["gpus"].items())
            say(f"  node {node['node']} ({node['hostname']}): {gpus}")

    def _resume(self) -> int:
        latest = self.ckpt.latest()
        if latest is None:
            return 0
        step, path = latest
        ray.get([a.load.remote(str(path / "policy")) for a in self.workers.train])
        say(f"resumed from {path} (step {step})")
        return step

    def save(self, step: int, info: dict[str, Any]) -> float:
        began = time.perf_counter()
        tmp = self.ckpt.begin(step)
        ray.get([a.save.remote(str(tmp / "policy")) for a in self.workers.train])
        final = self.ckpt.commit(tmp, step, info, self.cfg)
        seconds = time.perf_counter() - began
        say(f"saved {final} ({seconds:.2f} s)")
        return seconds

    def split(self, batch: torch.Tensor, parts: int, key: str) -> list[torch.Tensor]:
        if batch.shape[0] % parts:
            config_io.fail(
                f"{key}: the batch of {batch.shape[0]} is not divisible by {parts} rank(s)"
            )
        return list(batch.chunk(parts))

    def out_of_time(self, step: int, saved: bool, info: dict[str, Any]) -> bool:
        """True when the next step would not fit before checkpoint_must_save_by: the last step
        is saved (if it was not) and the run ends, to be resumed by the next job."""
        if not self.timer.check_save():
            return False
        if not saved:
            self.save(step, info)
        say(
            f"stopping after step {step} of {self.max_steps}: the next step and a save would not "
            "fit before checkpointing.checkpoint_must_save_by; the next run resumes from it"
        )
        return True
