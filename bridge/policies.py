"""Which policy the bridge serves: a baseline by name, the bundled default, or a checkpoint path."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from engine.observe import observation_layout
from engine.vec_env import flat_action_names
from npc_brains.policy_api import Policy

BASELINE_NAMES = ("scripted", "random")


class PolicyLoadError(Exception):
    """The policy cannot be loaded or does not answer the probe (a one-line reason)."""


def layout(slots: int) -> tuple[list[str], list[str]]:
    """(observation feature names, flat action names) for K = slots."""
    return observation_layout(slots), flat_action_names(slots)


def load_policy(spec: str, *, slots: int, seed: int | None = 0) -> Policy:
    """`scripted`, `random`, `default` (the bundled trained policy) or a checkpoint path."""
    if spec in BASELINE_NAMES:
        from npc_brains.baselines import get_baseline

        return get_baseline(spec, seed=seed, slots=slots)
    try:
        from npc_brains import load_policy as brains_load_policy
    except ImportError:
        raise PolicyLoadError(f"cannot load {spec!r}: this build has no trained-policy loader "
                              f"(npc_brains.load_policy); use one of {', '.join(BASELINE_NAMES)}") from None
    if spec != "default" and not Path(spec).exists():
        raise PolicyLoadError(f"no such policy checkpoint {spec!r}; expected a path, 'default' or one of "
                              f"{', '.join(BASELINE_NAMES)}")
    try:
        from npc_brains.checkpoint import CheckpointError
    except ImportError:  # pragma: no cover - the loader exists but not its error type
        CheckpointError = ValueError  # noqa: N806
    try:
        return brains_load_policy(spec, seed=seed)
    except (CheckpointError, OSError, ValueError, KeyError, RuntimeError) as exc:
        raise PolicyLoadError(f"cannot load policy {spec!r}: {exc}") from None


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
