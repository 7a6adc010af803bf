"""Baseline policies behind the same batched `act(obs, mask)` interface as the trained brains.

- `RandomPolicy`: uniform over the valid actions of each row.
- `ScriptedPolicy`: the usual game-AI way, a small utility rule set read off the observation by
  feature name (flee, revenge, mourn, console, warn, then needs, then work). It is the reference a
  learned policy is compared with, and what `village demo` uses until a trained policy is bundled.

numpy only: this module never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.constants import TARGETED, UNTARGETED, Action
from engine.observe import SELF_FEATURES, SLOT_FEATURES
from npc_brains.policy_api import Policy, PolicyOutput

BASELINES: tuple[str, ...] = ("scripted", "random")


def _check_batch(obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    obs = np.asarray(obs, np.float32)
    mask = np.asarray(mask, bool)
    if obs.ndim != 2 or mask.ndim != 2 or obs.shape[0] != mask.shape[0]:
        raise ValueError(f"expected obs (R, obs_dim) and mask (R, n_actions) with the same R, "
                         f"got {obs.shape} and {mask.shape}")
    return obs, mask


class RandomPolicy:
    """Uniform over each row's valid actions. A uniform distribution has no mode, so `deterministic`
    does not change the choice; the policy's own seeded generator makes runs reproducible."""

    name = "random"

    def __init__(self, seed: int | None = 0):
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False,
            with_probs: bool = False, with_values: bool = False) -> PolicyOutput:
        obs, mask = _check_batch(obs, mask)
        # argmax of uniform noise restricted to valid entries = a uniform choice among them;
        # a row without any valid action gets 0 (IDLE), which the engine always accepts
        noise = np.where(mask, self.rng.random(mask.shape), -1.0)
        actions = np.argmax(noise, axis=1).astype(np.int64)
        probs = None
        if with_probs:
            count = mask.sum(1, keepdims=True)
            probs = (mask / np.maximum(count, 1)).astype(np.float32)
            probs[count[:, 0] == 0, 0] = 1.0  # the IDLE fallback
        return PolicyOutput(actions, probs, None)


@dataclass(frozen=True)
class ScriptedRules:
    """Thresholds of the rule set (emotions as in the observation; needs and traits in [0, 1])."""

    flee_fear: float = 0.3  # flee a known threat in sight when this afraid of it ...
    flee_bravery: float = 0.5  # ... and less brave than this
    revenge_anger: float = 0.3  # attack a known culprit when this angry at it ...
    revenge_aggression: float = 0.6  # ... and at least this aggressive
    mourn_grief: float = 0.2  # mourn a known-dead close relation when grieving this much
    close_affinity: float = 0.3  # a "close" relation: affinity at least this, or kin
    comfort_grief: float = 0.3  # comfort a friend grieving at least this much ...
    comfort_empathy: float = 0.6  # ... when at least this empathic
    warn_fear: float = 0.15  # warn friends out of sight while this afraid of a known threat ...
    warn_anger: float = 0.3  # ... or this angry
    hungry: float = 0.6
    tired: float = 0.3  # energy below this
    lonely: float = 0.4  # social below this
    night_sleep_energy: float = 0.9  # at night, sleep unless energy is above this


# Utility bands: a higher band always wins over a lower one; within a band, intensity decides.
_FLEE, _REVENGE, _MOURN, _COMFORT, _WARN = 100.0, 90.0, 80.0, 70.0, 60.0
_EAT, _SLEEP, _TALK, _WORK, _WANDER, _IDLE = 50.0, 45.0, 40.0, 30.0, 2.0, 1.0


class ScriptedPolicy:
    """A utility rule set over named observation features, vectorised over rows.

    Every rule scores the actions it proposes; invalid actions are masked out and the best remaining
    one is taken, so the result is always valid (when nothing else is, the fallback order is work,
    wander, idle). With `deterministic=False` a tiny seeded jitter breaks ties between equal scores.
    """

    name = "scripted"

    def __init__(self, slots: int | None = None, seed: int | None = 0, rules: ScriptedRules | None = None):
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.slots = slots
        self.rules = rules or ScriptedRules()
        self.rng = np.random.default_rng(seed)
        self._self = {name: k for k, name in enumerate(SELF_FEATURES)}
        self._slot = {name: k for k, name in enumerate(SLOT_FEATURES)}

    def _slots_for(self, obs_dim: int) -> int:
        """K, from the observation width (and checked against `slots` when given)."""
        k, rest = divmod(obs_dim - len(SELF_FEATURES), len(SLOT_FEATURES))
        if rest or k < 1:
            raise ValueError(f"observation width {obs_dim} does not match the engine's layout "
                             f"({len(SELF_FEATURES)} + K*{len(SLOT_FEATURES)})")
        if self.slots is not None and self.slots != k:
            raise ValueError(f"policy built for {self.slots} slots, observation has {k}")
        return k

    def utilities(self, obs: np.ndarray) -> np.ndarray:
        """(R, n_actions) rule scores before masking (0 where no rule proposes the action)."""
        obs = np.asarray(obs, np.float32)
        R = obs.shape[0]
        K = self._slots_for(obs.shape[1])
        r = self.rules

        def own(name: str) -> np.ndarray:  # (R,)
            return obs[:, self._self[name]]

        slots = obs[:, len(SELF_FEATURES):].reshape(R, K, len(SLOT_FEATURES))

        def slot(name: str) -> np.ndarray:  # (R, K)
            return slots[:, :, self._slot[name]]

        present = slot("present") > 0.5
        is_npc = slot("is_npc") > 0.5
        believed_alive = slot("believed_alive") > 0.5
        in_sight = slot("dist") < 1.0  # dist is divided by the sight radius
        close = (slot("affinity") >= r.close_affinity) | (slot("kin") > 0.5) | (slot("spouse") > 0.5)
        threat = present & believed_alive & (slot("known_threat") > 0.5)
        living_friend = present & is_npc & believed_alive & close & ~threat
        bravery, aggression, empathy = own("bravery"), own("aggression"), own("empathy")
        grief = own("grief")

        u = np.zeros((R, len(UNTARGETED) + len(TARGETED) * K), np.float32)

        def put(kind: Action, score: np.ndarray) -> None:
            base = len(UNTARGETED) + TARGETED.index(kind) * K
            u[:, base:base + K] = np.maximum(u[:, base:base + K], score)

        # fear: run from a known threat in sight (not from one's own family) when afraid and not brave
        fear_at = slot("fear")
        flee = threat & ~close & in_sight & (fear_at >= r.flee_fear) & (bravery < r.flee_bravery)[:, None]
        put(Action.FLEE, np.where(flee, _FLEE + fear_at, 0.0))
        # revenge: attack the one believed to have killed someone, when angry and aggressive
        anger_at = slot("anger")
        blamed = present & believed_alive & (slot("blamed_for_death") > 0.5)
        revenge = blamed & (anger_at >= r.revenge_anger) & (aggression >= r.revenge_aggression)[:, None]
        put(Action.ATTACK, np.where(revenge, _REVENGE + anger_at, 0.0))
        # grief: mourn a close relation known to be dead
        dead_close = present & is_npc & (slot("known_dead") > 0.5) & close
        mourn = dead_close & (grief >= r.mourn_grief)[:, None]
        put(Action.MOURN, np.where(mourn, _MOURN + grief[:, None] + slot("affinity"), 0.0))
        # empathy: comfort a grieving friend
        their_grief = slot("their_grief")
        comfort = living_friend & (their_grief >= r.comfort_grief) & (empathy >= r.comfort_empathy)[:, None]
        put(Action.COMFORT, np.where(comfort, _COMFORT + their_grief, 0.0))
        # alarm: while a known threat still stirs fear or anger, warn the closest friend out of sight
        # (those in sight may have seen it themselves; a stateless rule cannot know who was told)
        stirred = (own("fear_max") >= r.warn_fear) | (own("anger_max") >= r.warn_anger)
        knows_threat = threat.any(1) & stirred
        warn = living_friend & ~in_sight & knows_threat[:, None]
        put(Action.WARN, np.where(warn, _WARN + slot("affinity"), 0.0))
        # needs
        hunger, energy, social = own("hunger"), own("energy"), own("social")
        u[:, UNTARGETED.index(Action.EAT)] = np.where(hunger >= r.hungry, _EAT + hunger, 0.0)
        night = own("night") > 0.5
        sleepy = (energy < r.tired) | (night & (energy < r.night_sleep_energy))
        u[:, UNTARGETED.index(Action.SLEEP)] = np.where(sleepy, _SLEEP + (1 - energy), 0.0)
        lonely = social < r.lonely
        talk = present & is_npc & believed_alive & ~threat & lonely[:, None]
        put(Action.TALK, np.where(talk, _TALK + slot("affinity") + (1 - social)[:, None], 0.0))
        # otherwise work; wander and idle are the fallbacks
        u[:, UNTARGETED.index(Action.WORK)] = _WORK
        u[:, UNTARGETED.index(Action.WANDER)] = _WANDER
        u[:, UNTARGETED.index(Action.IDLE)] = _IDLE
        return u

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False,
            with_probs: bool = False, with_values: bool = False) -> PolicyOutput:
        obs, mask = _check_batch(obs, mask)
        u = self.utilities(obs)
        if u.shape[1] != mask.shape[1]:
            raise ValueError(f"expected {u.shape[1]} actions for this observation layout, "
                             f"got a mask of {mask.shape[1]}")
        if not deterministic:
            u = u + self.rng.random(u.shape).astype(np.float32) * 1e-3
        # a row with no valid action at all gets 0 (IDLE), which the engine always accepts
        actions = np.argmax(np.where(mask, u, -np.inf), axis=1).astype(np.int64)
        actions = np.where(mask.any(1), actions, 0)
        probs = None
        if with_probs:
            probs = np.zeros(mask.shape, np.float32)
            probs[np.arange(len(actions)), actions] = 1.0
        return PolicyOutput(actions, probs, None)


def get_baseline(name: str, *, seed: int | None = 0, slots: int | None = None) -> Policy:
    """A baseline policy by name: "scripted" or "random"."""
    if name == "scripted":
        return ScriptedPolicy(slots=slots, seed=seed)
    if name == "random":
        return RandomPolicy(seed=seed)
    raise ValueError(f"unknown baseline {name!r}; expected one of {', '.join(BASELINES)}")
