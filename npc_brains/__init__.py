"""NPC brains: Dr. MAS networks, the trainer (IPPO / MAPPO / Dr. MAS), stability monitor and policy runtime.

`import npc_brains` is light (no torch): the names below are imported on first use.
    load_policy("default" | "mappo" | "scripted" | "random" | PATH) -> a batched Policy (npc_brains.policy_api)
        with `.tuning`, the engine Tuning it was trained under; PolicyError (one line) where it cannot be used
    TrainConfig, train(cfg) -> Result, Trainer
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from npc_brains.policy_api import Policy, PolicyOutput

_LAZY = {
    "load_policy": "npc_brains.resolve",
    "PolicyError": "npc_brains.resolve",
    "bundled_policy": "npc_brains.resolve",
    "policy_slots": "npc_brains.resolve",
    "policy_tuning": "npc_brains.tuning",
    "NumpyPolicy": "npc_brains.runtime",
    "TorchPolicy": "npc_brains.runtime",
    "TrainConfig": "npc_brains.config",
    "ConfigError": "npc_brains.config",
    "CheckpointError": "npc_brains.checkpoint",
    "Trainer": "npc_brains.trainer",
    "train": "npc_brains.trainer",
    "StabilityMonitor": "npc_brains.stability",
    "get_baseline": "npc_brains.baselines",
}

__all__ = [
    "Policy", "PolicyOutput", "load_policy", "PolicyError", "bundled_policy", "policy_slots", "policy_tuning",
    "NumpyPolicy", "TorchPolicy", "TrainConfig", "ConfigError", "CheckpointError", "Trainer", "train",
    "StabilityMonitor", "get_baseline",
]

if TYPE_CHECKING:
    from npc_brains.baselines import get_baseline
    from npc_brains.checkpoint import CheckpointError
    from npc_brains.config import ConfigError, TrainConfig
    from npc_brains.resolve import PolicyError, bundled_policy, load_policy, policy_slots
    from npc_brains.runtime import NumpyPolicy, TorchPolicy
    from npc_brains.stability import StabilityMonitor
    from npc_brains.trainer import Trainer, train
    from npc_brains.tuning import policy_tuning


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'npc_brains' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
