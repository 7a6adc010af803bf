"""Which policy the bridge serves (npc_brains.load_policy: default, mappo, scripted, random or a file) and the
probe every policy answers before it is served."""

from __future__ import annotations

import time

import numpy as np

from engine.observe import observation_layout
from engine.vec_env import flat_action_names
from npc_brains.policy_api import Policy
from npc_brains.resolve import BASELINES as BASELINE_NAMES
from npc_brains.resolve import SPECS as POLICY_NAMES  # the names (not paths) a reload may ask for
from npc_brains.resolve import PolicyError as PolicyLoadError
from npc_brains.resolve import load_policy
from npc_brains.tuning import policy_tuning

__all__ = ["BASELINE_NAMES", "POLICY_NAMES", "PolicyLoadError", "layout", "load_policy", "policy_tuning", "probe"]


def layout(slots: int) -> tuple[list[str], list[str]]:
    """(observation feature names, flat action names) for K = slots."""
    return observation_layout(slots), flat_action_names(slots)


def probe(policy: Policy, slots: int) -> float:
    """Run one small batch through the policy and check its answer; returns the time in ms."""
    obs_names, action_names = layout(slots)
    obs = np.zeros((2, len(obs_names)), np.float32)
    mask = np.ones((2, len(action_names)), bool)
    t0 = time.perf_counter()
    try:
        out = policy.act(obs, mask, deterministic=True, with_probs=True)
    except Exception as exc:  # any failure of foreign code is a failed probe
        raise PolicyLoadError(f"policy {getattr(policy, 'name', '?')!r} failed the probe "
                              f"(obs (2, {len(obs_names)}), mask (2, {len(action_names)})): {exc}") from None
    actions = np.asarray(out.actions)
    if actions.shape != (2,) or not np.issubdtype(actions.dtype, np.integer):
        raise PolicyLoadError(f"policy returned actions of shape {actions.shape} and dtype {actions.dtype}; "
                              "expected (2,) integers")
    if ((actions < 0) | (actions >= len(action_names))).any():
        raise PolicyLoadError(f"policy returned actions outside 0..{len(action_names) - 1}")
    return (time.perf_counter() - t0) * 1e3
