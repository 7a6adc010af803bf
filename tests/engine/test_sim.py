"""VillageSim basics: construction, shapes, action tables, commands, scenarios, resets, slots."""

from __future__ import annotations

import numpy as np
import pytest

from engine.constants import ACTION_NAMES, NIGHT_END, NIGHT_START, TARGETED, UNTARGETED, Action, EventType
from engine.observe import ROLE_SLICE, SELF_FEATURES, SLOT_FEATURES, TRAIT_SLICE, observation_layout
from engine.sim import VillageSim, action_tables, flat_action
from engine.vec_env import flat_action_names
from worlds import load_world


@pytest.fixture(scope="module")
def village():
    return load_world("village-v1")


def random_valid_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per NPC drawn uniformly from its mask (IDLE is always allowed)."""
    return (rng.random(mask.shape) * mask).argmax(-1)


def idle(sim: VillageSim) -> np.ndarray:
    return np.zeros((sim.B, sim.N), np.int64)


def test_shapes_and_sizes(village):
    sim = VillageSim(village, 3, seed=0)
    n, m = len(village.npcs), len(village.actors)
    assert (3, n, m, n + m) == (sim.B, sim.N, sim.M, sim.E)
    assert sim.n_actions == len(UNTARGETED) + len(TARGETED) * sim.K
    assert sim.obs.shape == (3, n, len(SELF_FEATURES) + sim.K * len(SLOT_FEATURES))
    assert sim.obs.dtype == np.float32
    assert sim.mask.shape == (3, n, sim.n_actions) and sim.mask.dtype == bool
    assert sim.observer.slot_entity.shape == (3, n, sim.K)
    assert sim.observer.global_state().shape == (3, sim.observer.state_dim)
    assert len(observation_layout(sim.K)) == sim.obs.shape[-1]
    assert len(flat_action_names(sim.K)) == sim.n_actions
    assert sim.entity_names[0] == list(village.npc_names) + list(village.actor_names)


def test_slots_are_capped_by_entity_count(village):
    sim = VillageSim(village, 1, seed=0, slots=100)
    assert sim.K == sim.E - 1


@pytest.mark.parametrize("kwargs, word", [({"scenario": "bogus"}, "scenario"), ({"slots": 0}, "slots")])
def test_bad_arguments_name_the_field(village, kwargs, word):
    with pytest.raises(ValueError, match=word):
        VillageSim(village, 1, seed=0, **kwargs)


def test_flat_action_round_trip():
    k = 3
    kinds, slots = action_tables(k)
    names = flat_action_names(k)
    for a in UNTARGETED:
        idx = flat_action(a, 0, k)
        assert kinds[idx] == a and slots[idx] == -1 and names[idx] == ACTION_NAMES[a]
    for a in TARGETED:
        for s in range(k):
            idx = flat_action(a, s, k)
            assert kinds[idx] == a and slots[idx] == s
            assert names[idx] == f"{ACTION_NAMES[a]}@slot{s}"
    assert len(set(flat_action(a, s, k) for a in TARGETED for s in range(k))) == len(TARGETED) * k


def test_observation_self_features_show_traits_and_role(village):
    sim = VillageSim(village, 1, seed=0)
    traits = np.array([n.traits.as_tuple() for n in village.npcs], np.float32)
    np.testing.assert_allclose(sim.obs[0, :, TRAIT_SLICE], traits)
    roles = sim.obs[0, :, ROLE_SLICE]
    assert (roles.sum(-1) == 1).all()
    assert (sim.obs[0, :, SELF_FEATURES.index("alive")] == 1).all()


def test_slots_never_show_self_or_duplicates(village):
    sim = VillageSim(village, 4, seed=1, scenario="random_kill")
    rng = np.random.default_rng(0)
    for _ in range(40):
        sim.step(random_valid_actions(sim.mask, rng))
        living = sim.state.alive[:, : sim.N]  # the dead observe nothing: their slots are meaningless
        slots = sim.observer.slot_entity[living]
        own = np.nonzero(living)[1][:, None]
        assert not (slots == own).any()
        ordered = np.sort(slots, -1)
        assert not (ordered[:, 1:] == ordered[:, :-1]).any()
        assert sim.state.present[np.nonzero(living)[0][:, None], slots].all()


def test_command_errors_are_clear(village):
    sim = VillageSim(village, 1, seed=0)
    with pytest.raises(ValueError, match="op"):
        sim.command(0, "player", "dance")
    with pytest.raises(ValueError, match="non-NPC actor"):
        sim.command(0, "Alda", "kill", target="Bren")
    with pytest.raises(ValueError, match="target"):
        sim.command(0, "player", "kill")


def test_wrong_action_shape_raises(village):
    sim = VillageSim(village, 2, seed=0)
    with pytest.raises(ValueError):
        sim.step(np.zeros((2, sim.N + 1), np.int64))


def test_world_scenario_kills_alda_after_tick_30(village):
    sim = VillageSim(village, 1, seed=0, scenario="world", record=True)
    alda = village.npc_index("Alda")
    for _ in range(60):
        sim.step(idle(sim))
    assert not sim.state.alive[0, alda]
    assert sim.state.alive[0, : sim.N].sum() == sim.N - 1
    assert sim.state.death_tick[0, alda] >= 30
    deaths = [e for e in sim.log.events if e.type == EventType.DEATH]
    assert [(e.actor, e.target) for e in deaths] == [(sim.entity_names[0].index("player"), alda)]


def test_scenario_none_has_no_deaths(village):
    sim = VillageSim(village, 2, seed=0, scenario="none")
    for _ in range(80):
        sim.step(idle(sim))
    assert sim.state.alive.all()


def test_random_kill_kills_the_drawn_victim_in_every_village(village):
    sim = VillageSim(village, 8, seed=3, scenario="random_kill")
    victims = sim.driver.kill_victim[:, 0].copy()
    assert ((victims >= 0) & (victims < sim.N)).all()
    died_count = np.zeros((sim.B, sim.N), np.int64)
    for _ in range(110):
        sim.step(idle(sim))
        died_count += sim.died
    dead = ~sim.state.alive[:, : sim.N]
    assert (dead.sum(1) == 1).all()
    assert dead[np.arange(sim.B), victims].all()
    assert (died_count == dead).all()  # `died` is set exactly once, on the death tick


def test_truncated_and_time_of_day(village):
    sim = VillageSim(village, 1, seed=0, max_ticks=10, scenario="none")
    for _ in range(10):
        assert not sim.truncated[0]
        tod = int(sim.time_of_day[0])
        assert bool(sim.is_night[0]) == (tod >= NIGHT_START or tod < NIGHT_END)
        sim.step(idle(sim))
    assert sim.truncated[0]
    assert int(sim.state.tick[0]) == 10


def test_reset_with_seed_reproduces_initial_observation(village):
    sim = VillageSim(village, 2, seed=5, scenario="random_kill")
    first_obs, first_state = sim.obs.copy(), sim.state.copy()
    first_plan = sim.driver.kill_tick.copy()
    rng = np.random.default_rng(0)
    for _ in range(20):
        sim.step(random_valid_actions(sim.mask, rng))
    sim.reset(seed=5)
    np.testing.assert_array_equal(sim.obs, first_obs)
    np.testing.assert_array_equal(sim.state.hunger, first_state.hunger)
    np.testing.assert_array_equal(sim.driver.kill_tick, first_plan)
    assert (sim.state.tick == 0).all()


def test_partial_reset_touches_only_chosen_villages(village):
    sim = VillageSim(village, 3, seed=2, scenario="random_kill", record=True)
    rng = np.random.default_rng(1)
    for _ in range(15):
        sim.step(random_valid_actions(sim.mask, rng))
    pos_before = sim.state.pos.copy()
    sim.reset(villages=np.array([1]))
    assert sim.state.tick.tolist() == [15, 0, 15]
    np.testing.assert_array_equal(sim.state.pos[[0, 2]], pos_before[[0, 2]])
    np.testing.assert_array_equal(sim.state.pos[1], sim.w.start_pos[1])
    assert all(e.village != 1 for e in sim.log.events)


def test_gift_command_brings_joy_and_an_event(village):
    sim = VillageSim(village, 1, seed=0, scenario="none", record=True)
    cai = village.npc_index("Cai")
    sim.command(0, "player", "gift", target="Cai")
    sim.step(idle(sim))
    assert sim.state.joy[0, cai] > 0
    assert sim.state.joy[0, np.arange(sim.N) != cai].max() == 0
    gifts = [e for e in sim.log.events if e.type == EventType.GIFT]
    assert len(gifts) == 1 and gifts[0].target == cai


def test_move_and_stop_commands_move_the_player(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    player = sim.entity_names[0].index("player")
    start = sim.state.pos[0, player].copy()
    sim.command(0, player, "move", x=5.0, y=5.0)
    sim.step(idle(sim))
    moved = sim.state.pos[0, player].copy()
    assert np.linalg.norm(moved - [5.0, 5.0]) < np.linalg.norm(start - [5.0, 5.0])
    sim.command(0, player, "stop")
    sim.step(idle(sim))
    sim.step(idle(sim))
    np.testing.assert_allclose(sim.state.pos[0, player], moved, atol=1e-5)


def test_record_false_keeps_the_log_empty(village):
    sim = VillageSim(village, 1, seed=0, scenario="world")
    for _ in range(50):
        sim.step(idle(sim))
    assert not sim.state.alive[0, village.npc_index("Alda")]
    assert sim.log.events == [] and sim.log.messages == []


def test_actions_change_behaviour(village):
    """WORK sends a free NPC to its work site, where it feeds the granary."""
    sim = VillageSim(village, 1, seed=0, scenario="none")
    work = np.full((1, sim.N), flat_action(Action.WORK, 0, sim.K))
    granary0 = float(sim.state.granary[0])
    for _ in range(30):
        sim.step(np.where(sim.mask[..., work[0, 0]], work, 0))
    assert float(sim.state.granary[0]) > granary0
    near_work = np.linalg.norm(sim.state.pos[0, : sim.N] - sim.w.work_pos[0], axis=-1) <= sim.t.reach
    assert near_work.any()


def test_the_player_can_talk_with_a_nearby_npc():
    from engine.constants import EventType
    from engine.sim import VillageSim
    from worlds import load_world

    sim = VillageSim(load_world("village-v1"), 1, seed=0, scenario="none", record=True)
    player = sim.entity_names[0].index("player")
    npc = 0
    sim.state.pos[0, player] = sim.state.pos[0, npc] + 1.0
    sim.state.social[0, npc] = 0.2
    sim.command(0, "player", "talk", target=npc)
    sim.step(np.zeros((1, sim.N), np.int64))
    talks = [e for e in sim.log.events if e.type == EventType.TALK]
    assert len(talks) == 1 and talks[0].actor == player and talks[0].target == npc
    assert sim.state.social[0, npc] > 0.2  # relief (the tick's own decay is far smaller than talk_gain)
    # too far away: nothing happens
    sim.state.pos[0, player] = sim.state.pos[0, npc] + 30.0
    sim.command(0, "player", "talk", target=npc)
    sim.step(np.zeros((1, sim.N), np.int64))
    assert len([e for e in sim.log.events if e.type == EventType.TALK]) == 1
