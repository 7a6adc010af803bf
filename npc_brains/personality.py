"""Personality strength: each NPC's learned personality, played more (or less) strongly.

A trained policy conditions every NPC's choice on its personality (the trait columns of its observation). At
personality strength s an NPC acts from

    logits_s(o) = logits(o, neutral) + s * (logits(o, own) - logits(o, neutral))

where `neutral` is the same observation with every trait at 0.5, the worlds' default villager (`worlds.Traits`);
the role, the needs, the emotions and what the NPC knows are its own. s = 1 is the trained policy exactly; s > 1
pushes each NPC further the way its own traits already push it (the timid flee sooner, the sociable talk more);
s = 0 plays everyone as the neutral villager of its role. Nothing is scripted: the direction and the size of every
push are what the network learned for that personality in that situation, which is why it is a dial a designer can
turn without retraining. It is classifier-free guidance (Ho and Salimans, 2022) applied to a personality-conditioned
policy, and DiCo's scaling of each agent's deviation from a shared policy (Bettini et al., 2024) with the neutral
villager as the shared policy.

`traits` narrows the dial to some of the five traits: only those are set to 0.5 in the neutral observation, so only
their pull is strengthened and the others' stays as trained. `sociability,diligence`, the two traits that weigh an
NPC's everyday needs and pay (engine.mind), strengthens the everyday personality (whom to talk to, whether to work
at night) and leaves what bravery, aggression and empathy do after a killing as trained.

The logits are recovered from the wrapped policy's probabilities (log p differs from the logits by a constant per
row, which the softmax ignores), so it wraps any backend (numpy, torch, ONNX) and costs one forward of twice the
rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from npc_brains.policy_api import PolicyOutput
from npc_brains.runtime import check_temperature, tempered_probs

TRAIT_COLUMNS = ("bravery", "aggression", "empathy", "sociability", "diligence")  # worlds.TRAIT_NAMES
NEUTRAL_TRAIT = 0.5  # worlds.Traits' default: the villager nobody described
PERSONALITY_RANGE = (0.0, 10.0)
_LOG_FLOOR = np.float32(1e-30)  # a valid action whose probability underflowed to 0 keeps a finite log


def check_personality(value: Any, name: str = "personality_strength") -> float:
    """`value` as a personality strength; ValueError (one line, starting with `name`, saying what is expected)."""
    low, high = PERSONALITY_RANGE
    try:
        s = float(value)
    except (TypeError, ValueError):
        s = float("nan")
    if isinstance(value, bool) or not low <= s <= high:  # also refuses nan
        raise ValueError(f"{name}: expected a number from {low:g} to {high:g} (1 plays the trained policy, higher "
                         f"plays each NPC's personality more strongly, 0 plays everyone as a neutral villager), "
                         f"got {value!r}")
    return s


def check_traits(value: Any, name: str = "personality_traits") -> tuple[str, ...]:
    """The traits a personality strength acts on: a comma-separated string or a sequence of trait names, `all` (or
    None) for the five; ValueError (one line, starting with `name`) naming a bad one."""
    if value is None or value == "all":
        return TRAIT_COLUMNS
    items = value.split(",") if isinstance(value, str) else value
    try:
        names = tuple(str(item).strip() for item in items)
    except TypeError:
        names = ()
    bad = [n for n in names if n not in TRAIT_COLUMNS]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(f"{name}: expected 'all' or distinct trait names among {', '.join(TRAIT_COLUMNS)}, got "
                         f"{value!r}")
    return tuple(t for t in TRAIT_COLUMNS if t in names)  # the observation's order


def trait_columns(layout: Sequence[str], name: str = "personality_strength",
                  traits: Sequence[str] = TRAIT_COLUMNS) -> np.ndarray:
    """The observation columns of `traits` (default: all five); ValueError (starting with `name`) when the layout
    lacks one."""
    missing = [trait for trait in traits if trait not in layout]
    if missing:
        raise ValueError(f"{name}: this policy's observation has no trait column {missing[0]!r} (expected a "
                         f"policy trained on village worlds)")
    return np.array([list(layout).index(trait) for trait in traits], np.int64)


def guidable(policy: Any, name: str = "personality_strength", traits: Sequence[str] = TRAIT_COLUMNS) -> np.ndarray:
    """The columns of `traits` of a policy whose personality can be played more or less strongly; ValueError
    (starting with `name`) for one without learned probabilities (the scripted rules, random actions) or trait
    columns."""
    who = getattr(policy, "name", type(policy).__name__)
    if not hasattr(policy, "temperature"):
        raise ValueError(f"{name}: {who} has no learned personality to play more or less strongly (expected a "
                         f"trained policy)")
    baked = getattr(policy, "baked_personality", 1.0)
    if baked != 1.0:
        raise ValueError(f"{name}: {who} was exported at personality strength {baked:g}, computed in its graph; "
                         f"export it at 1 (the default) to vary the strength")
    return trait_columns(getattr(policy, "observation_layout", ()), name, traits)


class PersonalityStrength:
    """A trained policy played at personality strength `strength` (module docstring); the `Policy` interface.

    Sampling temperature (`temperature`, npc_brains.runtime.set_temperature) applies after the guidance: the
    wrapped policy is asked at 1, and its own temperature is left as it was. `strength` may be changed between
    calls (the bridge's per-request strength); at 1 a call is the wrapped policy's own, at the wrapper's
    temperature, with the policy's own sampling. Everything a harness reads off a policy (its world, slots,
    layout, spec) is the wrapped policy's."""

    def __init__(self, policy: Any, strength: float, *, seed: int | None = 0, name: str = "personality_strength",
                 traits: Any = None):
        self.strength = check_personality(strength, name)
        self.trait_names = check_traits(traits)
        self.traits = guidable(policy, name, self.trait_names)
        self.temperature = float(policy.temperature)  # from now on the wrapper's; the policy's own is left as it is
        self.inner = policy
        self.rng = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:  # spec, env, config, name, action_names, observation_layout, ...
        if name == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def guided_probs(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(R, A) the distribution each row acts from at this strength and temperature."""
        obs = np.asarray(obs, np.float32)
        mask = np.asarray(mask, bool)
        R = len(obs)
        both = np.concatenate([obs, obs])
        both[R:, self.traits] = NEUTRAL_TRAIT
        probs = self._inner_act(1.0, both, np.concatenate([mask, mask]), deterministic=True, with_probs=True).probs
        logp = np.log(np.maximum(np.asarray(probs, np.float32), _LOG_FLOOR))
        own, neutral = logp[:R], logp[R:]
        z = neutral + np.float32(self.strength) * (own - neutral)
        z = np.where(mask, z, -np.inf)
        z -= z.max(1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(1, keepdims=True)
        return tempered_probs(z.astype(np.float32, copy=False), check_temperature(self.temperature))

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        if self.strength == 1.0:  # the trained policy itself, its own sampling included (a server's default)
            return self._inner_act(self.temperature, obs, mask, deterministic=deterministic, with_probs=with_probs,
                                   with_values=with_values)
        probs = self.guided_probs(obs, mask)
        if deterministic:
            actions = probs.argmax(1)
        else:  # inverse CDF; a masked action has probability exactly 0, so it is never reached
            cdf = probs.cumsum(1)
            u = self.rng.random(len(probs), dtype=np.float32) * cdf[:, -1]
            actions = (cdf > u[:, None]).argmax(1)
        out = PolicyOutput(actions.astype(np.int64), probs if with_probs else None)
        if with_values:
            out.values = self._inner_act(1.0, obs, mask, deterministic=True, with_values=True).values
        return out

    def _inner_act(self, temperature: float, obs: np.ndarray, mask: np.ndarray, **flags: bool) -> PolicyOutput:
        """The wrapped policy's act at `temperature`, its own temperature restored after (a server may share it)."""
        own = self.inner.temperature
        self.inner.temperature = temperature
        try:
            return self.inner.act(obs, mask, **flags)
        finally:
            self.inner.temperature = own


def with_personality_strength(policy: Any, strength: Any, *, seed: int | None = 0,
                              name: str = "personality_strength", traits: Any = None) -> Any:
    """`policy` played at `strength`; the policy itself at 1 (the trained play, no wrapper). ValueError (one line,
    starting with `name`, the flag or field) for a bad strength or a policy without a learned personality."""
    s = check_personality(strength, name)
    if s == 1.0:
        guidable(policy, name, check_traits(traits))  # the same errors as any other strength
        return policy
    return PersonalityStrength(policy, s, seed=seed, name=name, traits=traits)
