"""Personality strength: an NPC's logits moved S times as far from a neutral villager's as the network puts them;
S = 1 is the trained policy, S = 0 everyone as the neutral villager; the untrained comparison and any backend take
it; bad strengths and policies without a learned personality are one-line errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from engine.scenarios import load_scenario, run_scenario
from npc_brains import load_policy
from npc_brains.evaluate import persona_probs, policy_slots, policy_tuning, random_init_policy
from npc_brains.personality import (
    NEUTRAL_TRAIT,
    TRAIT_COLUMNS,
    PersonalityStrength,
    check_personality,
    check_traits,
    trait_columns,
    with_personality_strength,
)
from npc_brains.runtime import set_temperature, tempered_probs
from worlds import load_world


@pytest.fixture(scope="module")
def trace():
    """A village after a killing, played by the bundled policy: its probe rows and personalities."""
    policy = load_policy("default", seed=0)
    return run_scenario(policy, load_scenario("kill-parent"), load_world("village-v1"), villages=2, seed=1,
                        slots=policy_slots(policy), tuning=policy_tuning(policy))


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def test_probabilities_follow_the_guidance_formula(trace):
    """log p_S = log p(neutral) + S (log p(own) - log p(neutral)), renormalised, from the network's own outputs."""
    obs, mask = trace.probe_obs, trace.probe_mask
    plain = load_policy("default", seed=0)
    cols = trait_columns(plain.observation_layout)
    neutral_obs = obs.copy()
    neutral_obs[:, cols] = NEUTRAL_TRAIT
    own = plain.act(obs, mask, deterministic=True, with_probs=True).probs.astype(np.float64)
    neutral = plain.act(neutral_obs, mask, deterministic=True, with_probs=True).probs.astype(np.float64)
    valid = mask & (own > 1e-20) & (neutral > 1e-20)
    for s in (0.0, 0.5, 2.0, 3.0):
        guided = PersonalityStrength(load_policy("default", seed=0), s).act(obs, mask, deterministic=True,
                                                                            with_probs=True).probs
        assert (guided[~mask] == 0).all()
        z = np.where(mask, np.log(np.maximum(neutral, 1e-30)) + s * (np.log(np.maximum(own, 1e-30))
                                                                     - np.log(np.maximum(neutral, 1e-30))), -np.inf)
        expected = np.exp(log_softmax(z))
        assert np.abs(guided - expected)[valid].max() < 1e-4
        if s == 0.0:
            assert np.abs(guided - neutral)[valid].max() < 1e-4  # everyone as the neutral villager


def test_strength_one_is_the_trained_policy_itself(trace):
    policy = load_policy("default", seed=0)
    set_temperature(policy, 0.5)
    assert with_personality_strength(policy, 1) is policy
    assert policy.temperature == 0.5  # untouched
    obs, mask = trace.probe_obs, trace.probe_mask
    wrapped = PersonalityStrength(load_policy("default", seed=0), 1.0)
    base = load_policy("default", seed=0).act(obs, mask, deterministic=True, with_probs=True)
    out = wrapped.act(obs, mask, deterministic=True, with_probs=True)
    assert np.abs(out.probs - base.probs).max() < 1e-5
    assert np.array_equal(out.actions, base.actions)


def test_a_stronger_personality_spreads_the_personalities_apart(trace):
    """The SND of the probe rows (every personality swapped in) rises with the strength; at 0 only the role is
    personal, so two NPCs of one role choose alike."""
    from engine.metrics import pairwise_tv

    def probs(s: float) -> np.ndarray:
        return persona_probs(with_personality_strength(load_policy("default", seed=0), s), trace)

    zero, one, two = (float(pairwise_tv(probs(s)).mean()) for s in (0.0, 1.0, 2.0))
    assert zero < one < two
    roles = trace.personas[:, len(trait_columns(load_policy("default").observation_layout)):]
    same_role = [(i, j) for i in range(len(roles)) for j in range(i + 1, len(roles))
                 if np.array_equal(roles[i], roles[j]) and not np.array_equal(trace.personas[i], trace.personas[j])]
    assert same_role
    at_zero, at_one = probs(0.0), probs(1.0)
    for i, j in same_role:
        assert np.abs(at_zero[:, i] - at_zero[:, j]).max() < 1e-5
    assert any(np.abs(at_one[:, i] - at_one[:, j]).max() > 0.01 for i, j in same_role)


def test_temperature_applies_after_the_guidance(trace):
    obs, mask = trace.probe_obs, trace.probe_mask
    policy = load_policy("default", seed=0)
    set_temperature(policy, 0.5)
    wrapped = with_personality_strength(policy, 2.0)
    assert wrapped.temperature == 0.5 and policy.temperature == 0.5  # the wrapper holds T from now on
    at_one = PersonalityStrength(load_policy("default", seed=0), 2.0).guided_probs(obs, mask)
    assert np.abs(wrapped.guided_probs(obs, mask) - tempered_probs(at_one, 0.5)).max() < 1e-5
    set_temperature(wrapped, 0.25)
    assert np.abs(wrapped.guided_probs(obs, mask) - tempered_probs(at_one, 0.25)).max() < 1e-5


def test_sampling_is_seeded_valid_and_follows_the_probabilities(trace):
    obs, mask = trace.probe_obs[:4], trace.probe_mask[:4]
    a, b = (PersonalityStrength(load_policy("default", seed=0), 2.0, seed=7) for _ in range(2))
    draws = np.stack([a.act(obs, mask).actions for _ in range(3000)])
    assert np.array_equal(draws[:20], np.stack([b.act(obs, mask).actions for _ in range(20)]))
    probs = a.guided_probs(obs, mask)
    assert mask[np.arange(4)[None, :].repeat(3000, 0), draws].all()  # never a masked action
    for r in range(4):
        freq = np.bincount(draws[:, r], minlength=probs.shape[1]) / len(draws)
        assert np.abs(freq - probs[r]).max() < 0.04
    greedy = a.act(obs, mask, deterministic=True, with_values=True)
    assert np.array_equal(greedy.actions, probs.argmax(1)) and greedy.values is not None


def test_backends_and_the_untrained_population_take_it(trace):
    obs, mask = trace.probe_obs, trace.probe_mask
    numpy_side = PersonalityStrength(load_policy("default", seed=0), 2.0).guided_probs(obs, mask)
    torch_side = PersonalityStrength(load_policy("default", seed=0, backend="torch"), 2.0).guided_probs(obs, mask)
    assert np.abs(numpy_side - torch_side).max() < 1e-4
    population = random_init_policy(load_policy("default", seed=0), seed=0, draws=3)
    guided = with_personality_strength(population, 2.0)
    out = guided.act(obs, mask, deterministic=True, with_probs=True)
    assert out.probs.shape == (len(obs), population.n_actions) and (out.probs[~mask] == 0).all()
    assert guided.observation_layout == population.observation_layout  # what the harness reads passes through


def test_it_pickles_for_ray_actors(trace):
    wrapped = PersonalityStrength(load_policy("default", seed=0), 2.5)
    copy = pickle.loads(pickle.dumps(wrapped))
    obs, mask = trace.probe_obs, trace.probe_mask
    assert copy.strength == 2.5
    assert np.array_equal(copy.guided_probs(obs, mask), wrapped.guided_probs(obs, mask))


@pytest.mark.parametrize("value", [-0.1, 10.5, float("nan"), "strong", True, None])
def test_a_bad_strength_is_a_one_line_error_naming_the_field(value):
    with pytest.raises(ValueError, match=r"^--personality-strength: expected a number from 0 to 10") as info:
        check_personality(value, "--personality-strength")
    assert "\n" not in str(info.value)


def test_policies_without_a_learned_personality_are_refused():
    with pytest.raises(ValueError, match="scripted has no learned personality"):
        with_personality_strength(load_policy("scripted"), 2.0)
    with pytest.raises(ValueError, match="scripted has no learned personality"):
        with_personality_strength(load_policy("scripted"), 1.0)  # the same answer at 1
    with pytest.raises(ValueError, match="no trait column 'bravery'"):
        trait_columns(["health", "hunger"])


def test_a_wrapper_at_strength_one_plays_as_the_policy_itself(trace):
    """What a server that may be asked for another strength serves by default: the same actions, sampled ones
    included, and the same temperature."""
    obs, mask = trace.probe_obs, trace.probe_mask
    plain = load_policy("default", seed=3)
    set_temperature(plain, 0.5)
    wrapped = PersonalityStrength(load_policy("default", seed=3), 1.0)
    set_temperature(wrapped, 0.5)
    for _ in range(3):
        assert np.array_equal(plain.act(obs, mask).actions, wrapped.act(obs, mask).actions)
    assert wrapped.inner.temperature == 1.0  # left as it was
    wrapped.strength = 2.0
    guided = wrapped.act(obs, mask, deterministic=True, with_probs=True).probs
    at_one = PersonalityStrength(load_policy("default"), 2.0).guided_probs(obs, mask)
    assert np.abs(guided - tempered_probs(at_one, 0.5)).max() < 1e-5


def test_chosen_traits_are_the_only_ones_strengthened(trace):
    """With traits = sociability, diligence only those two are neutral in the reference observation: the formula
    holds with that reference, and two personalities that differ only in another trait keep the trained gap."""
    obs, mask = trace.probe_obs, trace.probe_mask
    plain = load_policy("default", seed=0)
    layout = list(plain.observation_layout)
    everyday = [layout.index("sociability"), layout.index("diligence")]
    reference = obs.copy()
    reference[:, everyday] = NEUTRAL_TRAIT
    own = plain.act(obs, mask, deterministic=True, with_probs=True).probs.astype(np.float64)
    ref = plain.act(reference, mask, deterministic=True, with_probs=True).probs.astype(np.float64)
    wrapped = PersonalityStrength(load_policy("default", seed=0), 3.0, traits="diligence,sociability")
    assert wrapped.trait_names == ("sociability", "diligence")  # the observation's order
    z = np.where(mask, np.log(np.maximum(ref, 1e-30)) + 3.0 * (np.log(np.maximum(own, 1e-30))
                                                              - np.log(np.maximum(ref, 1e-30))), -np.inf)
    valid = mask & (own > 1e-20) & (ref > 1e-20)
    assert np.abs(wrapped.guided_probs(obs, mask) - np.exp(log_softmax(z)))[valid].max() < 1e-4
    middling = obs.copy()  # NPCs whose everyday traits are the neutral ones: nothing to strengthen there
    middling[:, everyday] = NEUTRAL_TRAIT
    plain_probs = plain.act(middling, mask, deterministic=True, with_probs=True).probs
    assert np.abs(wrapped.guided_probs(middling, mask) - plain_probs).max() < 1e-5
    every_trait = PersonalityStrength(load_policy("default", seed=0), 3.0).guided_probs(middling, mask)
    assert np.abs(every_trait - plain_probs).max() > 0.05  # their bravery, aggression and empathy still count


@pytest.mark.parametrize(("value", "expected"), [
    (None, TRAIT_COLUMNS), ("all", TRAIT_COLUMNS), ("diligence, sociability", ("sociability", "diligence")),
    (["bravery"], ("bravery",)),
])
def test_trait_lists_are_read_in_the_observations_order(value, expected):
    assert check_traits(value) == expected


@pytest.mark.parametrize("value", ["", "courage", "sociability,sociability", "bravery,,empathy", 3])
def test_a_bad_trait_list_is_a_one_line_error_naming_the_field(value):
    with pytest.raises(ValueError, match=r"^--personality-traits: expected 'all' or distinct trait names among "
                                         r"bravery, aggression, empathy, sociability, diligence"):
        check_traits(value, "--personality-traits")
