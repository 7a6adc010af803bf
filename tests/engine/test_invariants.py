"""Property tests: invariants that hold after every tick, whatever the (valid or invalid) actions."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.constants import EntityKind
from engine.sim import VillageSim
from engine.state import VillageState
from worlds import generate_world, load_world

VILLAGE = load_world("village-v1")
SMALL = generate_world(6, 3)


def random_valid_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (rng.random(mask.shape) * mask).argmax(-1)


def random_any_actions(sim: VillageSim, rng: np.random.Generator) -> np.ndarray:
    """Any int at all: out of range, negative, or masked out."""
    return rng.integers(-3, sim.n_actions + 3, (sim.B, sim.N))


def maybe_command(sim: VillageSim, rng: np.random.Generator) -> None:
    """Now and then the player or a raider does something, to exercise every actor path."""
    roll = rng.random()
    b = int(rng.integers(sim.B))
    names = sim.entity_names[b]
    if roll < 0.03:
        sim.command(b, "raider1", "raid")
    elif roll < 0.06:
        sim.command(b, "player", "kill", target=int(rng.integers(sim.N)))
    elif roll < 0.09:
        sim.command(b, "player", "attack", target=int(rng.integers(sim.N)))
    elif roll < 0.11:
        sim.command(b, names.index("player"), "move", x=float(rng.uniform(-5, 80)), y=float(rng.uniform(-5, 80)))
    elif roll < 0.12:
        sim.command(b, "player", "gift", target=int(rng.integers(sim.N)))


class TickChecker:
    """Checks one tick's invariants against the previous tick."""

    def __init__(self, sim: VillageSim):
        self.sim = sim
        s, n = sim.state, sim.N
        self.max_health = np.where(
            sim.w.entity_kind[None, :] == EntityKind.PLAYER,
            np.maximum(sim.w.max_health, sim.t.player_health),
            sim.w.max_health,
        )
        self.prev: VillageState = s.copy()
        self.npc_alive_before = s.alive[:, :n].copy()

    def check(self) -> None:
        sim, s, prev, n = self.sim, self.sim.state, self.prev, self.sim.N
        eps = 1e-5
        # body
        assert (s.health >= 0).all() and (s.health <= self.max_health + eps).all()
        assert not (s.alive[:, :n] & ~prev.alive[:, :n]).any(), "a dead NPC came back"
        player = sim.w.entity_kind == EntityKind.PLAYER
        assert not (s.alive[:, player] & ~prev.alive[:, player]).any(), "a dead player came back"
        assert ((s.health[:, :n] > 0) == s.alive[:, :n]).all()
        assert (s.health[:, :n] <= prev.health[:, :n] + eps).all(), "NPCs never heal"
        for need in (s.hunger, s.energy, s.social):
            assert np.isfinite(need).all() and (need >= 0).all() and (need <= 1).all()
        assert (s.granary >= 0).all() and (s.granary <= 1).all()
        npc_pos = s.pos[:, :n]
        assert (npc_pos >= -eps).all() and (npc_pos <= sim.w.size[:, None, :] + eps).all()
        assert (s.tick == prev.tick + 1).all()
        # mind: knowledge never shrinks
        assert not (prev.knows_death & ~s.knows_death).any()
        assert not (prev.knows_threat & ~s.knows_threat).any()
        known = prev.known_culprit >= 0
        assert (s.known_culprit[known] == prev.known_culprit[known]).all()
        learned = prev.learned_tick >= 0
        assert (s.learned_tick[learned] == prev.learned_tick[learned]).all()
        assert ((s.learned_tick >= 0) == s.knows_death).all()
        # only the dead are known dead
        assert not (s.knows_death & s.alive[:, None, :]).any()
        # emotions
        cap = sim.t.emotion_cap
        for emo in (s.grief, s.joy, s.anger, s.fear):
            assert np.isfinite(emo).all() and (emo >= 0).all() and (emo <= cap + eps).all()
        assert (s.affinity >= -1).all() and (s.affinity <= 1).all()
        # what the policy sees
        assert np.isfinite(sim.obs).all()
        assert np.isfinite(sim.last_reward).all()
        assert sim.mask.any(-1).all(), "every NPC must have an allowed action"
        dead = ~s.alive[:, :n]
        assert sim.mask[dead][:, 0].all() and not sim.mask[dead][:, 1:].any()
        assert (sim.obs[dead] == 0).all()
        assert (sim.last_reward[~self.npc_alive_before] == 0).all(), "the dead get no reward"
        assert (sim.mask[s.busy][:, 1:] == 0).all(), "busy NPCs may only carry on"
        assert not (s.busy & dead).any()
        assert not sim.died[~self.npc_alive_before].any()
        self.prev = s.copy()
        self.npc_alive_before = s.alive[:, :n].copy()


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    scenario=st.sampled_from(["random_kill", "world", "none"]),
    small=st.booleans(),
    ticks=st.integers(20, 90),
)
def test_tick_invariants_with_valid_actions(seed, scenario, small, ticks):
    sim = VillageSim(SMALL if small else VILLAGE, 3, seed=seed, scenario=scenario)
    rng = np.random.default_rng(seed + 1)
    checker = TickChecker(sim)
    for _ in range(ticks):
        maybe_command(sim, rng)
        sim.step(random_valid_actions(sim.mask, rng))
        checker.check()


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), ticks=st.integers(20, 90))
def test_tick_invariants_with_invalid_actions(seed, ticks):
    sim = VillageSim(VILLAGE, 3, seed=seed, scenario="random_kill")
    rng = np.random.default_rng(seed + 1)
    checker = TickChecker(sim)
    for _ in range(ticks):
        maybe_command(sim, rng)
        sim.step(random_any_actions(sim, rng))
        checker.check()


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), ticks=st.integers(10, 80))
def test_invalid_actions_are_treated_as_idle(seed, ticks):
    """A sim fed garbage ints behaves exactly like one fed the same ints with invalid ones replaced by 0."""
    raw_sim = VillageSim(VILLAGE, 2, seed=seed, scenario="random_kill")
    clean_sim = VillageSim(VILLAGE, 2, seed=seed, scenario="random_kill")
    rng = np.random.default_rng(seed + 1)
    for _ in range(ticks):
        # mix valid picks with garbage so that both kinds occur every tick
        valid_pick = random_valid_actions(raw_sim.mask, rng)
        garbage = random_any_actions(raw_sim, rng)
        raw = np.where(rng.random(valid_pick.shape) < 0.5, valid_pick, garbage)
        in_range = (raw >= 0) & (raw < raw_sim.n_actions)
        allowed = in_range & np.take_along_axis(raw_sim.mask, np.clip(raw, 0, raw_sim.n_actions - 1)[..., None],
                                                -1)[..., 0]
        raw_sim.step(raw)
        clean_sim.step(np.where(allowed, raw, 0))
    for f in fields(VillageState):
        np.testing.assert_array_equal(getattr(raw_sim.state, f.name), getattr(clean_sim.state, f.name),
                                      err_msg=f.name)
    np.testing.assert_array_equal(raw_sim.obs, clean_sim.obs)


def _bren_attacks_the_player() -> tuple[VillageSim, int, int]:
    from engine.constants import Action
    from engine.sim import flat_action

    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none")
    bren, player = VILLAGE.npc_index("Bren"), sim.entity_names[0].index("player")
    sim.state.pos[0, player] = sim.state.pos[0, bren] + (0.5, 0.0)
    sim.state.anger[0, bren, player] = 0.5  # a grievance: ATTACK needs one
    sim.obs, sim.mask = sim.observer.observe()
    slot = int(np.flatnonzero(sim.observer.slot_entity[0, bren] == player)[0])
    actions = np.zeros((1, sim.N), np.int64)
    actions[0, bren] = flat_action(Action.ATTACK, slot, sim.K)
    sim.step(actions)
    assert sim.state.health[0, player] < sim.t.player_health  # the blow landed
    return sim, bren, player


def test_an_npc_never_counts_itself_as_a_threat():
    sim, bren, _ = _bren_attacks_the_player()
    idx = np.arange(sim.N)
    assert not sim.state.knows_threat[:, idx, idx].any()
    assert (sim.state.fear[:, idx, idx] == 0).all()


def test_the_dead_feel_nothing():
    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none")
    alda, player = VILLAGE.npc_index("Alda"), sim.entity_names[0].index("player")
    sim.state.pos[0, player] = sim.state.pos[0, alda] + (1.0, 0.0)
    sim.command(0, "player", "kill", target="Alda")
    sim.step(np.zeros((1, sim.N), np.int64))
    assert not sim.state.alive[0, alda]
    assert sim.state.fear[0, alda].max() == 0 and sim.state.anger[0, alda].max() == 0
