"""Headless village simulation: batched state, the tick, perception, appraisal, env APIs."""

from engine.constants import ACTION_NAMES, REACTION_NAMES, Action, EventType, Reaction, Tuning
from engine.sim import VillageSim, flat_action
from engine.vec_env import VillageVecEnv, make_vec_env, resolve_world

__all__ = [
    "ACTION_NAMES", "REACTION_NAMES", "Action", "EventType", "Reaction", "Tuning", "VillageSim", "flat_action",
    "VillageVecEnv", "make_vec_env", "resolve_world", "make_env",
]


def make_env(*args, **kwargs):
    """PettingZoo ParallelEnv (imported lazily: pettingzoo is only needed for this API)."""
    from engine.env import make_env as _make_env

    return _make_env(*args, **kwargs)
