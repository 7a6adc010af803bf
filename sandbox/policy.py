"""Which policy drives the NPCs: `--policy default|scripted|random|PATH`, resolved through npc_brains.

The sandbox never decides what an NPC does; it asks a `Policy` (npc_brains.policy_api) once per tick
for every NPC at once. A `PolicySource` makes a fresh, seeded policy for each run so that a recorded
session (seed + commands) replays to the same state.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npc_brains.policy_api import Policy


class PolicyError(ValueError):
    """A policy name or file that cannot be used; the message says what was expected."""


BUILTIN = ("default", "scripted", "random")


@dataclass
class PolicySource:
    """A named way to get a policy; `make(seed, slots)` returns one seeded for a new run."""

    name: str
    factory: Callable[[int, int], Policy]
    note: str = ""  # e.g. "no trained policy bundled: using the scripted baseline"

    def make(self, seed: int, slots: int) -> Policy:
        policy = self.factory(seed, slots)
        reseed(policy, seed)
        return policy


def reseed(policy: object, seed: int) -> None:
    """Put a policy's own randomness in a known state (its `seed()` method, or its numpy `rng`)."""
    seed_method = getattr(policy, "seed", None)
    if callable(seed_method):
        seed_method(seed)
    elif isinstance(getattr(policy, "rng", None), np.random.Generator):
        policy.rng = np.random.default_rng(seed)  # type: ignore[attr-defined]
    if "torch" in sys.modules:  # a torch policy that samples uses torch's global generator
        sys.modules["torch"].manual_seed(seed)


def _baseline(name: str) -> Callable[[int, int], Policy]:
    from npc_brains.baselines import get_baseline

    return lambda seed, slots: get_baseline(name, seed=seed, slots=slots)


def _loader() -> Callable[..., Policy] | None:
    try:
        import npc_brains
    except ImportError:  # pragma: no cover - npc_brains is part of this distribution
        return None
    return getattr(npc_brains, "load_policy", None)


def resolve_policy(spec: str | Policy) -> PolicySource:
    """`default` (the bundled trained policy, else the scripted baseline), `scripted`, `random`, or a
    checkpoint path; a `Policy` object is used as it is (reseeded on every run)."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "act", None)):
            raise PolicyError(f"expected a policy name or an object with act(obs, mask), got {spec!r}")
        name = str(getattr(spec, "name", type(spec).__name__))
        return PolicySource(name, lambda seed, slots: spec)
    if spec in ("scripted", "random"):
        return PolicySource(spec, _baseline(spec))
    load = _loader()
    if spec == "default":
        if load is not None:
            try:
                loaded = load("default")
            except (FileNotFoundError, LookupError, ValueError) as exc:
                return PolicySource("scripted", _baseline("scripted"),
                                    note=f"no default trained policy ({exc}); using the scripted baseline")
            return PolicySource("default", lambda seed, slots: loaded)
        return PolicySource("scripted", _baseline("scripted"),
                            note="no trained policy in this build; using the scripted baseline")
    path = Path(spec)
    if not path.exists():
        raise PolicyError(f"--policy: expected default, scripted, random or a checkpoint path, got {spec!r} "
                          f"(no such file)")
    if load is None:
        raise PolicyError(f"--policy {spec}: loading a trained checkpoint needs npc_brains.load_policy, "
                          f"which this build does not have")
    try:
        loaded = load(str(path))
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise PolicyError(f"--policy {spec}: cannot load the checkpoint: {exc}") from None
    return PolicySource(str(getattr(loaded, "name", path.stem)), lambda seed, slots: loaded)
