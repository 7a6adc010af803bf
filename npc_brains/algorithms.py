"""The algorithm seam: one entry point for every learner `village train --algo` names.

    ippo | mappo | drmas   the PPO family (npc_brains.trainer.Trainer)
    qmix | maddpg          replay learners (npc_brains.offpolicy.OffPolicyTrainer)

Both kinds take a TrainConfig, write the same run directory (metrics.jsonl, tb/, checkpoints/last.pt,
policy.pt), resume from checkpoints/last.pt and export a policy that `npc_brains.load_policy` runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from npc_brains.config import OFF_POLICY_ALGOS, TrainConfig


def make_trainer(cfg: TrainConfig, *, progress: bool = False, resume: str | Path | None = None,
                 tensorboard: bool = True, ray: Any = None) -> Any:
    """The trainer for cfg.algo (a Trainer or an OffPolicyTrainer; both have .train() -> Result). `ray`: Ray
    rollout workers (npc_brains.distributed.RayOptions) that collect the batches, or fill the replay."""
    if cfg.algo in OFF_POLICY_ALGOS:
        from npc_brains.offpolicy import OffPolicyTrainer

        return OffPolicyTrainer(cfg, progress=progress, resume=resume, tensorboard=tensorboard, ray=ray)
    from npc_brains.trainer import Trainer

    return Trainer(cfg, progress=progress, resume=resume, tensorboard=tensorboard, ray=ray)


def train(cfg: TrainConfig, *, progress: bool = False, resume: str | Path | None = None) -> Any:
    """Train any algorithm with `cfg`; returns its Result."""
    return make_trainer(cfg, progress=progress, resume=resume).train()


__all__ = ["make_trainer", "train"]
