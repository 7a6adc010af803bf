"""Which policy drives the NPCs: `--policy default|mappo|scripted|random|PATH`, resolved by npc_brains.load_policy.

The sandbox never decides what an NPC does; it asks a `Policy` (engine.policy_api) once per tick
for every NPC at once. A `PolicySource` makes a fresh, seeded policy for each run so that a recorded
session (seed + commands) replays to the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.policy_api import Policy
from npc_brains.resolve import BASELINES, PolicyError, load_policy

__all__ = ["PolicyError", "PolicySource", "reseed", "resolve_policy"]


@dataclass
class PolicySource:
    """A named way to get a policy; `make(seed, slots)` returns one seeded for a new run."""

    name: str
    factory: Callable[[int, int], Policy]
    spec: str = ""  # what --policy must say to get this policy again (a session stores it); default: name

    def __post_init__(self) -> None:
        self.spec = self.spec or self.name

    def make(self, seed: int, slots: int) -> Policy:
        policy = self.factory(seed, slots)
        reseed(policy, seed)
        return policy


def reseed(policy: object, seed: int) -> None:
    """Put a policy's own randomness in a known state: its `seed()` method, its numpy `rng`, or its
    torch `generator` (npc_brains' NumpyPolicy and TorchPolicy sample from those)."""
    seed_method = getattr(policy, "seed", None)
    if callable(seed_method):
        seed_method(seed)
        return
    if isinstance(getattr(policy, "rng", None), np.random.Generator):
        policy.rng = np.random.default_rng(seed)  # type: ignore[attr-defined]
    generator = getattr(policy, "generator", None)
    if callable(getattr(generator, "manual_seed", None)):
        generator.manual_seed(seed)  # type: ignore[union-attr]


def policy_slots(policy: object) -> int | None:
    """The observation slots K a policy was built for, from its `obs_dim` (None: it adapts to any K)."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    obs_dim = getattr(policy, "obs_dim", None)
    if not isinstance(obs_dim, int):
        return None
    k, rest = divmod(obs_dim - len(SELF_FEATURES), len(SLOT_FEATURES))
    if rest or k < 1:
        raise PolicyError(f"policy {getattr(policy, 'name', '?')!r}: observation width {obs_dim} does not "
                          f"match this engine's layout ({len(SELF_FEATURES)} + K*{len(SLOT_FEATURES)})")
    return k


def resolve_policy(spec: str | Policy) -> PolicySource:
    """A `--policy` spec (npc_brains.load_policy; PolicyError where it cannot be used), or a `Policy` object
    used as it is (reseeded on every run)."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "act", None)):
            raise PolicyError(f"expected a policy name or an object with act(obs, mask), got {spec!r}")
        name = str(getattr(spec, "name", type(spec).__name__))
        return PolicySource(name, lambda seed, slots: spec)
    if spec in BASELINES:  # rules and random actions adapt to the run's K: made afresh for each run
        return PolicySource(spec, lambda seed, slots: load_policy(spec, seed=seed, slots=slots))
    try:
        loaded = load_policy(spec)
    except PolicyError as exc:
        raise PolicyError(f"--policy: {exc}") from None
    if Path(spec).is_file():  # a file: sessions store its absolute path, so a replay finds it from anywhere
        return PolicySource(str(getattr(loaded, "name", Path(spec).stem)), lambda seed, slots: loaded,
                            spec=str(Path(spec).resolve()))
    return PolicySource(spec, lambda seed, slots: loaded)
