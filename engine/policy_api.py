"""The batched policy interface shared by trained brains and baselines (numpy in, numpy out)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass
class PolicyOutput:
    actions: np.ndarray  # (R,) int64
    probs: np.ndarray | None = None  # (R, n_actions) float32, when asked for
    values: np.ndarray | None = None  # (R,) float32, when asked for


@runtime_checkable
class Policy(Protocol):
    """Anything that picks actions for a batch of NPC rows: act(obs (R, obs_dim), mask (R, n_actions))."""

    name: str

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False,
            with_probs: bool = False, with_values: bool = False) -> PolicyOutput: ...
