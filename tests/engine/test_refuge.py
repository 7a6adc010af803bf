"""A flight home (Tuning.flee_home, docs/engine.md): FLEE runs home when home lies away from the threat, the NPC
hides there `hide_ticks`, out of a killer's reach and feeling safe; off by default, a flight runs straight away."""

from __future__ import annotations

import numpy as np
import pytest

from engine.body import nearest_villager
from engine.constants import Action, ActorMode, Personality, Reaction, Tuning
from engine.sim import VillageSim, flat_action
from worlds import load_world

VILLAGE = load_world("village-v1")


def make_sim(**tuning) -> VillageSim:
    return VillageSim(VILLAGE, 1, seed=0, scenario="none", tuning=Tuning(**tuning))


def ent(sim: VillageSim, name: str) -> int:
    return sim.entity_names[0].index(name)


def idle(sim: VillageSim) -> np.ndarray:
    return np.zeros((sim.B, sim.N), np.int64)


def afraid_near_home(sim: VillageSim, npc: int, gap: float = 6.0) -> None:
    """`npc` knows the player is dangerous and fears it; it stands `gap` from its home, the player 3 farther out
    on the same line (home lies away from the threat)."""
    s, player = sim.state, sim.player
    home = sim.w.home_pos[0, npc]
    out = np.where(home < sim.w.size[0] / 2, 1.0, -1.0).astype(np.float32)  # toward the middle of the map
    s.pos[0, npc] = home + out * gap / np.sqrt(2)
    s.pos[0, player] = home + out * (gap + 3) / np.sqrt(2)
    s.knows_threat[0, npc, player] = True
    s.fear[0, npc, player] = 1.0
    sim.obs, sim.mask = sim.observer.observe()


def flee(sim: VillageSim, npc: int) -> np.ndarray:
    actions = idle(sim)
    slot = int(np.flatnonzero(sim.observer.slot_entity[0, npc] == sim.player)[0])
    actions[0, npc] = flat_action(Action.FLEE, slot, sim.K)
    assert sim.mask[0, npc, actions[0, npc]]
    return actions


def hidden_at_home(sim: VillageSim, npc: int) -> None:
    """`npc`, afraid near its home (afraid_near_home), flees there and is hiding when this returns."""
    afraid_near_home(sim, npc)
    sim.step(flee(sim, npc))
    for _ in range(12):
        sim.step(idle(sim))
        if sim.hiding[0, npc]:
            break
    assert sim.hiding[0, npc]


def test_a_flight_home_hides_there_and_fear_fades_though_the_killer_is_near():
    sim = make_sim(flee_home=True, hide_ticks=5)
    cai, player = ent(sim, "Cai"), sim.player
    s, home = sim.state, sim.w.home_pos[0, cai]
    afraid_near_home(sim, cai)
    sim.step(flee(sim, cai))
    hid_at = None
    for tick in range(12):
        if sim.hiding[0, cai]:
            hid_at = tick
            break
        sim.step(idle(sim))
    assert hid_at is not None, "the flight home arrived"
    assert np.linalg.norm(s.pos[0, cai] - home) <= sim.t.reach
    assert sim.reaction[0, cai] == Reaction.FEAR
    s.pos[0, player] = s.pos[0, cai] + 2.0  # the killer comes to the door
    fear = [float(s.fear[0, cai, player])]
    hiding = []
    for _ in range(6):
        sim.step(idle(sim))
        fear.append(float(s.fear[0, cai, player]))
        hiding.append(bool(sim.hiding[0, cai]))
    # hidden: the fear of a killer two steps away fades at the safe rate, with no floor from his proximity
    safe = 0.5 ** (1 / sim.t.fear_safe_half_life)
    hidden_ticks = hiding.index(False)
    assert 3 <= hidden_ticks <= 5 and not any(hiding[hidden_ticks:])  # hide_ticks, counted from the arrival
    for before, after in zip(fear[:hidden_ticks], fear[1:hidden_ticks + 1], strict=True):
        assert after == pytest.approx(before * safe, abs=1e-6)
    assert not s.busy[0, cai]  # free to choose again


def test_a_killer_cannot_reach_a_villager_hiding_at_home():
    sim = make_sim(flee_home=True, hide_ticks=30)
    cai, player = ent(sim, "Cai"), sim.player
    s, m = sim.state, sim.player - sim.N
    hidden_at_home(sim, cai)
    s.pos[0, :sim.N][np.arange(sim.N) != cai] += 100.0  # everyone else far off: Cai is the nearest by far
    sim.obs, sim.mask = sim.observer.observe()
    prey, _ = nearest_villager(sim, np.array([0]), player)
    assert prey[0] != cai  # a hunt for the nearest passes over a hiding villager
    sim.command(0, "player", "kill", target="Cai")
    for _ in range(6):
        sim.step(idle(sim))
    assert s.alive[0, cai] and s.actor_mode[0, m] == ActorMode.IDLE  # the chase ended at the door


def test_by_default_or_with_home_toward_the_threat_a_flight_runs_straight_away():
    for tuning in ({}, {"flee_home": True}):
        sim = make_sim(**tuning)
        cai, player = ent(sim, "Cai"), sim.player
        s, home = sim.state, sim.w.home_pos[0, cai]
        afraid_near_home(sim, cai)
        if tuning:  # the killer stands between the NPC and its home
            s.pos[0, player], s.pos[0, cai] = s.pos[0, cai].copy(), s.pos[0, player].copy()
            sim.obs, sim.mask = sim.observer.observe()
        start_home = np.linalg.norm(s.pos[0, cai] - home)
        sim.step(flee(sim, cai))
        for _ in range(12):
            assert not sim.hiding[0, cai]
            if not s.busy[0, cai]:
                break
            sim.step(idle(sim))
        assert not s.busy[0, cai]  # the flight ended at the safe distance
        assert np.linalg.norm(s.pos[0, cai] - s.pos[0, player]) >= sim.w.sight_radius[0] * sim.t.safe_distance_factor
        if tuning:
            assert np.linalg.norm(s.pos[0, cai] - home) > start_home  # away from home, since the killer is there


def test_grief_waits_while_the_npc_flees_and_hides():
    """Tuning.grief_waits: a grieving NPC's grief neither fades nor costs while it flees or hides (its fear comes
    first), and fades again once the flight is over; off, it fades on every tick."""
    from engine import mind

    for waits in (False, True):
        sim = make_sim(flee_home=True, hide_ticks=4, grief_waits=waits)
        cai, s = ent(sim, "Cai"), sim.state
        afraid_near_home(sim, cai)
        s.grief[0, cai] = 0.8
        sim.step(flee(sim, cai))
        grief = [float(s.grief[0, cai])]
        felt = [float(mind.felt_grief(sim)[0, cai])]
        while s.busy[0, cai] and len(grief) < 30:
            sim.step(idle(sim))
            grief.append(float(s.grief[0, cai]))
            felt.append(float(mind.felt_grief(sim)[0, cai]))
        assert not s.busy[0, cai] and len(grief) > 3  # the flight (there and the hiding) is over
        if waits:
            assert grief[:-1] == pytest.approx([0.8] * (len(grief) - 1))  # waiting while it ran and hid
            assert felt[:-1] == [0.0] * (len(felt) - 1)  # and not felt
            assert felt[-1] == grief[-1] > 0
            sim.step(idle(sim))
            assert 0 < s.grief[0, cai] < grief[-1]  # safe: it fades again
        else:
            assert all(after < before for before, after in zip(grief[:-1], grief[1:], strict=True))
            assert felt == grief


def test_a_flight_that_makes_grief_wait_is_no_relief():
    """With grief_waits and the relief reward, the grief that waits during a flight is not counted as eased (the
    relief ledger weighs the grief there is; the reward's emotion cost, the grief felt)."""
    from engine import mind

    rewards = []
    for waits in (False, True):
        sim = make_sim(flee_home=True, grief_waits=waits, w_relief=5.0)
        cai, s = ent(sim, "Cai"), sim.state
        afraid_near_home(sim, cai)
        s.grief[0, cai] = 0.8
        sim.step(flee(sim, cai))
        assert s.busy[0, cai] and s.activity[0, cai] == Action.FLEE
        assert mind.felt_grief(sim)[0, cai] == (0.0 if waits else s.grief[0, cai])
        rewards.append(float(sim.last_reward[0, cai]))
    # waiting spares the grief's sting this tick, no more: a relief of the whole grief would add w_relief x 0.8 x
    # (0.5 + empathy) x reward_scale on top of it
    sting = (0.5 + float(Personality.of(sim.w.traits).empathy[0, cai])) * 0.8 * sim.t.reward_scale
    assert rewards[1] - rewards[0] < sting * 1.5


def test_a_home_within_the_killers_sight_is_no_refuge_under_refuge_out_of_sight():
    """Tuning.refuge_out_of_sight: the flight runs straight away, past a home the killer can see, until safe; a
    home out of his sight is still a refuge."""
    for gap, out_of_sight in ((6.0, False), (9.0, True)):  # home 9 from the killer (inside sight 10), or 12
        sim = make_sim(flee_home=True, refuge_out_of_sight=True)
        cai, player = ent(sim, "Cai"), sim.player
        s, home = sim.state, sim.w.home_pos[0, cai]
        afraid_near_home(sim, cai, gap=gap)
        safe = sim.w.sight_radius[0] * sim.t.safe_distance_factor
        assert (np.linalg.norm(home - s.pos[0, player]) >= safe) == out_of_sight
        sim.step(flee(sim, cai))
        hid = False
        for _ in range(12):
            hid |= bool(sim.hiding[0, cai])
            if hid or not s.busy[0, cai]:
                break
            sim.step(idle(sim))
        assert hid == out_of_sight
        if not out_of_sight:  # it ran on past its door and stopped once out of the killer's sight
            assert not s.busy[0, cai]
            assert np.linalg.norm(s.pos[0, cai] - s.pos[0, player]) >= safe
            assert np.linalg.norm(s.pos[0, cai] - home) > 1.0
    # without the lever, the same near home is a refuge
    sim = make_sim(flee_home=True)
    cai = ent(sim, "Cai")
    afraid_near_home(sim, cai, gap=6.0)
    sim.step(flee(sim, cai))
    for _ in range(12):
        if sim.hiding[0, cai]:
            break
        sim.step(idle(sim))
    assert sim.hiding[0, cai]


def test_a_flight_with_a_margin_runs_past_the_safe_distance_before_it_stops():
    """Tuning.flee_margin: a flight straight away stops at that many times the safe distance, not at its edge."""
    ends = {}
    for margin in (1.0, 1.4):
        sim = make_sim(flee_margin=margin)
        cai, player = ent(sim, "Cai"), sim.player
        s = sim.state
        afraid_near_home(sim, cai)
        sim.step(flee(sim, cai))
        for _ in range(20):
            if not s.busy[0, cai]:
                break
            sim.step(idle(sim))
        assert not s.busy[0, cai]
        ends[margin] = float(np.linalg.norm(s.pos[0, cai] - s.pos[0, player]))
    safe = sim.w.sight_radius[0] * sim.t.safe_distance_factor
    assert safe <= ends[1.0] < 1.4 * safe <= ends[1.4]


def test_work_stops_for_a_villager_who_knows_a_killer_is_loose():
    """Tuning.work_stops_for_threat: WORK is masked for an NPC who knows of a living threat, and only for it; off
    by default; the killer's death opens the workplaces again."""
    work = int(Action.WORK)
    for on in (False, True):
        sim = make_sim(work_stops_for_threat=on)
        cai, dora, player = ent(sim, "Cai"), ent(sim, "Dora"), sim.player
        sim.obs, sim.mask = sim.observer.observe()
        assert sim.mask[0, cai, work] and sim.mask[0, dora, work]
        sim.state.knows_threat[0, cai, player] = True
        sim.obs, sim.mask = sim.observer.observe()
        assert sim.mask[0, cai, work] == (not on)
        assert sim.mask[0, dora, work]  # who has not heard goes to work as ever
        sim.state.alive[0, player] = False
        sim.obs, sim.mask = sim.observer.observe()
        assert sim.mask[0, cai, work]


def test_hide_until_clear_ends_hiding_once_the_killer_is_out_of_sight_of_the_house():
    """hide_until_clear: a hider whose killer walks out of sight of the house is free to choose again at once;
    while he can see it, it hides on. Off, it hides its hide_ticks whatever he does."""
    for on in (False, True):
        for far in (False, True):
            sim = make_sim(flee_home=True, hide_ticks=30, hide_until_clear=on)
            cai, player, m = ent(sim, "Cai"), sim.player, sim.player - sim.N
            s = sim.state
            hidden_at_home(sim, cai)
            sight = float(sim.w.sight_radius[0])
            gap = sight + 1.0 if far else sight / 2
            s.pos[0, player] = s.pos[0, cai] + np.array([gap, 0.0], np.float32)
            for _ in range(3):
                s.actor_mode[0, m] = ActorMode.IDLE  # he stands where he was put
                sim.step(idle(sim))
            assert sim.hiding[0, cai] == (not (on and far)), (on, far)
            assert s.alive[0, cai]
    assert Tuning().hide_until_clear is False


def test_hide_clear_factor_keeps_the_household_in_until_the_killer_is_that_far():
    """hide_clear_factor 2: a killer just out of sight of the house (1.5 sight radii) keeps the hider in; at 2.5
    sight radii it comes out. The default (1) lets it out at 1.5, as hide_until_clear alone does."""
    for factor, gap_radii, hides in ((2.0, 1.5, True), (2.0, 2.5, False), (1.0, 1.5, False)):
        sim = make_sim(flee_home=True, hide_ticks=30, hide_until_clear=True, hide_clear_factor=factor)
        cai, player, m = ent(sim, "Cai"), sim.player, sim.player - sim.N
        s = sim.state
        hidden_at_home(sim, cai)
        gap = float(sim.w.sight_radius[0]) * gap_radii
        s.pos[0, player] = s.pos[0, cai] + np.array([gap, 0.0], np.float32)
        for _ in range(3):
            s.actor_mode[0, m] = ActorMode.IDLE
            sim.step(idle(sim))
        assert sim.hiding[0, cai] == hides, (factor, gap_radii)
    assert Tuning().hide_clear_factor == 1.0


def saw_a_death(sim: VillageSim, witness: int, victim: int) -> None:
    """`victim` died at tick 0 at the map's corner, and `witness` saw it."""
    s = sim.state
    s.alive[0, victim] = False
    s.death_tick[0, victim] = 0
    s.pos[0, victim] = s.death_pos[0, victim] = 0.0
    s.knows_death[0, witness, victim] = True
    s.learned_tick[0, witness, victim] = 0
    s.learned_from[0, witness, victim] = -1


@pytest.mark.parametrize("tells", [True, False])
def test_a_villager_hiding_at_home_warns_the_household_under_refuge_tells(tells):
    """refuge_tells: a witness hiding at home tells a villager standing at its door of the death it knows (one
    way: a warning); without the rule, and with no gossip, the hiding is silent."""
    sim = make_sim(flee_home=True, hide_ticks=10, refuge_tells=tells)
    sim.w.gossip_probability[:] = 0.0  # only the refuge can carry the news
    s = sim.state
    cai, victim, listener = ent(sim, "Cai"), ent(sim, "Alda"), ent(sim, "Bren")
    saw_a_death(sim, cai, victim)
    home, size = sim.w.home_pos[0, cai], sim.w.size[0]
    s.pos[0, listener] = np.where(home < size / 2, size - 1.0, 1.0)  # the far corner, out of earshot
    hidden_at_home(sim, cai)
    assert not s.knows_death[0, listener, victim]
    for _ in range(3):
        s.pos[0, listener] = s.pos[0, cai] + 1.0  # at the door, within talking range
        sim.step(idle(sim))
    assert sim.hiding[0, cai] or not tells
    assert bool(s.knows_death[0, listener, victim]) == tells
    if tells:
        assert s.learned_from[0, listener, victim] == cai


def test_fear_of_a_loose_threat_fades_fast_only_in_flight_under_fear_fades_in_flight():
    """Tuning.fear_fades_in_flight: of two villagers afraid of a player far out of reach, the one fleeing home has
    its fear fade at the safe rate and the one standing idle at the near rate; off, both at the safe rate."""
    for lever in (False, True):
        sim = make_sim(flee_home=True, fear_fades_in_flight=lever)
        cai, s = ent(sim, "Cai"), sim.state
        afraid_near_home(sim, cai)
        other = next(i for i in range(sim.N) if i != cai)
        s.pos[0, sim.player] = np.where(s.pos[0, cai] < sim.w.size[0] / 2, sim.w.size[0] - 1.0, 1.0)
        s.knows_threat[0, other, sim.player] = True
        s.fear[0, other, sim.player] = 1.0
        far = sim.w.sight_radius[0] * sim.t.fear_near
        for i in (cai, other):
            assert np.linalg.norm(s.pos[0, i] - s.pos[0, sim.player]) > far + 2 * sim.t.flee_speed
        sim.obs, sim.mask = sim.observer.observe()
        sim.step(flee(sim, cai))
        assert s.busy[0, cai] and s.activity[0, cai] == Action.FLEE and not s.busy[0, other]
        fled, stood = float(s.fear[0, cai, sim.player]), float(s.fear[0, other, sim.player])
        assert fled == pytest.approx(float(sim.rates.decay_fear_safe))
        assert stood == pytest.approx(float(sim.rates.decay_fear if lever else sim.rates.decay_fear_safe))
    assert Tuning().fear_fades_in_flight is False


@pytest.mark.parametrize("shouts", [True, False])
def test_a_fleeing_witness_warns_those_it_passes_under_flight_warns(shouts):
    """Tuning.flight_warns: a witness running from the killer tells a villager it passes of the death it knows (a
    warning, one way); without the rule, and with no gossip, the flight is silent."""
    sim = make_sim(flight_warns=shouts)
    sim.w.gossip_probability[:] = 0.0  # only the flight can carry the news
    s = sim.state
    cai, victim, listener = ent(sim, "Cai"), ent(sim, "Alda"), ent(sim, "Bren")
    saw_a_death(sim, cai, victim)
    afraid_near_home(sim, cai)
    sim.step(flee(sim, cai))
    for _ in range(3):
        assert s.busy[0, cai] and s.activity[0, cai] == Action.FLEE  # still running
        away = s.pos[0, cai] - s.pos[0, sim.player]
        ahead = s.pos[0, cai] + away / np.linalg.norm(away) * sim.t.flee_speed  # where she runs this tick
        s.pos[0, listener] = ahead + 0.5  # passed on the way, within talking range
        sim.step(idle(sim))
    assert bool(s.knows_death[0, listener, victim]) == shouts
    if shouts:
        assert s.learned_from[0, listener, victim] == cai
    assert Tuning().flight_warns is False
