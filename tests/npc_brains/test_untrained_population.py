"""`random_init_policy(..., draws=K)`: K untrained networks playing as one population, NPC row i with draw i mod K."""

from __future__ import annotations

import numpy as np
import pytest

from npc_brains import load_policy
from npc_brains.evaluate import UntrainedPopulation, random_init_policy


@pytest.fixture(scope="module")
def trained():
    return load_policy("default", seed=0)


def _rows(policy, count: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(0, 1, (count, policy.obs_dim)).astype(np.float32)
    mask = rng.random((count, policy.n_actions)) < 0.6
    mask[:, 0] = True  # idle is always allowed
    return obs, mask


def test_one_draw_is_the_untrained_twin_of_before(trained) -> None:
    single = random_init_policy(trained, seed=4)
    again = random_init_policy(trained, seed=4, draws=1)
    obs, mask = _rows(trained, 16)
    a = single.act(obs, mask, deterministic=True, with_probs=True)
    b = again.act(obs, mask, deterministic=True, with_probs=True)
    assert not isinstance(again, UntrainedPopulation)
    np.testing.assert_array_equal(a.probs, b.probs)


def test_each_npc_row_acts_with_its_own_draw(trained) -> None:
    population = random_init_policy(trained, seed=4, draws=3)
    assert isinstance(population, UntrainedPopulation) and population.name == "random_init"
    assert population.obs_dim == trained.obs_dim and population.env == trained.env
    obs, mask = _rows(trained, 11)
    out = population.act(obs, mask, deterministic=True, with_probs=True, with_values=True)
    for k in range(3):
        draw = random_init_policy(trained, seed=4 + k)
        own = draw.act(obs[k::3], mask[k::3], deterministic=True, with_probs=True, with_values=True)
        np.testing.assert_array_equal(out.actions[k::3], own.actions)
        np.testing.assert_allclose(out.probs[k::3], own.probs)
        np.testing.assert_allclose(out.values[k::3], own.values)
    # the draws are different networks: the same row gets other probabilities from another draw
    other = random_init_policy(trained, seed=5).act(obs[:1], mask[:1], with_probs=True)
    assert not np.allclose(out.probs[:1], other.probs)
    assert (out.actions >= 0).all() and mask[np.arange(11), out.actions].all()


def test_fewer_rows_than_draws_and_sampled_play(trained) -> None:
    population = random_init_policy(trained, seed=0, draws=5)
    obs, mask = _rows(trained, 2)
    out = population.act(obs, mask)
    assert out.actions.shape == (2,) and mask[np.arange(2), out.actions].all()


def test_no_draws_is_refused(trained) -> None:
    with pytest.raises(ValueError, match="draws: expected an integer >= 1, got 0"):
        random_init_policy(trained, draws=0)
    with pytest.raises(ValueError, match="at least one"):
        UntrainedPopulation([])


def test_a_populations_diversity_compares_personalities_within_each_draw(trained) -> None:
    from engine.scenarios import load_scenario, run_scenario
    from npc_brains.evaluate import policy_slots, policy_tuning, probe_diversity
    from worlds import load_world

    population = random_init_policy(trained, seed=0, draws=3)
    trace = run_scenario(population, load_scenario("kill-parent"), load_world("village-v1"), villages=2, seed=1,
                         max_ticks=30, slots=policy_slots(population), tuning=policy_tuning(population))
    snd, n = probe_diversity(population, trace)
    own = [probe_diversity(draw, trace)[0] for draw in population.draws]
    assert n > 0 and snd == pytest.approx(np.mean(own))
    # rows of different draws differ by the draw: compared across draws, the untrained would look diverse
    from engine.metrics import system_neural_diversity
    from npc_brains.evaluate import persona_probs

    mixed = system_neural_diversity(persona_probs(population, trace))
    assert mixed > 2 * snd
