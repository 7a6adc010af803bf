"""Which policy drives the NPCs: `--policy default|scripted|random|PATH`, resolved through npc_brains.

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
from npc_brains.config import policy_tuning  # the sandbox runs a trained policy in the world it learned

__all__ = ["PolicyError", "PolicySource", "policy_slots", "policy_tuning", "reseed", "resolve_policy"]


class PolicyError(ValueError):
    """A policy name or file that cannot be used; the message says what was expected."""


BUILTIN = ("default", "scripted", "random")


@dataclass
class PolicySource:
    """A named way to get a policy; `make(seed, slots)` returns one seeded for a new run."""

    name: str
    factory: Callable[[int, int], Policy]
    note: str = ""  # e.g. "no trained policy bundled: using the scripted baseline"
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


def _baseline(name: str) -> Callable[[int, int], Policy]:
    from npc_brains.baselines import get_baseline

    return lambda seed, slots: get_baseline(name, seed=seed, slots=slots)


def _loader() -> Callable[..., Policy] | None:
    try:
        import npc_brains

        return npc_brains.load_policy
    except (ImportError, AttributeError):  # a build without the policy runtime
        return None


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
        default_path = _default_path()
        if load is None or default_path is None:
            return PolicySource("scripted", _baseline("scripted"),
                                note="no trained policy in this build: using the scripted baseline")
        if not default_path.is_file():
            return PolicySource("scripted", _baseline("scripted"),
                                note="no trained policy bundled yet: using the scripted baseline")
        try:
            loaded = load("default")
        except Exception as exc:  # a broken bundled file must not stop the sandbox: say so, use the baseline
            return PolicySource("scripted", _baseline("scripted"),
                                note=f"cannot load the bundled policy ({exc}): using the scripted baseline")
        return PolicySource("default", lambda seed, slots: loaded)
    path = Path(spec)
    if not path.exists():
        raise PolicyError(f"--policy: expected default, scripted, random or a checkpoint path, got {spec!r} "
                          f"(no such file)")
    if load is None:
        raise PolicyError(f"--policy {spec}: loading a trained checkpoint needs npc_brains.load_policy, "
                          f"which this build does not have")
    try:
        loaded = load(str(path))
    except Exception as exc:  # CheckpointError, OSError, ...: one line for the user, whatever the cause
        raise PolicyError(f"--policy {spec}: cannot load the checkpoint: {exc}") from None
    return PolicySource(str(getattr(loaded, "name", path.stem)), lambda seed, slots: loaded,
                        spec=str(path.resolve()))


def _default_path() -> Path | None:
    try:
        import npc_brains

        return Path(npc_brains.DEFAULT_POLICY)
    except (ImportError, AttributeError):
        return None
