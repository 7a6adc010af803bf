"""The training curriculum and the reward levers behind emergent fear and revenge (docs/engine.md, docs/emergence.md):
the `mixed` scenario (several killings, rampages), trait jitter, the alive bonus, charging, justice relief."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine import mind
from engine.constants import GRIEF_LEFT, Action, ActorMode, EventType, Personality, Trait, Tuning
from engine.curriculum import MAX_KILLS
from engine.sim import VillageSim, flat_action
from worlds import load_world


@pytest.fixture(scope="module")
def village():
    return load_world("village-v1")


def idle(sim: VillageSim) -> np.ndarray:
    return np.zeros((sim.B, sim.N), np.int64)


def test_mixed_schedules_one_to_three_distinct_killings(village):
    sim = VillageSim(village, 256, seed=4, scenario="mixed")
    ticks, victims = sim.driver.kill_tick, sim.driver.kill_victim
    assert ticks.shape == victims.shape == (256, MAX_KILLS)
    planned = ticks >= 0
    counts = planned.sum(1)
    assert set(np.unique(counts)) == {1, 2, 3}  # every count occurs among 256 villages
    assert (planned[:, 0]).all() and ((victims >= 0) == planned).all()
    for b in range(256):
        t = ticks[b, planned[b]]
        assert (np.diff(t) >= 6).all()  # later killings come hours apart
        v = victims[b, planned[b]]
        assert len(set(v.tolist())) == len(v)
    share, expected = (sim.driver.rampage > 0).mean(), Tuning().curriculum_rampage
    assert expected - 0.1 < share < expected + 0.1 and sim.driver.rampage.max() == 2


def test_curriculum_rampage_share_is_a_tuning_field(village):
    none = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_rampage=0.0))
    every = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_rampage=1.0))
    assert (none.driver.rampage == 0).all() and (every.driver.rampage >= 1).all()
    assert (none.driver.kill_tick == every.driver.kill_tick).all()  # the same draws, only the share differs


def test_curriculum_raid_schedules_raids_only_when_switched_on(village):
    off = VillageSim(village, 64, seed=4, scenario="mixed")
    assert (off.driver.raid_tick == -1).all()
    sim = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_raid=0.5))
    planned = sim.driver.raid_tick >= 0
    assert 0.3 < planned.mean() < 0.7
    lo, hi = sim.kill_window
    assert ((sim.driver.raid_tick[planned] >= lo) & (sim.driver.raid_tick[planned] < hi)).all()
    # the switch draws after everything else: the killings are the same as with it off
    assert (sim.driver.kill_tick == off.driver.kill_tick).all() and (sim.driver.rampage == off.driver.rampage).all()
    raiders = village.actor_names.index("raider1") + sim.N
    came = np.zeros(sim.B, bool)
    for _ in range(hi + 1):
        came |= sim.state.present[:, raiders]
        sim.step(idle(sim))
    assert (came == planned).all()  # raiders show up exactly where a raid was planned


def test_mixed_killings_happen_and_rampages_kill_more(village):
    sim = VillageSim(village, 64, seed=1, scenario="mixed")
    planned = (sim.driver.kill_tick >= 0).sum(1)
    rampage = sim.driver.rampage.copy().astype(bool)
    for _ in range(144):
        sim.step(idle(sim))
    deaths = (~sim.state.alive[:, : sim.N]).sum(1)
    calm = ~rampage
    # without a rampage, exactly the planned killings (idle villagers never fight)
    assert (deaths[calm] == planned[calm]).all()
    # a rampaging killer hunts the nearest villager in sight once or twice: at most two more deaths
    assert (deaths[rampage] >= planned[rampage]).all() and (deaths[rampage] <= planned[rampage] + 2).all()
    assert (deaths[rampage] > planned[rampage]).any()


def test_rampage_leaves_the_scene_then_hunts_the_nearest_villager_in_sight(village):
    sim = VillageSim(village, 1, seed=0, scenario="mixed")
    player = sim.player
    m = player - sim.N
    sim.driver.kill_tick[:] = -1  # no planned killing: only the rampage
    sim.driver.rampage[:] = 1
    sim.state.pos[0, 3] = sim.state.dest[0, 3] = (46.0, 46.0)  # alone in a corner
    sim.state.pos[0, player] = (45.5, 46.0)
    sim.state.actor_mode[0, m] = ActorMode.LINGER
    sim.state.actor_timer[0, m] = 1
    sim.step(idle(sim))
    assert sim.state.actor_mode[0, m] == ActorMode.STROLL  # not at the scene: it walks off first
    assert sim.driver.rampage[0] == 1
    sim.state.actor_dest[0, m] = sim.state.pos[0, player]  # ... and arrives
    sim.step(idle(sim))
    assert sim.state.actor_mode[0, m] == ActorMode.HUNT
    assert sim.state.actor_target[0, m] == 3
    assert sim.driver.rampage[0] == 0


def test_trait_noise_jitters_traits_per_episode_deterministically(village):
    a = VillageSim(village, 8, seed=3, scenario="mixed", trait_noise=0.2)
    b = VillageSim(village, 8, seed=3, scenario="mixed", trait_noise=0.2)
    plain = VillageSim(village, 8, seed=3, scenario="mixed")
    np.testing.assert_array_equal(a.w.traits, b.w.traits)
    np.testing.assert_array_equal(a.obs, b.obs)
    assert not np.allclose(a.w.traits, plain.w.traits)
    assert (a.w.traits >= 0).all() and (a.w.traits <= 1).all()
    before = a.w.traits.copy()
    a.reset(villages=np.array([2]))
    changed = np.abs(a.w.traits - before).max(axis=(1, 2)) > 0
    assert changed.tolist() == [b == 2 for b in range(8)]
    # the observation carries the new personality
    np.testing.assert_allclose(a.obs[2, :, :5], a.w.traits[2])
    with pytest.raises(ValueError, match="trait_noise"):
        VillageSim(village, 1, trait_noise=2.0)


def test_alive_bonus_makes_death_a_loss(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    sim.step(idle(sim))
    bonus = Tuning().w_alive * Tuning().reward_scale
    calm = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(w_alive=0.0))
    calm.step(idle(calm))
    np.testing.assert_allclose(sim.last_reward - calm.last_reward, bonus, atol=1e-6)
    assert sim.last_reward.mean() > 0  # a quiet morning is worth living


def test_free_time_is_worth_more_to_the_lazy(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    sim.step(idle(sim))
    busy = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(w_leisure=0.0))
    busy.step(idle(busy))
    gain = (sim.last_reward - busy.last_reward)[0]
    diligence = sim.w.traits[0, :, 4]
    expected = Tuning().w_leisure * (1 - diligence) * Tuning().reward_scale
    np.testing.assert_allclose(gain, expected, atol=1e-6)
    assert gain[np.argmin(diligence)] > gain[np.argmax(diligence)] > -1e-9


def test_grief_weight_charges_only_the_grieving_and_changes_nothing_but_the_reward(village):
    """w_grief scales grief's term of the emotion cost, (0.5 + empathy) x grief per tick, and nothing else:
    same seed and actions, the same world; only the grieving pay more."""
    plain = VillageSim(village, 2, seed=3, scenario="none")
    heavy = VillageSim(village, 2, seed=3, scenario="none", tuning=Tuning(w_grief=1.5))
    for sim in (plain, heavy):
        sim.state.grief[0, 3] = 0.8
    for _ in range(3):
        plain.step(idle(plain))
        heavy.step(idle(heavy))
        np.testing.assert_array_equal(plain.state.grief, heavy.state.grief)
        np.testing.assert_array_equal(plain.state.pos, heavy.state.pos)
        extra = plain.last_reward - heavy.last_reward
        empathy = plain.w.traits[0, 3, Trait.EMPATHY]
        t = Tuning()
        expected = 0.5 * t.w_emotion_level * (0.5 + empathy) * plain.state.grief[0, 3] * t.reward_scale
        assert extra[0, 3] == pytest.approx(expected, rel=1e-4)
        extra[0, 3] = 0.0
        np.testing.assert_allclose(extra, 0.0, atol=1e-7)  # the griefless pay nothing more


def test_relief_reward_counts_only_decreases_of_the_emotion_cost(village):
    """w_relief pays for relief (coping, justice, fading), never charges for news; w_emotion_level scales the
    level cost. Same seed and actions, so the two sims differ only in the reward."""
    plain = VillageSim(village, 16, seed=5, scenario="mixed", tuning=Tuning(w_emotion_level=0.0))
    relief = VillageSim(village, 16, seed=5, scenario="mixed", tuning=Tuning(w_emotion_level=0.0, w_relief=10.0))
    rng = np.random.default_rng(0)
    plain.state.grief[0, 3] = relief.state.grief[0, 3] = 1.0  # a grieving NPC
    paid = 0.0
    for tick in range(144):
        acts = idle(plain)
        for b, i in zip(*np.nonzero(plain.mask.any(-1)), strict=True):  # random valid actions
            acts[b, i] = rng.choice(np.flatnonzero(plain.mask[b, i]))
        acts[0, 3] = 0  # the grieving NPC idles: its grief only fades
        plain.step(acts)
        relief.step(acts)
        np.testing.assert_array_equal(plain.state.grief, relief.state.grief)
        extra = relief.last_reward - plain.last_reward
        assert (extra >= -1e-6).all()  # news of deaths and threats costs nothing here
        if tick == 0:
            assert extra[0, 3] > 0  # fading grief is relief
        paid += float(extra.sum())
    assert paid > 0


def test_attackers_charge_faster_than_walking(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    player = sim.player
    sim.state.pos[0, player] = sim.state.pos[0, 0] + np.array([6.0, 0.0], np.float32)
    sim.state.knows_threat[0, 0, player] = True  # salient (it gets a slot) and a grievance (it may be attacked)
    sim.obs, sim.mask = sim.observer.observe()
    slot = int(np.flatnonzero(sim.observer.slot_entity[0, 0] == player)[0])
    actions = idle(sim)
    actions[0, 0] = flat_action(Action.ATTACK, slot, sim.K)
    start = sim.state.pos[0, 0].copy()
    sim.step(actions)
    moved = float(np.linalg.norm(sim.state.pos[0, 0] - start))
    assert moved == pytest.approx(Tuning().charge_speed, rel=1e-4)


def test_learning_that_the_killer_died_relieves_anger(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    player = sim.player
    sim.state.anger[0, 1, player] = 1.0
    sim.state.knows_threat[0, 1, player] = True
    sim.state.health[0, player] = 0.01
    sim.state.pos[0, player] = sim.state.pos[0, 1] + np.array([0.5, 0.0], np.float32)
    sim.state.pos[0, 2] = sim.state.pos[0, player] + np.array([0.5, 0.0], np.float32)
    sim.state.knows_threat[0, 2, player] = True  # NPC 2 knows the killer too: a grievance to attack
    sim.obs, sim.mask = sim.observer.observe()
    slot = int(np.flatnonzero(sim.observer.slot_entity[0, 2] == player)[0])
    actions = idle(sim)
    actions[0, 2] = flat_action(Action.ATTACK, slot, sim.K)  # NPC 2 kills the player in front of NPC 1
    sim.step(actions)
    assert not sim.state.alive[0, player]
    assert sim.state.knows_death[0, 1, player]
    assert sim.state.anger[0, 1, player] < 1.0 - Tuning().justice_relief + 0.05


def test_the_villager_who_kills_a_known_killer_is_not_feared_under_avenger_not_feared(village):
    """avenger_not_feared: a witness who knew the player was a threat does not take the villager who kills him
    for one (justice, as for a blow on a known threat); a witness who did not know does. Off: both do."""
    for on in (False, True):
        sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(avenger_not_feared=on))
        s, player = sim.state, sim.player
        s.health[0, player] = 0.01
        s.pos[0, player] = s.pos[0, 1] + np.array([0.5, 0.0], np.float32)
        s.pos[0, 2] = s.pos[0, player] + np.array([0.5, 0.0], np.float32)
        s.pos[0, 3] = s.pos[0, 1] + np.array([0.0, 0.5], np.float32)  # NPC 3 watches too, knowing nothing
        s.knows_threat[0, 1, player] = s.knows_threat[0, 2, player] = True
        s.knows_threat[0, 3, player] = False
        sim.obs, sim.mask = sim.observer.observe()
        slot = int(np.flatnonzero(sim.observer.slot_entity[0, 2] == player)[0])
        actions = idle(sim)
        actions[0, 2] = flat_action(Action.ATTACK, slot, sim.K)  # NPC 2 kills the player before NPCs 1 and 3
        sim.step(actions)
        assert not s.alive[0, player] and s.knows_death[0, 1, player] and s.knows_death[0, 3, player]
        assert s.knows_threat[0, 1, 2] == (not on)
        assert s.knows_threat[0, 3, 2]


@pytest.mark.parametrize("kills", [True, False])
def test_a_villager_who_strikes_an_outsider_is_not_feared_under_outsider_fights_not_feared(village, kills):
    """outsider_fights_not_feared: NPC 3, who knows nothing against the player, sees NPC 2 kill him (or only
    strike him) and does not take NPC 2 for a threat; off, it does (a blow or a killing it cannot read)."""
    for on in (False, True):
        sim = VillageSim(village, 1, seed=0, scenario="none", record=True,
                         tuning=Tuning(outsider_fights_not_feared=on))
        s, player = sim.state, sim.player
        s.health[0, player] = 0.01 if kills else 1.0
        s.pos[0, player] = s.pos[0, 1] + np.array([0.5, 0.0], np.float32)
        s.pos[0, 2] = s.pos[0, player] + np.array([0.5, 0.0], np.float32)
        s.pos[0, 3] = s.pos[0, player] + np.array([0.0, 0.5], np.float32)
        s.knows_threat[0, 2, player] = True  # NPC 2's grievance; NPC 3 knows nothing of it
        s.knows_threat[0, 3, player] = False
        sim.obs, sim.mask = sim.observer.observe()
        slot = int(np.flatnonzero(sim.observer.slot_entity[0, 2] == player)[0])
        actions = idle(sim)
        actions[0, 2] = flat_action(Action.ATTACK, slot, sim.K)
        for _ in range(3):
            sim.step(actions if sim.state.alive[0, player] else idle(sim))
            if any(e.type == EventType.ATTACK and e.actor == 2 for e in sim.log.events):
                break
        assert any(e.type == EventType.ATTACK and e.actor == 2 for e in sim.log.events)
        assert s.alive[0, player] != kills
        assert s.knows_threat[0, 3, 2] == (not on)
    assert Tuning().outsider_fights_not_feared is False


def test_attack_needs_a_grievance(village):
    sim = VillageSim(village, 1, seed=0, scenario="none")
    player = sim.player
    sim.state.pos[0, player] = sim.state.pos[0, 0] + np.array([1.0, 0.0], np.float32)

    def may_attack() -> bool:
        sim.obs, sim.mask = sim.observer.observe()
        k = int(np.flatnonzero(sim.observer.slot_entity[0, 0] == player)[0])
        return bool(sim.mask[0, 0, flat_action(Action.ATTACK, k, sim.K)])

    assert not may_attack()  # an unknown, harmless stranger
    sim.state.anger[0, 0, player] = 0.3
    assert may_attack()
    sim.state.anger[0, 0, player] = 0.0
    sim.state.knows_threat[0, 0, player] = True
    assert may_attack()


def test_the_grievance_rule_can_be_switched_off_for_ablations(village):
    sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(attack_needs_grievance=False))
    player = sim.player
    sim.state.pos[0, player] = sim.state.pos[0, 0] + np.array([1.0, 0.0], np.float32)
    sim.obs, sim.mask = sim.observer.observe()
    k = int(np.flatnonzero(sim.observer.slot_entity[0, 0] == player)[0])
    assert sim.mask[0, 0, flat_action(Action.ATTACK, k, sim.K)]  # the harmless stranger may now be attacked


def test_the_training_config_knows_every_engine_scenario():
    from engine.sim import SCENARIOS
    from npc_brains.config import SCENARIOS as CONFIG_SCENARIOS

    assert set(CONFIG_SCENARIOS) == set(SCENARIOS)


def test_dread_costs_while_a_known_murder_has_an_unknown_living_culprit(village):
    """w_dread: knowing of a murder without knowing who did it costs (1.5 - bravery) x w_dread per tick; learning
    the culprit, or the culprit's death, ends it. Off (0) by default, where the reward does not change."""
    sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(w_dread=1.0))
    off = VillageSim(village, 1, seed=0, scenario="none")
    player = sim.player
    for s in (sim, off):
        s.state.alive[0, 0] = False
        s.state.killer[0, 0] = player
        s.state.knows_death[0, 1, 0] = True  # NPC 1 knows NPC 0 was killed, not by whom
    dread = mind.dread(sim)
    assert dread[0, 1] and dread.sum() == 1
    bravery = sim.w.traits[0, 1, 0]
    gap = mind.emotion_cost(off) - mind.emotion_cost(sim)
    assert gap[0, 1] == pytest.approx(-(1.5 - bravery))
    assert np.count_nonzero(gap) == 1
    sim.state.known_culprit[0, 1, 0] = player  # now it knows
    assert not mind.dread(sim).any()
    sim.state.known_culprit[0, 1, 0] = -1
    sim.state.alive[0, player] = False  # the killer is dead: nothing loose
    assert not mind.dread(sim).any()
    assert Tuning().w_dread == 0.0


def test_workplaces_can_close_at_night(village):
    """work_at_night=False masks WORK from 22:00 to 06:00 and nowhere else; the default leaves it open."""
    from engine.constants import NIGHT_END, NIGHT_START, START_TICK_OF_DAY, TICKS_PER_DAY

    closed = VillageSim(village, 2, seed=0, scenario="none", tuning=Tuning(work_at_night=False))
    open_ = VillageSim(village, 2, seed=0, scenario="none")
    seen_night = seen_day = False
    for _ in range(TICKS_PER_DAY):
        tod = (int(closed.state.tick[0]) + START_TICK_OF_DAY) % TICKS_PER_DAY
        night = tod >= NIGHT_START or tod < NIGHT_END
        free = ~closed.state.busy & closed.state.alive[:, : closed.N]
        if free.any():
            can_work = closed.mask[..., Action.WORK][free]
            if night:
                assert not can_work.any()
                seen_night = True
            else:
                assert can_work.all()
                seen_day = True
            assert open_.mask[..., Action.WORK][~open_.state.busy & open_.state.alive[:, : open_.N]].all()
        closed.step(idle(closed))
        open_.step(idle(open_))
    assert seen_night and seen_day


def test_informing_rewards_the_teller_per_villager_told_of_a_death(village):
    """w_inform: a teller earns w_inform (x reward_scale) for each villager it tells of a death that one did not
    know, by talk or gossip; the same run without it differs only in that reward (no random draw is added)."""
    tuning = Tuning(w_inform=2.0)
    runs = [VillageSim(village, 1, seed=3, scenario="none", tuning=tuning), VillageSim(village, 1, seed=3,
                                                                                          scenario="none")]
    for s in runs:
        s.state.alive[0, 0] = False
        s.state.death_tick[0, 0] = 0
        s.state.pos[0, 0] = s.state.death_pos[0, 0] = 0.0  # the body lies far off, where nobody finds it
        s.state.knows_death[0, 1, 0] = True
        s.state.learned_tick[0, 1, 0] = 0
        s.state.learned_from[0, 1, 0] = -1
        s.obs, s.mask = s.observer.observe()
    slot = int(np.flatnonzero(runs[0].observer.slot_entity[0, 1] == 2)[0])
    gap = 0.0
    for tick in range(20):
        act = idle(runs[0])
        if tick == 0:
            act[0, 1] = flat_action(Action.TALK, slot, runs[0].K)
        for s in runs:
            s.step(act)
        gap += float(runs[0].last_reward[0, 1] - runs[1].last_reward[0, 1])
    for a, b in zip(vars(runs[0].state).values(), vars(runs[1].state).values(), strict=True):
        assert np.array_equal(a, b)  # the reward is the only difference
    told = int((runs[0].state.learned_from[0, :, 0] == 1).sum())
    assert told >= 1  # NPC 2 at least, by the talk
    assert gap == pytest.approx(told * 2.0 * tuning.reward_scale, rel=1e-4)
    assert Tuning().w_inform == 0.0


def _npc1_saw_npc0_die(village, tuning: Tuning, grief: float, body_at: float | None) -> VillageSim:
    """A sim in which NPC 0 died at tick 0, its body at `body_at`, and NPC 1 saw it and feels `grief`."""
    s = VillageSim(village, 1, seed=3, scenario="none", tuning=tuning)
    s.state.alive[0, 0] = False
    s.state.death_tick[0, 0] = 0
    # None: the body lies where NPC 1 stands
    s.state.pos[0, 0] = s.state.death_pos[0, 0] = s.state.pos[0, 1] if body_at is None else body_at
    s.state.knows_death[0, 1, 0] = True
    s.state.learned_tick[0, 1, 0] = 0
    s.state.learned_from[0, 1, 0] = -1
    s.state.grief[0, 1] = grief
    return s


def _telling_gain(village, tuning: Tuning, *, grief: float = 0.0, anger: float = 0.0,
                  fear: float = 0.0, player_near: bool | None = None) -> tuple[float, int]:
    """NPC 1, who saw NPC 0 die, tells NPC 2 (one TALK, then idling): its summed reward over 20 ticks and how
    many it told. `grief` is its grief; `anger` and `fear` its anger and fear at the player, whom it then knows
    as a threat. `player_near`: the player, known as a threat, is kept one unit from NPC 1 (True) or at the
    corner of the map farthest from it (False) on every tick; None leaves it be."""
    s = _npc1_saw_npc0_die(village, tuning, grief, 0.0)
    if anger > 0 or fear > 0 or player_near is not None:
        s.state.knows_threat[0, 1, s.player] = True
        s.state.anger[0, 1, s.player] = anger
        s.state.fear[0, 1, s.player] = fear
    s.obs, s.mask = s.observer.observe()
    slot = int(np.flatnonzero(s.observer.slot_entity[0, 1] == 2)[0])
    total = 0.0
    for tick in range(20):
        if player_near is not None:
            teller = s.state.pos[0, 1]
            corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]]) * s.w.size[0]
            far = corners[np.argmax(np.linalg.norm(corners - teller, axis=1))]
            s.state.pos[0, s.player] = teller + np.array([1.0, 0.0]) if player_near else far
        act = idle(s)
        if tick == 0:
            act[0, 1] = flat_action(Action.TALK, slot, s.K)
        s.step(act)
        total += float(s.last_reward[0, 1])
    return total, int((s.state.learned_from[0, :, 0] == 1).sum())


def test_a_bereaved_teller_earns_no_telling_reward_under_grief_damping(village):
    """inform_grief_damping: the telling reward is scaled by (1 - grief), floored at 0, so a teller whose grief
    is at least 1 earns nothing for the news it spreads, and one without grief earns it in full."""
    def gain(grief: float, damping: bool) -> tuple[float, int]:
        return _telling_gain(village, Tuning(w_inform=2.0, inform_grief_damping=damping), grief=grief)

    grieving, told = gain(2.0, True)
    assert told >= 1
    assert grieving == pytest.approx(gain(2.0, False)[0] - told * 2.0 * Tuning().reward_scale, rel=1e-4)
    assert gain(0.0, True)[0] == pytest.approx(gain(0.0, False)[0], rel=1e-6)
    assert Tuning().inform_grief_damping is False


def test_grief_scale_sets_how_much_grief_silences_a_teller(village):
    """inform_grief_scale: with grief damping the telling reward is w_inform x max(0, 1 - scale x grief), so at
    scale 3 a teller with grief 0.5 earns nothing for its news, and at the default 1 it earns about half of it."""
    def gain(scale: float, damping: bool = True) -> tuple[float, int]:
        tuning = Tuning(w_inform=2.0, inform_grief_damping=damping, inform_grief_scale=scale)
        return _telling_gain(village, tuning, grief=0.5)

    undamped, told = gain(1.0, damping=False)
    assert told >= 1
    full = told * 2.0 * Tuning().reward_scale
    assert gain(3.0)[0] == pytest.approx(undamped - full, rel=1e-4)
    # grief fades a little before the telling tick, so about half (not exactly) is withheld at scale 1
    assert gain(1.0)[0] == pytest.approx(undamped - full / 2, abs=0.05 * full)
    assert Tuning().inform_grief_scale == 1.0


def test_an_angry_teller_earns_no_telling_reward_under_emotion_damping(village):
    """inform_emotion_damping: the telling reward is scaled by (1 - anger - fear at known threats), floored at
    0, so a teller still angry at a loose killer earns nothing for the news it spreads; the world is unchanged."""
    def gain(anger: float, damping: bool) -> tuple[float, int]:
        return _telling_gain(village, Tuning(w_inform=2.0, inform_emotion_damping=damping), anger=anger)

    angry, told = gain(2.0, True)
    assert told >= 1
    assert angry == pytest.approx(gain(2.0, False)[0] - told * 2.0 * Tuning().reward_scale, rel=1e-4)
    assert Tuning().inform_emotion_damping is False


def test_fear_scale_sets_how_much_fear_silences_a_teller(village):
    """inform_fear_scale: with emotion damping the telling reward is w_inform x max(0, 1 - anger - scale x fear),
    so at scale 3 a teller afraid at 0.48 earns nothing for its news, and at the default 1 about half of it."""
    def gain(scale: float, damping: bool = True) -> tuple[float, int]:
        tuning = Tuning(w_inform=2.0, inform_emotion_damping=damping, inform_fear_scale=scale)
        return _telling_gain(village, tuning, fear=0.6)

    undamped, told = gain(1.0, damping=False)
    assert told >= 1
    one_telling = 2.0 * Tuning().reward_scale
    # the TALK on the first tick, at fear ~0.48, pays nothing at scale 3 and about half at scale 1 (later
    # gossip, once fear has faded, pays nearly in full either way)
    assert undamped - gain(3.0)[0] >= one_telling - 1e-5
    assert 0.3 * one_telling < undamped - gain(1.0)[0] < 0.7 * one_telling
    assert Tuning().inform_fear_scale == 1.0


def test_no_telling_pay_within_reach_of_a_loose_threat_under_inform_out_of_reach(village):
    """inform_out_of_reach: a teller within the safe distance of a living threat it knows of earns nothing for its
    news; one out of his reach earns it in full; off by default."""
    def gain(near: bool, lever: bool) -> tuple[float, int]:
        return _telling_gain(village, Tuning(w_inform=2.0, inform_out_of_reach=lever), player_near=near)

    near, told = gain(True, True)
    assert told >= 1
    assert near == pytest.approx(gain(True, False)[0] - told * 2.0 * Tuning().reward_scale, rel=1e-4)
    far, told_far = gain(False, True)
    assert told_far >= 1
    assert far == pytest.approx(gain(False, False)[0], rel=1e-6)
    assert Tuning().inform_out_of_reach is False


def test_a_player_who_fights_back_turns_on_the_villager_who_struck_it(village):
    """fights_back: a villager's blow on the player makes the player go for that villager and land blows of that
    damage; off (0) by default, where the player takes the blow and strolls on."""
    from engine import body
    from engine.tick import TickContext

    for damage in (0.0, 0.6):
        sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(fights_back=damage))
        s, player, m = sim.state, sim.player, sim.player - sim.N
        s.pos[0, player] = s.pos[0, 2] + 0.5  # the player stands by NPC 2
        ctx = TickContext.begin(idle(sim), s.alive, sim.B, sim.N, sim.E)
        ctx.hits.add(np.array([0]), np.array([2]), np.array([player]), np.array([-1]))  # NPC 2 struck it
        body.move_actors(sim, ctx)
        if damage == 0:
            assert s.actor_mode[0, m] != ActorMode.DEFEND and len(ctx.hits.parts) == 1
            continue
        assert s.actor_mode[0, m] == ActorMode.IDLE  # it turned, struck at once (in reach) and stands
        bb, aa, tt, _ = ctx.hits.columns()
        assert (aa[-1], tt[-1]) == (player, 2)
        assert ctx.damage[0, 2] == pytest.approx(damage)


def test_a_rampage_can_start_at_the_scene(village):
    """rampage_at_scene: a rampaging killer who has lingered hunts the nearest villager in sight from the body;
    by default it strolls off to a public place first."""
    from engine import body
    from engine.tick import TickContext

    for at_scene in (False, True):
        sim = VillageSim(village, 1, seed=1, scenario="mixed",
                         tuning=Tuning(curriculum_rampage=1.0, rampage_at_scene=at_scene))
        s, player, m = sim.state, sim.player, sim.player - sim.N
        sim.driver.rampage[:] = 1
        s.actor_mode[0, m], s.actor_timer[0, m] = ActorMode.LINGER, 1  # its last tick at the scene
        s.pos[0, player] = s.pos[0, 3] + 1.0  # NPC 3 stands by, in sight
        ctx = TickContext.begin(idle(sim), s.alive, sim.B, sim.N, sim.E)
        body.move_actors(sim, ctx, sim.driver)
        if at_scene:
            assert s.actor_mode[0, m] == ActorMode.HUNT and sim.driver.rampage[0] == 0
            assert np.linalg.norm(s.pos[0, s.actor_target[0, m]] - s.pos[0, player]) <= sim.w.sight_radius[0]
        else:
            assert s.actor_mode[0, m] == ActorMode.STROLL and sim.driver.rampage[0] == 1


def test_a_loose_killer_can_take_the_nearest_villager_next(village):
    """hunt_nearest: a later planned killing goes to the villager nearest the killer when one is in his sight
    (else to the planned victim); the first killing, and every killing by default, keep the planned victim."""
    for on in (False, True):
        sim = VillageSim(village, 1, seed=2, scenario="mixed", tuning=Tuning(hunt_nearest=on))
        s, player, m, d = sim.state, sim.player, sim.player - sim.N, sim.driver
        d.kill_tick[0] = [s.tick[0], s.tick[0] + 1, -1]
        planned_first, planned_later = 5, 7
        d.kill_victim[0] = [planned_first, planned_later, -1]
        s.pos[0, 2] = s.pos[0, :sim.N].max(0) + 3 * sim.w.sight_radius[0]  # NPC 2 walked off alone
        s.pos[0, player] = s.pos[0, 2] + 0.5  # and the killer stands right by it
        sim.commands.clear()
        d.before_tick(sim)
        assert [c.target for c in sim.commands] == [planned_first]  # the first killing: as planned
        sim.commands.clear()
        s.actor_mode[0, m] = ActorMode.IDLE
        s.tick[0] += 1
        d.before_tick(sim)
        assert [c.target for c in sim.commands] == [2 if on else planned_later]
        sim.commands.clear()
        d.kill_tick[0, 1] = s.tick[0]
        s.pos[0, player] = s.pos[0, 2] + 2 * sim.w.sight_radius[0]  # nobody in sight
        d.before_tick(sim)
        assert [c.target for c in sim.commands] == [planned_later]


def test_with_a_wake_the_body_is_carried_home_and_mourners_go_there(village):
    """wake_at_home: the body lies where it fell until that many ticks after the death, then at the victim's
    home (where MOURN leads); off, it stays where it fell."""
    for wake in (0, 3):
        sim = VillageSim(village, 1, seed=3, scenario="none", tuning=Tuning(wake_at_home=wake))
        s, N, victim = sim.state, sim.N, 4
        home = sim.w.home_pos[0, victim].copy()
        s.pos[0, victim] = home + np.array([5.0, 5.0], np.float32)  # away from home
        fell = s.pos[0, victim].copy()
        sim.command(0, "player", "kill", victim)
        for _ in range(40):
            sim.step(idle(sim))
            if not s.alive[0, victim]:
                break
        assert not s.alive[0, victim]
        died = int(s.death_tick[0, victim])
        assert np.allclose(s.death_pos[0, victim], s.pos[0, victim])
        while s.tick[0] - died < 6:
            sim.step(idle(sim))
        where = home if wake else s.death_pos[0, victim]
        assert np.allclose(s.pos[0, victim], where) and np.allclose(s.death_pos[0, victim], where)
        assert wake or np.allclose(where, fell)
        s.knows_death[0, :N, victim] = s.alive[0, :N]  # everyone hears
        sim.step(idle(sim))
        shows = sim.observer.slot_entity[0] == victim
        mourner = int(np.flatnonzero(shows.any(1) & s.alive[0, :N] & ~s.busy[0])[0])  # a free villager who sees it
        slot = int(np.flatnonzero(shows[mourner])[0])
        acts = idle(sim)
        acts[0, mourner] = flat_action(Action.MOURN, slot, sim.K)
        sim.step(acts)
        assert s.activity[0, mourner] == Action.MOURN and np.allclose(s.dest[0, mourner], where)


def _killer_beside_two(village, tuning: Tuning) -> VillageSim:
    """A sim whose loose killer stands apart with NPC 2 nearest him and NPC 3 a little farther, nobody afraid yet,
    and his next killing due now (its planned victim NPC 7)."""
    sim = VillageSim(village, 1, seed=2, scenario="mixed", tuning=tuning)
    s, player, d, N = sim.state, sim.player, sim.driver, sim.N
    far = s.pos[0, :N].max(0) + 3 * sim.w.sight_radius[0]  # away from everyone else
    s.pos[0, 2], s.pos[0, 3] = far, far + np.array([0.0, 1.0])
    s.pos[0, player] = far + np.array([0.0, -0.5])
    s.fear[0, :, player] = 0.0
    d.kill_tick[0] = [-1, s.tick[0], -1]
    d.kill_victim[0] = [-1, 7, -1]
    s.actor_mode[0, player - N] = ActorMode.IDLE
    return sim


def _next_prey(sim: VillageSim) -> list[int]:
    sim.commands.clear()
    sim.driver.before_tick(sim)
    return [c.target for c in sim.commands]


def test_a_loose_killer_can_go_for_those_who_fear_him(village):
    """hunt_afraid: the next prey is the nearest villager in the killer's sight whose fear of him reaches the
    threshold (a farther one who fears him beats a nearer one who does not); with nobody afraid in sight, the
    nearest; off, the nearest whatever the fear."""
    for threshold in (0.0, 0.3):
        sim = _killer_beside_two(village, Tuning(hunt_nearest=True, hunt_afraid=threshold))
        s, player = sim.state, sim.player
        s.fear[0, 3, player] = 0.5  # only NPC 3 fears him
        assert _next_prey(sim) == [3 if threshold else 2]
        s.fear[0, 3, player] = 0.1  # below the threshold: nobody in sight is afraid enough, so the nearest
        assert _next_prey(sim) == [2]


def test_a_killer_can_spare_those_who_charge_him(village):
    """hunt_spares_chargers: an afraid villager charging the killer (ATTACK on him) is not counted as afraid when he
    picks his prey, so he takes a farther one who cowers; off, the nearest afraid one, charging or not."""
    for spare in (False, True):
        sim = _killer_beside_two(village, Tuning(hunt_nearest=True, hunt_afraid=0.3, hunt_spares_chargers=spare))
        s, player = sim.state, sim.player
        s.fear[0, [2, 3], player] = 0.5  # both fear him
        s.activity[0, 2], s.target[0, 2] = Action.ATTACK, player  # NPC 2 charges him
        assert _next_prey(sim) == [3 if spare else 2]
        s.target[0, 2] = 5  # an attack on someone else is no charge at him: NPC 2 is the nearest afraid again
        assert _next_prey(sim) == [2]
    assert Tuning().hunt_spares_chargers is False


def test_a_rampaging_killer_can_hunt_again_from_the_scene_at_once(village):
    """rampage_linger=0: the tick after his killing, a rampaging killer orders the next one, on the villager in
    his sight who fears him (hunt_afraid); off (-1) he lingers over the body and gives no order."""
    for linger in (-1, 0):
        sim = VillageSim(village, 1, seed=2, scenario="mixed",
                         tuning=Tuning(rampage_linger=linger, hunt_afraid=0.3, curriculum_rampage=1.0))
        s, player, m, d = sim.state, sim.player, sim.player - sim.N, sim.driver
        d.kill_tick[0] = -1
        d.rampage[0] = 1
        s.actor_mode[0, m], s.actor_timer[0, m] = ActorMode.LINGER, sim.t.linger_ticks - 1  # he killed last tick
        s.pos[0, 5] = s.pos[0, player] + np.array([1.0, 0.0], np.float32)
        s.fear[0, :, player] = 0.0
        s.fear[0, 5, player] = 1.0
        sim.commands.clear()
        d.before_tick(sim)
        if linger < 0:
            assert not sim.commands and d.rampage[0] == 1
        else:
            assert [(c.op, c.target) for c in sim.commands] == [("kill", 5)] and d.rampage[0] == 0


def test_a_late_curriculum_moves_that_share_of_first_killings_to_the_evening(village):
    """curriculum_late: that share of `mixed` villages have their first killing from 16:00 to midnight instead of
    in the kill window; later killings still follow it hours apart; off, no draw is made."""
    from engine.curriculum import LATE_KILL_WINDOW

    off = VillageSim(village, 256, seed=4, scenario="mixed")
    same = VillageSim(village, 256, seed=4, scenario="mixed", tuning=Tuning(curriculum_late=0.0))
    assert (same.driver.kill_tick == off.driver.kill_tick).all()  # off: the same draws as before the lever
    lo, hi = off.kill_window
    assert ((off.driver.kill_tick[:, 0] >= lo) & (off.driver.kill_tick[:, 0] < hi)).all()
    sim = VillageSim(village, 256, seed=4, scenario="mixed", tuning=Tuning(curriculum_late=0.5))
    first = sim.driver.kill_tick[:, 0]
    late = first >= hi
    assert 80 < late.sum() < 176  # about half of 256
    assert ((first[late] >= LATE_KILL_WINDOW[0]) & (first[late] < LATE_KILL_WINDOW[1])).all()
    assert ((first[~late] >= lo) & (first[~late] < hi)).all()
    ticks = sim.driver.kill_tick
    later = ticks[:, 1:] >= 0
    assert (np.diff(ticks, axis=1)[later] >= 6).all()
    every = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_late=1.0))
    assert (every.driver.kill_tick[:, 0] >= LATE_KILL_WINDOW[0]).all()


def test_an_armoured_killer_takes_blows_that_do_no_harm_and_rampages(village):
    """curriculum_armoured: that share of `mixed` villages get a killer whom villagers' blows cannot harm (the
    blow still lands and eases anger) and who rampages; off, nobody is armoured and no draw is made."""
    off = VillageSim(village, 64, seed=4, scenario="mixed")
    assert not off.armoured.any()
    same = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_armoured=0.0))
    assert (same.driver.kill_tick == off.driver.kill_tick).all()  # off: the same draws as before the lever
    sim = VillageSim(village, 64, seed=4, scenario="mixed", tuning=Tuning(curriculum_armoured=0.5))
    player = sim.player
    armoured = sim.armoured[:, player]
    assert 10 < armoured.sum() < 54 and not sim.armoured[:, :player].any()
    assert (sim.driver.rampage[armoured] >= 1).all()
    b = int(np.flatnonzero(armoured)[0])
    s = sim.state
    s.pos[b, player] = s.pos[b, 2] + np.array([0.5, 0.0], np.float32)
    s.knows_threat[b, 2, player] = True
    s.anger[b, 2, player] = 1.0
    sim.obs, sim.mask = sim.observer.observe()
    slot = int(np.flatnonzero(sim.observer.slot_entity[b, 2] == player)[0])
    actions = np.zeros((sim.B, sim.N), np.int64)
    actions[b, 2] = flat_action(Action.ATTACK, slot, sim.K)
    health = s.health[b, player]
    sim.step(actions)
    assert s.health[b, player] == health and s.alive[b, player]
    assert s.anger[b, 2, player] < 0.6  # the blow landed: anger halved


def test_news_of_a_dead_killer_is_news_to_those_who_feared_him_under_inform_threat_deaths(village, monkeypatch):
    """inform_threat_deaths: telling a villager that the player, whom the teller knew as a killer, is dead earns
    the telling reward, and the hearer's slot shows news for its face; off, neither (the death is an actor's)."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    for on in (False, True):
        s = VillageSim(village, 1, seed=3, scenario="none",
                       tuning=Tuning(w_inform=2.0, inform_threat_deaths=on))
        player = s.player
        s.state.alive[0, player] = False
        s.state.death_tick[0, player] = 0
        s.state.pos[0, player] = s.state.death_pos[0, player] = 0.0  # out of everyone's sight
        s.state.knows_death[0, 1, player] = True  # NPC 1 saw him die
        s.state.learned_tick[0, 1, player] = 0
        s.state.learned_from[0, 1, player] = -1
        s.state.knows_threat[0, 1, player] = True  # NPC 1 knew him as a killer
        s.obs, s.mask = s.observer.observe()
        slot = int(np.flatnonzero(s.observer.slot_entity[0, 1] == 2)[0])
        news_col = len(SELF_FEATURES) + slot * len(SLOT_FEATURES) + SLOT_FEATURES.index("news_for_them")
        assert s.obs[0, 1, news_col] == (1.0 if on else 0.0)
        informed = []
        real = mind.count_informed
        def counting(v, ctx, *args, real=real, informed=informed):
            before = 0.0 if ctx.informed is None else float(ctx.informed[0, 1])
            real(v, ctx, *args)
            informed.append(float(ctx.informed[0, 1]) - before)

        monkeypatch.setattr(mind, "count_informed", counting)
        act = idle(s)
        act[0, 1] = flat_action(Action.TALK, slot, s.K)
        for tick in range(6):
            s.step(act if tick == 0 else idle(s))
        assert s.state.knows_death[0, 2, player] and s.state.learned_from[0, 2, player] == 1  # told either way
        told = int((s.state.learned_from[0, :, player] == 1).sum())  # NPC 2 by the talk, others by gossip
        assert told >= 1 and sum(informed) == (told if on else 0)  # credited only when on
        monkeypatch.undo()
    assert Tuning().inform_threat_deaths is False


def test_grief_dulls_the_pay_of_free_time_and_spares_the_untroubled(village):
    """grief_dulls_pay: the idle pay (w_leisure x (1 - diligence)) is scaled by max(0, 1 - d x grief); an NPC
    without grief is paid as before, and a grief of 1 / d or more takes the whole of it. Same seed and actions, so
    the two sims differ only in the reward."""
    d = 2.0
    runs = [VillageSim(village, 1, seed=0, scenario="none"),
            VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(grief_dulls_pay=d))]
    for s in runs:
        s.state.grief[0, 1] = 0.25  # half the pay
        s.state.grief[0, 2] = 0.8  # all of it
    for s in runs:
        s.step(idle(s))
    np.testing.assert_array_equal(runs[0].state.grief, runs[1].state.grief)
    lost = (runs[0].last_reward - runs[1].last_reward)[0]
    t = Tuning()
    pay = t.w_leisure * (1 - Personality.of(runs[0].w.traits).diligence[0]) * t.reward_scale  # every NPC idles
    grief_then = np.zeros(runs[0].N)
    grief_then[1], grief_then[2] = 0.25, 0.8
    expected = pay * np.minimum(1.0, d * grief_then)
    # grief fades a little within the tick; the reward reads it after the mind phase
    np.testing.assert_allclose(lost, pay * np.minimum(1.0, d * runs[1].state.grief[0]), atol=1e-6)
    np.testing.assert_allclose(lost, expected, atol=2e-3)
    assert lost[0] == 0 and lost[2] > lost[1] > 0


def test_a_blow_eases_fear_by_the_strikers_bravery_under_blow_relief_bravery(village):
    """blow_relief_bravery: a landed blow on a known threat eases the striker's fear of it by blow_fear_relief x
    bravery, so the timid stay afraid of the one they hit; off, by blow_fear_relief whatever the bravery. Same
    seed and actions, so the two sims differ only in the lever; anger relief is the same either way."""
    t = Tuning()
    runs = []
    for on in (False, True):
        sim = VillageSim(village, 1, seed=2, scenario="none", tuning=Tuning(blow_relief_bravery=on))
        s, player = sim.state, sim.player
        s.pos[0, player] = s.pos[0, 2] + np.array([0.5, 0.0], np.float32)
        s.knows_threat[0, 2, player] = True
        traits = Personality.of(sim.w.traits)
        traits.bravery[0, 2], traits.aggression[0, 2] = 0.2, 1.0  # timid, and angry enough to damp the fear floor
        s.anger[0, 2, player] = t.emotion_cap
        s.fear[0, 2, player] = 1.0
        sim.obs, sim.mask = sim.observer.observe()
        slot = int(np.flatnonzero(sim.observer.slot_entity[0, 2] == player)[0])
        actions = idle(sim)
        actions[0, 2] = flat_action(Action.ATTACK, slot, sim.K)
        sim.step(actions)
        runs.append(sim)
    off, on = (r.state for r in runs)
    player = runs[0].player
    assert off.anger[0, 2, player] == on.anger[0, 2, player] < 0.6 * t.emotion_cap  # the blow landed in both
    # the same decay follows the blow in both, and the damped floor stays below both fears, so the ratio of the
    # fears is the ratio of the reliefs: the timid striker keeps more of its fear
    ratio = (1 - t.blow_fear_relief * 0.2) / (1 - t.blow_fear_relief)
    np.testing.assert_allclose(on.fear[0, 2, player] / off.fear[0, 2, player], ratio, rtol=1e-4)
    assert Tuning().blow_relief_bravery is False


def test_a_flight_backed_against_the_edge_runs_along_it_under_flee_along_walls(village):
    """flee_along_walls: a villager at the village's edge with the threat coming straight from inside runs along
    the edge and gains distance; off, it heads for the edge point it stands on and the threat closes in. In open
    ground the flight is straight away either way."""
    gaps, moved = {}, {}
    for on in (False, True):
        sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(flee_along_walls=on))
        s, player = sim.state, sim.player
        size = sim.w.size[0]
        s.pos[0, 2] = np.array([size[0] / 2, 0.0], np.float32)  # on the bottom edge
        s.pos[0, player] = np.array([size[0] / 2, 3.0], np.float32)  # straight above it, inside
        s.pos[0, 3] = np.array([size[0] / 2, size[1] / 2], np.float32)  # in the open
        s.pos[0, player + 1:] = s.pos[0, player]
        for i in (2, 3):
            s.knows_threat[0, i, player] = True
        sim.obs, sim.mask = sim.observer.observe()
        actions = idle(sim)
        for i in (2, 3):
            slot = int(np.flatnonzero(sim.observer.slot_entity[0, i] == player)[0])
            actions[0, i] = flat_action(Action.FLEE, slot, sim.K)
        start = s.pos[0, 3].copy()
        sim.step(actions)
        gaps[on] = float(np.linalg.norm(s.pos[0, 2] - s.pos[0, player]))
        moved[on] = s.pos[0, 3] - start
    assert gaps[False] <= 3.0 + 1e-4 < gaps[True]  # off: pinned; on: it ran along the edge, away from him
    np.testing.assert_allclose(moved[True], moved[False], atol=1e-5)  # in the open, the same straight flight
    assert moved[True][1] > 0 and abs(moved[True][0]) < 1e-4  # straight away from the threat below it
    assert Tuning().flee_along_walls is False


def test_a_prey_that_flees_out_of_the_killers_sight_escapes_under_flight_escapes_hunt(village):
    """flight_escapes_hunt: a hunting killer loses a villager who flees from him once she is out of his sight (he
    strolls to a public place); off, he chases her on. A prey out of sight that does not flee is hunted on either
    way: the lever rewards a flight, not distance."""
    for on in (False, True):
        for flees in (False, True):
            sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(flight_escapes_hunt=on))
            s, player = sim.state, sim.player
            m = player - sim.N
            sight = float(sim.w.sight_radius[0])
            s.pos[0, player] = np.array([5.0, 5.0], np.float32)
            s.pos[0, 2] = np.array([5.0, 5.0 + sight + 2.0], np.float32)  # out of his sight, straight above him
            s.knows_threat[0, 2, player] = True
            s.actor_mode[0, m] = ActorMode.HUNT
            s.actor_target[0, m] = 2
            sim.obs, sim.mask = sim.observer.observe()
            actions = idle(sim)
            if flees:
                slot = int(np.flatnonzero(sim.observer.slot_entity[0, 2] == player)[0])
                actions[0, 2] = flat_action(Action.FLEE, slot, sim.K)
            sim.step(actions)
            lost = on and flees
            assert s.actor_mode[0, m] == (ActorMode.STROLL if lost else ActorMode.HUNT), (on, flees)
            assert s.alive[0, 2]
    assert Tuning().flight_escapes_hunt is False


def test_a_killer_who_hunts_only_the_afraid_spares_those_who_stand_up_to_him(village):
    """hunt_afraid_only: with nobody in his sight who fears him, a rampaging killer at the scene orders no killing
    (without it he takes the nearest); with one who fears him in sight he takes that one either way."""
    for only in (False, True):
        for afraid in (False, True):
            sim = VillageSim(village, 1, seed=2, scenario="mixed", tuning=Tuning(
                rampage_linger=0, hunt_afraid=0.3, hunt_afraid_only=only, curriculum_rampage=1.0))
            s, player, m, d = sim.state, sim.player, sim.player - sim.N, sim.driver
            d.kill_tick[0] = -1
            d.rampage[0] = 1
            s.actor_mode[0, m], s.actor_timer[0, m] = ActorMode.LINGER, sim.t.linger_ticks - 1
            s.pos[0, 5] = s.pos[0, player] + np.array([1.0, 0.0], np.float32)  # beside him
            s.fear[0, :, player] = 0.0
            s.fear[0, 5, player] = 1.0 if afraid else 0.0
            sim.commands.clear()
            d.before_tick(sim)
            orders = [(c.op, c.target) for c in sim.commands]
            if only and not afraid:
                assert orders == [] and d.rampage[0] == 1
            else:
                assert len(orders) == 1 and orders[0][0] == "kill" and d.rampage[0] == 0
                if afraid:
                    assert orders[0][1] == 5
    assert Tuning().hunt_afraid_only is False


def _bereaved(village, tuning: Tuning, grief: float) -> tuple[VillageSim, int]:
    """NPC 1 stands at NPC 0's body, knows of the death and feels `grief`; returns the sim and the body's slot."""
    s = _npc1_saw_npc0_die(village, tuning, grief, None)
    s.obs, s.mask = s.observer.observe()
    return s, int(np.flatnonzero(s.observer.slot_entity[0, 1] == 0)[0])


def test_mourning_is_open_only_to_the_grieving_when_it_ends_with_grief(village):
    """mourning_ends_with_grief: MOURN is masked for an NPC whose grief is mourned away (< GRIEF_LEFT) and open
    to one with grief left; without the rule anyone who knows of the death may mourn."""
    def can_mourn(grief: float, rule: bool) -> bool:
        s, slot = _bereaved(village, Tuning(mourning_ends_with_grief=rule), grief)
        return bool(s.mask[0, 1, flat_action(Action.MOURN, slot, s.K)])

    assert can_mourn(0.5, True) and can_mourn(0.0, False) and can_mourn(0.5, False)
    assert not can_mourn(0.0, True)
    assert not can_mourn(0.04, True)
    assert Tuning().mourning_ends_with_grief is False


def test_a_mourning_ends_when_its_grief_is_mourned_away(village):
    """mourning_ends_with_grief: with grief-work relief of at least 0.1 a tick, a grief of 0.15 is spent within two
    ticks at the body and the mourner is free to choose again; without the rule it stays for all of mourn_ticks."""
    def after_three_ticks(rule: bool) -> tuple[bool, float]:
        tuning = Tuning(mourning_ends_with_grief=rule, mourn_relief_linear=True, mourn_ticks=6)
        s, slot = _bereaved(village, tuning, 0.15)
        for tick in range(3):
            act = idle(s)
            if tick == 0:
                act[0, 1] = flat_action(Action.MOURN, slot, s.K)
            s.step(act)
        return bool(s.state.busy[0, 1] and s.state.activity[0, 1] == Action.MOURN), float(s.state.grief[0, 1])

    still_mourning, grief = after_three_ticks(False)
    assert still_mourning and grief < GRIEF_LEFT  # the grief is spent, the mourning goes on
    still_mourning, grief = after_three_ticks(True)
    assert not still_mourning and grief < GRIEF_LEFT


def _death_price(village, bravery: tuple[float, float], feel: Callable[[VillageSim], None] | None = None,
                 **levers: Any) -> np.ndarray:
    """What villagers 0 and 1 (of the given bravery, aggression 0.5) pay for dying on the next tick: the reward
    without a death penalty minus the reward with one of 100, in a world with these Tuning levers. `feel` sets
    their emotions first."""
    paid = []
    for penalty in (100.0, 0.0):  # the same death with and without a price: the difference is the price
        sim = VillageSim(village, 1, seed=0, scenario="none", tuning=Tuning(death_penalty=penalty, **levers))
        sim.w.traits[0, :2, Trait.BRAVERY] = bravery
        sim.w.traits[0, :2, Trait.AGGRESSION] = 0.5
        if feel is not None:
            feel(sim)
        sim.state.health[0, :2] = 0.0  # both die on the next tick
        sim.step(idle(sim))
        assert sim.died[0, :2].all()
        paid.append(sim.last_reward[0, :2].copy())
    return paid[1] - paid[0]


def test_death_is_dreaded_by_the_timid_under_death_dread_bravery(village):
    """death_dread_bravery: the death penalty is scaled by (2 x (1 - bravery)) ** death_dread_power, so a villager of
    bravery 0.2 pays 1.6 times the price and one of 0.8 pays 0.4 of it (2.56 and 0.16 at power 2); without the lever
    both pay the same."""
    def death_price(dread: bool, power: float = 1.0) -> np.ndarray:
        return _death_price(village, (0.2, 0.8), death_dread_bravery=dread, death_dread_power=power)

    scale = Tuning().reward_scale
    np.testing.assert_allclose(death_price(False), [100 * scale, 100 * scale], rtol=1e-5)
    np.testing.assert_allclose(death_price(True), [160 * scale, 40 * scale], rtol=1e-5)
    np.testing.assert_allclose(death_price(True, 2.0), [256 * scale, 16 * scale], rtol=1e-5)  # a steeper dread


def test_anger_tempers_the_dread_of_death_under_death_dread_anger(village):
    """death_dread_anger: two villagers of bravery 0.2 and aggression 0.5 die; the one with anger 1 at a known
    threat pays the dread over (1 + death_dread_anger x 0.5 x 1), the calm one all of it; off (0), both pay it."""
    def enrage(sim: VillageSim) -> None:
        sim.state.anger[0, 0, 5] = 1.0  # villager 0 is enraged at villager 5; villager 1 is calm

    def death_price(anger_lever: float) -> np.ndarray:
        return _death_price(village, (0.2, 0.2), enrage, death_dread_bravery=True, death_dread_anger=anger_lever)

    scale = Tuning().reward_scale
    np.testing.assert_allclose(death_price(0.0), [160 * scale, 160 * scale], rtol=1e-5)
    np.testing.assert_allclose(death_price(10.0), [160 * scale / (1 + 10.0 * 0.5), 160 * scale], rtol=1e-4)
    assert Tuning().death_dread_anger == 0.0


def test_grief_tempers_the_dread_of_death_under_death_dread_grief(village):
    """death_dread_grief: two villagers of bravery 0.2 and aggression 0.5 die; the one grieving at 1 (the victim's
    kin) pays the dread over (1 + death_dread_grief x 0.5 x its grief), the one who grieves nobody all of it; off
    (0), both pay it."""
    def bereave(sim: VillageSim) -> None:
        sim.state.grief[0, :2] = (1.0, 0.0)  # villager 0 mourns someone; villager 1 grieves nobody

    def death_price(grief_lever: float) -> np.ndarray:
        return _death_price(village, (0.2, 0.2), bereave, death_dread_bravery=True, death_dread_grief=grief_lever)

    scale = Tuning().reward_scale
    np.testing.assert_allclose(death_price(0.0), [160 * scale, 160 * scale], rtol=1e-5)
    # the grief the dying villager still holds after this tick's decay prices its death
    grief_left = float(VillageSim(village, 1, seed=0, scenario="none").rates.decay_grief)
    np.testing.assert_allclose(death_price(10.0), [160 * scale / (1 + 10.0 * 0.5 * grief_left), 160 * scale],
                               rtol=1e-3)
    assert Tuning().death_dread_grief == 0.0
