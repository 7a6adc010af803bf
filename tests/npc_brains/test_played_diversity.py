"""`diversity_played`: the SND of the distribution each NPC acts from (its probabilities when it samples, its most
likely action with probability 1 when it plays greedily, as the scripted rules always do)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.metrics import system_neural_diversity
from npc_brains import load_policy
from npc_brains.baselines import RandomPolicy, ScriptedPolicy
from npc_brains.evaluate import (
    persona_probs,
    played_distribution,
    policy_slots,
    policy_tuning,
    probe_diversities,
    probe_diversity,
    random_init_policy,
)


@pytest.fixture(scope="module")
def trained():
    return load_policy("default", seed=0)


@pytest.fixture(scope="module")
def trace(trained):
    from engine.scenarios import load_scenario, run_scenario
    from worlds import load_world

    return run_scenario(trained, load_scenario("kill-parent"), load_world("village-v1"), villages=2, seed=1,
                        max_ticks=40, slots=policy_slots(trained), tuning=policy_tuning(trained), deterministic=True)


def test_the_played_distribution_is_the_probabilities_or_the_greedy_choice() -> None:
    probs = np.array([[[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]]])
    np.testing.assert_array_equal(played_distribution(probs, deterministic=False), probs)
    np.testing.assert_array_equal(played_distribution(probs, deterministic=True), [[[0, 1, 0], [1, 0, 0]]])
    # two personalities that lean the same way play alike greedily, however far apart their probabilities
    lean = np.array([[[0.9, 0.1], [0.55, 0.45]]])
    assert system_neural_diversity(lean) == pytest.approx(0.35)
    assert system_neural_diversity(played_distribution(lean, True)) == 0.0


def test_greedy_play_is_measured_on_the_actions_the_policy_takes(trained, trace) -> None:
    snd, played, n = probe_diversities(trained, trace, deterministic=True)
    assert n == len(trace.probe_obs) > 0
    assert (snd, n) == probe_diversity(trained, trace)  # the probabilities' SND is the old `diversity`
    # the actions act(deterministic=True) takes with each personality swapped in, compared pair by pair
    obs, mask, personas, cols = trace.probe_obs, trace.probe_mask, trace.personas, trace.persona_cols
    P, G = len(obs), len(personas)
    batch = np.repeat(obs[:, None, :], G, axis=1)
    batch[:, :, cols] = personas[None]
    actions = trained.act(batch.reshape(P * G, -1), np.repeat(mask[:, None, :], G, axis=1).reshape(P * G, -1),
                          deterministic=True).actions.reshape(P, G)
    gi, hi = np.triu_indices(G, 1)
    assert played == pytest.approx(float((actions[:, gi] != actions[:, hi]).mean()))
    # sampled, the NPCs act from their probabilities: the two measures are one
    assert probe_diversities(trained, trace, deterministic=False)[:2] == (snd, snd)


def test_rules_random_actions_and_untrained_populations(trained, trace) -> None:
    scripted = ScriptedPolicy(slots=policy_slots(trained))
    snd, played, _ = probe_diversities(scripted, trace, deterministic=True)
    assert played == pytest.approx(snd)  # the rules' probabilities are their one-hot choice already
    snd, played, _ = probe_diversities(RandomPolicy(seed=0), trace, deterministic=True)
    assert snd == 0.0 and played == 0.0  # every personality the same uniform choice
    population = random_init_policy(trained, seed=0, draws=3)
    snd, played, _ = probe_diversities(population, trace, deterministic=True)
    own = [probe_diversities(draw, trace, deterministic=True) for draw in population.draws]
    assert snd == pytest.approx(np.mean([o[0] for o in own])) and played == pytest.approx(np.mean([o[1] for o in own]))
    assert persona_probs(population, trace) is not None
