"""The NPC mind on village-v1 in scripted situations: perception, knowledge, appraisal, coping, labels.

Every test starts from `scenario="none"` (nothing happens unless a test makes it happen), all NPCs
idle (action 0) unless the test scripts an action, and NPCs placed by editing `sim.state.pos`.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.constants import Action, EntityKind, EventType, Reaction
from engine.events import HOW_FOUND_BODY, HOW_TOLD, HOW_WARNED, HOW_WITNESSED
from engine.sim import VillageSim, flat_action
from worlds import load_world

VILLAGE = load_world("village-v1")


def make_sim(slots: int = 4, seed: int = 0, villages: int = 1) -> VillageSim:
    return VillageSim(VILLAGE, villages, seed=seed, scenario="none", record=True, slots=slots)


def ent(sim: VillageSim, name: str) -> int:
    return sim.entity_names[0].index(name)


def refresh(sim: VillageSim) -> None:
    """Recompute observations and masks after a test edited the state."""
    sim.obs, sim.mask = sim.observer.observe()


def place(sim: VillageSim, name: str, x: float, y: float) -> None:
    sim.state.pos[0, ent(sim, name)] = (x, y)
    refresh(sim)


def idle(sim: VillageSim) -> np.ndarray:
    return np.zeros((sim.B, sim.N), np.int64)


def kill(sim: VillageSim, victim: str, *, player_gap: float = 1.0, max_ticks: int = 5) -> int:
    """The player, placed next to `victim`, kills it; everyone idles. Returns the death tick."""
    v, p = ent(sim, victim), ent(sim, "player")
    if player_gap is not None:
        sim.state.pos[0, p] = sim.state.pos[0, v] + (player_gap, 0.0)
    sim.command(0, "player", "kill", target=victim)
    for _ in range(max_ticks):
        sim.step(idle(sim))
        if not sim.state.alive[0, v]:
            assert sim.died[0, v]
            return int(sim.state.death_tick[0, v])
    raise AssertionError(f"{victim} still alive after {max_ticks} ticks")


def slot_of(sim: VillageSim, npc: int, entity: int) -> int | None:
    found = np.flatnonzero(sim.observer.slot_entity[0, npc] == entity)
    return int(found[0]) if len(found) else None


def act_on(sim: VillageSim, npc: int, kind: Action, entity: int) -> np.ndarray:
    """Actions: `npc` does `kind` on `entity` if free (the slot must be there and allowed), others idle."""
    actions = idle(sim)
    if sim.state.busy[0, npc]:
        return actions
    slot = slot_of(sim, npc, entity)
    assert slot is not None, f"entity {entity} is not in NPC {npc}'s slots {sim.observer.slot_entity[0, npc]}"
    flat = flat_action(kind, slot, sim.K)
    assert sim.mask[0, npc, flat], f"{kind.name} on slot {slot} is masked for NPC {npc}"
    actions[0, npc] = flat
    return actions


def events(sim: VillageSim, type_: EventType, **match) -> list:
    return [e for e in sim.log.events if e.type == type_ and all(getattr(e, k) == v for k, v in match.items())]


# ---------------------------------------------------------------- the killing and its witnesses
def test_kill_command_from_afar_kills_within_a_few_ticks():
    sim = make_sim()
    death_tick = kill(sim, "Alda", player_gap=None, max_ticks=15)
    alda, player = ent(sim, "Alda"), ent(sim, "player")
    assert death_tick >= 0 and sim.state.killer[0, alda] == player
    (death,) = events(sim, EventType.DEATH)
    assert (death.actor, death.target, death.tick) == (player, alda, death_tick)
    assert sim.state.death_event[0, alda] == death.id


def test_witnesses_know_at_once_and_distant_npcs_do_not():
    sim = make_sim()
    place(sim, "Kara", 46.0, 46.0)
    death_tick = kill(sim, "Alda")
    s, alda, player = sim.state, ent(sim, "Alda"), ent(sim, "player")
    dist = np.linalg.norm(s.pos[0, : sim.N] - s.death_pos[0, alda], axis=-1)
    sight = float(sim.w.sight_radius[0])
    witnesses = np.flatnonzero(s.alive[0, : sim.N] & (dist <= sight))
    far = np.flatnonzero(dist > sight)
    assert len(witnesses) >= 2 and ent(sim, "Kara") in far
    # nobody beyond sight is within gossip range of a witness, so they cannot have heard yet
    gap = np.linalg.norm(s.pos[0, far][:, None] - s.pos[0, witnesses][None], axis=-1)
    assert (gap > sim.t.talk_radius).all()
    assert s.knows_death[0, witnesses, alda].all()
    assert (s.learned_from[0, witnesses, alda] == -1).all()
    assert (s.known_culprit[0, witnesses, alda] == player).all()
    assert (s.learned_tick[0, witnesses, alda] == death_tick).all()
    assert s.knows_threat[0, witnesses, player].all()
    assert not s.knows_death[0, far, alda].any()
    assert (s.learned_from[0, far, alda] == -2).all()
    seen = {m.receiver for m in sim.log.messages if m.how == HOW_WITNESSED and m.subject == alda}
    assert seen == set(witnesses.tolist())


def test_a_body_is_found_without_learning_the_culprit():
    sim = make_sim()
    place(sim, "Alda", 46.0, 2.0)  # far from every house: nobody sees the killing
    kill(sim, "Alda")
    s, alda = sim.state, ent(sim, "Alda")
    assert not s.knows_death[0, :, alda].any()
    body = s.death_pos[0, alda]
    place(sim, "Fenna", body[0] + 0.5 * sim.t.body_discovery_radius, body[1])
    between = 0.5 * (sim.t.body_discovery_radius + float(sim.w.sight_radius[0]))
    place(sim, "Edric", body[0], body[1] + between)
    sim.step(idle(sim))
    fenna, edric = ent(sim, "Fenna"), ent(sim, "Edric")
    assert s.knows_death[0, fenna, alda] and s.learned_from[0, fenna, alda] == -1
    assert s.known_culprit[0, fenna, alda] == -1
    assert not s.knows_death[0, edric, alda]
    (msg,) = [m for m in sim.log.messages if m.receiver == fenna and m.subject == alda]
    assert msg.how == HOW_FOUND_BODY and msg.sender == -1 and msg.culprit == -1


def test_news_reaches_others_only_through_messages():
    """Every piece of knowledge has a record: witnessed, found, or told/warned by someone who knew."""
    sim = VillageSim(VILLAGE, 4, seed=4, scenario="random_kill", record=True)
    rng = np.random.default_rng(0)
    for _ in range(144):
        sim.step((rng.random(sim.mask.shape) * sim.mask).argmax(-1))
    s = sim.state
    first: dict[tuple[int, int, int], object] = {}
    for m in sim.log.messages:
        first.setdefault((m.village, m.receiver, m.subject), m)
    told = 0
    for b, i, e in zip(*np.nonzero(s.knows_death), strict=True):
        m = first[(b, i, e)]
        assert m.tick == s.learned_tick[b, i, e] >= s.death_tick[b, e]
        if m.sender == -1:
            assert m.how in (HOW_WITNESSED, HOW_FOUND_BODY)
            assert s.learned_from[b, i, e] == -1
        else:
            told += 1
            assert m.how in (HOW_TOLD, HOW_WARNED)
            assert s.learned_from[b, i, e] == m.sender != i
            assert s.knows_death[b, m.sender, e] and s.learned_tick[b, m.sender, e] <= m.tick
    assert len(first) == int(s.knows_death.sum())  # no message about news nobody holds
    assert told > 0, "the run should have spread some news by word of mouth"
    for m in sim.log.messages:  # culprit news comes from someone who blames the same culprit
        if m.sender >= 0 and m.culprit >= 0:
            assert s.known_culprit[m.village, m.sender, m.subject] == m.culprit


def test_talk_carries_news_both_ways_and_warn_one_way():
    sim = make_sim(slots=14)  # every entity in view, so any NPC can be addressed
    kill(sim, "Alda")
    s = sim.state
    alda, player, bren, fenna, ivo = (ent(sim, n) for n in ("Alda", "player", "Bren", "Fenna", "Ivo"))
    raider = ent(sim, "raider2")
    # a quiet corner far from everyone; Fenna and Bren have no tie, so no ambient gossip between them
    place(sim, "Bren", 6.0, 44.0)
    place(sim, "Fenna", 6.5, 44.0)
    assert sim.w.base_affinity[0, fenna, bren] <= 0
    s.knows_threat[0, fenna, raider] = True  # something only Fenna knows
    refresh(sim)
    for _ in range(6):
        sim.step(act_on(sim, fenna, Action.TALK, bren))
        if s.knows_death[0, fenna, alda]:
            break
    assert s.knows_death[0, fenna, alda] and s.learned_from[0, fenna, alda] == bren
    assert s.known_culprit[0, fenna, alda] == player
    assert s.knows_threat[0, bren, raider], "talk goes both ways"
    msg = [m for m in sim.log.messages if m.receiver == fenna and m.subject == alda]
    assert msg[0].how == HOW_TOLD and msg[0].sender == bren
    # now Fenna warns Ivo: Ivo learns, Fenna learns nothing back
    place(sim, "Ivo", 10.0, 44.0)  # a few steps away: the warning shows as "alarm" on the way
    assert sim.w.base_affinity[0, fenna, ivo] <= 0
    s.knows_threat[0, ivo, ent(sim, "raider1")] = True
    refresh(sim)
    for _ in range(6):
        sim.step(act_on(sim, fenna, Action.WARN, ivo))
        if s.knows_death[0, ivo, alda]:
            break
    assert s.knows_death[0, ivo, alda] and s.learned_from[0, ivo, alda] == fenna
    assert s.knows_threat[0, ivo, player]
    assert not s.knows_threat[0, fenna, ent(sim, "raider1")], "a warning goes one way"
    warned = [m for m in sim.log.messages if m.receiver == ivo and m.subject == alda]
    assert warned[0].how == HOW_WARNED
    (alarm,) = events(sim, EventType.REACTION, reaction=Reaction.ALARM, actor=fenna)
    assert alarm.target == ivo
    assert alarm.cause == s.threat_event[0, player] == s.death_event[0, alda]  # about the killer she fears



def _fenna_told_by_bren(justice: bool, *, bren_knows_cai: bool, fenna_knows_cai: bool,
                        fenna_knows_player: bool) -> bool:
    """After Alda's killing, Cai's latest blow struck the player; Fenna (who did not see it) talks with Bren (who
    knows the player for a threat, and Cai or not) until she hears of Alda's death. Returns whether she then takes
    Cai for a threat."""
    from engine.constants import Tuning

    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none", record=True, slots=14,
                     tuning=Tuning(hearsay_justice=justice))
    kill(sim, "Alda")
    s = sim.state
    alda, player, bren, cai, fenna = (ent(sim, n) for n in ("Alda", "player", "Bren", "Cai", "Fenna"))
    place(sim, "Bren", 6.0, 44.0)
    place(sim, "Fenna", 6.5, 44.0)
    assert sim.w.base_affinity[0, fenna, bren] <= 0  # no ambient gossip between them: only the talk tells
    assert s.knows_threat[0, bren, player] and not s.knows_death[0, fenna, alda]
    s.threat_victim[0, cai] = player
    s.knows_threat[0, bren, cai] = bren_knows_cai
    s.knows_threat[0, fenna] = False
    s.knows_threat[0, fenna, cai] = fenna_knows_cai
    s.knows_threat[0, fenna, player] = fenna_knows_player
    refresh(sim)
    for _ in range(6):
        sim.step(act_on(sim, fenna, Action.TALK, bren))
        if s.knows_death[0, fenna, alda]:
            break
    assert s.knows_death[0, fenna, alda] and s.knows_threat[0, fenna, player]
    return bool(s.knows_threat[0, fenna, cai])


@pytest.mark.parametrize("justice", [False, True])
@pytest.mark.parametrize("knew_the_killer", [False, True])
def test_hearsay_justice_does_not_pass_on_an_avenger_as_a_threat(justice, knew_the_killer):
    """Tuning.hearsay_justice: told of a villager whose latest blow struck the killer, whom the hearer knew for a
    threat or is told of in the same breath, the hearer takes only the killer for a threat; off, it takes both."""
    told = _fenna_told_by_bren(justice, bren_knows_cai=True, fenna_knows_cai=False,
                               fenna_knows_player=knew_the_killer)
    assert told == (not justice)


@pytest.mark.parametrize("justice", [False, True])
def test_told_of_the_killer_a_villager_stops_fearing_the_one_who_struck_him(justice):
    """Tuning.hearsay_justice: Fenna saw Cai strike the player without knowing the player had killed; told that
    the player is a threat, she no longer takes Cai for one. Off, she fears both."""
    told = _fenna_told_by_bren(justice, bren_knows_cai=False, fenna_knows_cai=True, fenna_knows_player=False)
    assert told == (not justice)


def test_the_latest_violence_remembers_whom_it_struck():
    sim = make_sim()
    alda, player = ent(sim, "Alda"), ent(sim, "player")
    assert (sim.state.threat_victim == -1).all()
    kill(sim, "Alda")
    assert sim.state.threat_victim[0, player] == alda


def test_news_for_them_marks_those_who_have_not_heard():
    """news_for_them: 1 on a living NPC's slot when that one has not heard of a death the observer knows;
    telling them clears it."""
    from engine.observe import SELF_FEATURES, SLOT_FEATURES

    sim = make_sim(slots=14)
    s = sim.state

    def news_for(i: int, e: int) -> float:
        k = slot_of(sim, i, e)
        assert k is not None
        return float(sim.obs[0, i, len(SELF_FEATURES) + k * len(SLOT_FEATURES) + SLOT_FEATURES.index("news_for_them")])

    bren, fenna = ent(sim, "Bren"), ent(sim, "Fenna")
    assert news_for(bren, fenna) == 0.0  # nothing known yet
    kill(sim, "Alda")
    place(sim, "Bren", 6.0, 44.0)
    place(sim, "Fenna", 6.5, 44.0)
    assert s.knows_death[0, bren, ent(sim, "Alda")] and not s.knows_death[0, fenna, ent(sim, "Alda")]
    assert news_for(bren, fenna) == 1.0 and news_for(fenna, bren) == 0.0
    assert news_for(bren, ent(sim, "Alda")) == 0.0  # the dead are told nothing
    for _ in range(6):
        sim.step(act_on(sim, bren, Action.TALK, fenna))
        if s.knows_death[0, fenna, ent(sim, "Alda")]:
            break
    assert news_for(bren, fenna) == 0.0 and news_for(fenna, bren) == 0.0


def test_tell_salience_brings_a_face_that_has_not_heard_into_the_slots():
    """Tuning.tell_salience: an NPC in sight who has not heard of a death the observer knows draws attention
    ahead of a liked one who knows; off (the default), liking and nearness decide alone."""
    from engine.constants import Tuning

    def third_slot(tell_salience: float) -> tuple[str, bool]:
        sim = VillageSim(VILLAGE, 1, seed=0, scenario="none", slots=3, tuning=Tuning(tell_salience=tell_salience))
        kill(sim, "Alda")
        bren = ent(sim, "Bren")
        place(sim, "Bren", 12.0, 36.0)  # Edric, Fenna and Garth (who did not see it) are 5 away, Dora 22
        slots = [sim.entity_names[0][e] for e in sim.observer.slot_entity[0, bren]]
        assert slots[:2] == ["player", "Alda"]  # the threat and the fresh loss come first either way
        heard = bool(sim.state.knows_death[0, ent(sim, slots[2]), ent(sim, "Alda")])
        return slots[2], heard

    assert third_slot(0.0) == ("Dora", True)
    name, heard = third_slot(2.0)
    assert name in ("Edric", "Fenna", "Garth") and not heard


# ---------------------------------------------------------------- appraisal
def test_close_relations_grieve_and_a_rival_gloats():
    sim = make_sim()
    alda_pos = sim.state.pos[0, ent(sim, "Alda")]
    place(sim, "Lute", alda_pos[0] + 3.0, alda_pos[1])  # Lute resents Alda; he sees it happen
    place(sim, "Hilda", alda_pos[0], alda_pos[1] + 3.0)  # Hilda has no tie to Alda
    kill(sim, "Alda")
    s, alda = sim.state, ent(sim, "Alda")
    lute, hilda, bren, fenna = (ent(sim, n) for n in ("Lute", "Hilda", "Bren", "Fenna"))
    assert sim.w.base_affinity[0, lute, alda] < 0 and sim.w.base_affinity[0, hilda, alda] == 0
    assert s.knows_death[0, [lute, hilda, bren], alda].all()
    assert s.grief[0, bren] > 0
    assert s.joy[0, lute] > 0 and s.grief[0, lute] == 0
    assert s.grief[0, hilda] == 0 and s.joy[0, hilda] == 0
    assert s.grief[0, fenna] == 0, "a friend who has not heard yet does not grieve"
    (gloat,) = events(sim, EventType.REACTION, reaction=Reaction.GLOATING)
    assert gloat.actor == lute and gloat.target == alda and gloat.cause == s.death_event[0, alda]


def test_kin_grieve_more_than_friends_at_equal_liking():
    """The kin bonus: Cai (kin, 0.95) grieves more than Fenna (friend, 0.75) would at 0.95."""
    sim = make_sim()
    alda, cai, fenna = ent(sim, "Alda"), ent(sim, "Cai"), ent(sim, "Fenna")
    sim.state.affinity[0, fenna, alda] = sim.state.affinity[0, cai, alda]
    place(sim, "Fenna", *(sim.state.pos[0, alda] + (0.0, 2.0)))
    kill(sim, "Alda")
    assert sim.state.grief[0, cai] > sim.state.grief[0, fenna] > 0


def test_aggressive_close_relation_is_angry_at_the_killer():
    sim = make_sim()
    kill(sim, "Alda")
    s, player = sim.state, ent(sim, "player")
    bren, cai = ent(sim, "Bren"), ent(sim, "Cai")
    traits = sim.w.traits[0]
    assert traits[bren, 1] > traits[cai, 1]  # Bren is the more aggressive one
    assert s.anger[0, bren, player] > 0
    assert s.anger[0, bren, player] > s.anger[0, cai, player]
    others = np.delete(np.arange(sim.E), player)
    assert (s.anger[0, bren, others] == 0).all(), "anger is aimed at the culprit only"


def test_timid_witness_fears_the_killer():
    sim = make_sim()
    kill(sim, "Alda")
    s, player = sim.state, ent(sim, "player")
    cai, bren = ent(sim, "Cai"), ent(sim, "Bren")
    assert sim.w.traits[0, cai, 0] < sim.w.traits[0, bren, 0]  # Cai is timid, Bren brave
    assert s.fear[0, cai, player] > 0
    assert s.fear[0, cai, player] > s.fear[0, bren, player]
    assert s.knows_threat[0, cai, player]


def test_emotions_decay_with_their_half_lives_when_nothing_happens():
    sim = make_sim()
    s, t = sim.state, sim.t
    i, player, raider = 0, ent(sim, "player"), ent(sim, "raider1")
    assert np.linalg.norm(s.pos[0, i] - s.pos[0, player]) > sim.w.sight_radius[0]
    s.grief[0, i], s.joy[0, i] = 1.0, 1.0
    s.fear[0, i, raider] = 1.0
    s.anger[0, i, raider] = 1.0  # not a known threat: ordinary anger
    s.anger[0, i, player] = 1.0
    s.knows_threat[0, i, player] = True  # a known, living culprit: a grudge
    refresh(sim)
    sim.step(idle(sim))
    assert s.grief[0, i] == pytest.approx(0.5 ** (1 / t.grief_half_life), rel=1e-4)
    assert s.joy[0, i] == pytest.approx(0.5 ** (1 / t.joy_half_life), rel=1e-4)
    # the raider is out of sight (off the map): fear of it fades with the short "safe" half-life
    assert s.fear[0, i, raider] == pytest.approx(0.5 ** (1 / t.fear_safe_half_life), rel=1e-4)
    assert s.anger[0, i, raider] == pytest.approx(0.5 ** (1 / t.anger_half_life), rel=1e-4)
    assert s.anger[0, i, player] == pytest.approx(0.5 ** (1 / t.grudge_half_life), rel=1e-4)
    for _ in range(int(t.fear_safe_half_life) - 1):
        sim.step(idle(sim))
    assert s.fear[0, i, raider] == pytest.approx(0.5, rel=1e-3)


def test_fear_of_a_threat_in_sight_fades_slowly_and_anger_damps_it():
    sim = make_sim()
    s, t = sim.state, sim.t
    i, player = 0, ent(sim, "player")
    s.knows_threat[0, i, player] = True
    s.pos[0, player] = s.pos[0, i] + np.array([0.5 * sim.w.sight_radius[0], 0.0], np.float32)  # in sight
    s.fear[0, i, player] = 2.0  # above the floor: it only decays
    refresh(sim)
    sim.step(idle(sim))
    assert s.fear[0, i, player] == pytest.approx(2.0 * 0.5 ** (1 / t.fear_half_life), rel=1e-4)
    # the floor near the threat, without and with anger at it
    calm, angry = make_sim(), make_sim()
    for sim_, anger in ((calm, 0.0), (angry, 1.5)):
        st = sim_.state
        st.knows_threat[0, i, player] = True
        st.pos[0, player] = st.pos[0, i] + np.array([1.0, 0.0], np.float32)
        st.anger[0, i, player] = anger
        refresh(sim_)
        sim_.step(idle(sim_))
    assert calm.state.fear[0, i, player] > 0.1
    assert angry.state.fear[0, i, player] < calm.state.fear[0, i, player]


def test_grief_and_fear_fade_after_a_killing():
    sim = make_sim()
    kill(sim, "Alda")
    s, player, bren, cai = sim.state, ent(sim, "player"), ent(sim, "Bren"), ent(sim, "Cai")
    grief = [float(s.grief[0, bren])]
    fear_peak = float(s.fear[0, cai, player])
    for _ in range(60):
        sim.step(idle(sim))
        grief.append(float(s.grief[0, bren]))
        fear_peak = max(fear_peak, float(s.fear[0, cai, player]))
    assert (np.diff(grief) <= 0).all()
    assert grief[-1] < grief[0]
    sight = float(sim.w.sight_radius[0])
    assert np.linalg.norm(s.pos[0, player] - s.pos[0, cai]) > sight, "the player strolled away"
    assert s.fear[0, cai, player] < 0.5 * fear_peak


# ---------------------------------------------------------------- coping actions and reaction labels
def test_mourning_at_the_body():
    sims = [make_sim(), make_sim()]  # the second one is the control: Bren idles
    alda, bren = ent(sims[0], "Alda"), ent(sims[0], "Bren")
    for sim in sims:
        place(sim, "Bren", *(sim.state.pos[0, alda] + (0.0, 7.0)))  # a witness, but not at the body
        kill(sim, "Alda")
    sim, control = sims
    assert sim.state.knows_death[0, bren, alda]
    slot = slot_of(sim, bren, alda)
    assert slot is not None and sim.mask[0, bren, flat_action(Action.MOURN, slot, sim.K)]
    mourned = False
    for _ in range(25):
        sim.step(act_on(sim, bren, Action.MOURN, alda))
        control.step(idle(control))
        if sim.reaction[0, bren] == Reaction.MOURNING:
            mourned = True
            break
    assert mourned
    dist = np.linalg.norm(sim.state.pos[0, bren] - sim.state.death_pos[0, alda])
    assert dist <= sim.t.reach
    assert sim.state.performing[0, bren] and sim.state.activity[0, bren] == Action.MOURN
    (label,) = events(sim, EventType.REACTION, reaction=Reaction.MOURNING, actor=bren)
    assert label.target == alda and label.cause == sim.state.death_event[0, alda]
    for _ in range(3):
        sim.step(idle(sim))  # carry on mourning
        control.step(idle(control))
    assert sim.state.grief[0, bren] < control.state.grief[0, bren], "mourning relieves grief"


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize("by_empathy", [True, False])
def test_a_mourning_tick_eases_a_share_or_a_fixed_amount_of_grief(linear, by_empathy):
    from engine.constants import Tuning

    tuning = Tuning(mourn_relief_linear=linear, mourn_relief_empathy=by_empathy,
                    grief_half_life=1e9)  # no fading: only mourning eases grief
    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none", record=True, tuning=tuning)
    alda, bren = ent(sim, "Alda"), ent(sim, "Bren")
    place(sim, "Bren", *(sim.state.pos[0, alda] + (0.0, 0.5)))  # already at the body
    kill(sim, "Alda")
    sim.step(act_on(sim, bren, Action.MOURN, alda))  # arrives at once: performing from this tick
    assert sim.state.performing[0, bren]
    before = float(sim.state.grief[0, bren])
    sim.step(idle(sim))
    after = float(sim.state.grief[0, bren])
    ease = tuning.mourn_relief * ((0.5 + float(sim.w.traits[0, bren, 2])) if by_empathy else 1.0)
    assert before > ease  # Bren grieves for Alda (kin): the two rules give different answers
    expected = max(before - ease, 0.0) if linear else before * (1 - ease)
    assert after == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("lever", [False, True])
def test_mourning_within_the_killers_reach_eases_no_grief_under_mourn_out_of_reach(lever):
    """Tuning.mourn_out_of_reach: a mourning tick at the body with the killer a step away eases no grief; once he
    is beyond the safe distance it eases grief again. Off, it eases grief with him there."""
    from engine.constants import Tuning

    tuning = Tuning(grief_half_life=1e9, mourn_out_of_reach=lever)  # no fading: only mourning eases grief
    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none", record=True, tuning=tuning)
    alda, bren, player = ent(sim, "Alda"), ent(sim, "Bren"), ent(sim, "player")
    place(sim, "Bren", *(sim.state.pos[0, alda] + (0.0, 0.5)))  # already at the body
    kill(sim, "Alda")
    assert sim.state.knows_threat[0, bren, player]  # Bren saw who did it
    sim.command(0, "player", "stop")  # he stays by the body
    sim.step(act_on(sim, bren, Action.MOURN, alda))
    assert sim.state.performing[0, bren] and sim.state.activity[0, bren] == Action.MOURN
    near = float(np.linalg.norm(sim.state.pos[0, player] - sim.state.pos[0, bren]))
    assert near < float(sim.safe_distance[0])
    before = float(sim.state.grief[0, bren])
    sim.step(idle(sim))
    with_him = float(sim.state.grief[0, bren])
    assert (with_him == pytest.approx(before)) if lever else with_him < before
    sim.state.pos[0, player] = sim.state.pos[0, bren] + (0.0, float(sim.safe_distance[0]) + 1.0)
    sim.step(idle(sim))
    assert sim.state.performing[0, bren] and sim.state.grief[0, bren] < with_him  # he has gone: grief work resumes


@pytest.mark.parametrize("lever", [0.0, 100.0])
def test_rage_at_a_living_killer_holds_grief_work_back_under_grief_work_anger(lever):
    """Tuning.grief_work_anger: a mourning tick of a villager angry at the living killer eases grief only by the
    share max(0, 1 - lever x aggression x anger); with the anger spent it eases grief in full again. Off (0), rage
    changes nothing."""
    from engine.constants import Trait, Tuning

    tuning = Tuning(grief_half_life=1e9, anger_half_life=1e9, grudge_half_life=1e9, mourn_relief_linear=True,
                    grief_work_anger=lever)  # no fading: only mourning eases grief
    sim = VillageSim(VILLAGE, 1, seed=0, scenario="none", record=True, tuning=tuning)
    alda, bren, player = ent(sim, "Alda"), ent(sim, "Bren"), ent(sim, "player")
    place(sim, "Bren", *(sim.state.pos[0, alda] + (0.0, 0.5)))  # already at the body
    kill(sim, "Alda")
    sim.state.pos[0, player] = sim.state.pos[0, bren] + (0.0, float(sim.safe_distance[0]) + 5.0)  # out of reach
    sim.command(0, "player", "stop")
    sim.state.anger[0, bren, player] = 1.0
    assert sim.w.traits[0, bren, Trait.AGGRESSION] > 0  # Bren has some aggression: rage can hold him back
    sim.step(act_on(sim, bren, Action.MOURN, alda))
    assert sim.state.performing[0, bren] and sim.state.activity[0, bren] == Action.MOURN
    before = float(sim.state.grief[0, bren])
    sim.step(idle(sim))
    enraged = float(sim.state.grief[0, bren])
    ease = tuning.mourn_relief * (0.5 + float(sim.w.traits[0, bren, Trait.EMPATHY]))
    assert enraged == pytest.approx(before if lever else before - ease, rel=1e-4)
    sim.state.anger[0, bren, :] = 0.0  # the rage is spent: grief work resumes
    sim.step(idle(sim))
    assert sim.state.performing[0, bren]
    assert float(sim.state.grief[0, bren]) == pytest.approx(enraged - ease, rel=1e-4)


def test_revenge_blow_on_the_player():
    sim = make_sim()
    alda, bren, player = ent(sim, "Alda"), ent(sim, "Bren"), ent(sim, "player")
    place(sim, "Bren", *(sim.state.pos[0, alda] + (0.0, 6.0)))
    kill(sim, "Alda")
    death_id = int(sim.state.death_event[0, alda])
    health0 = float(sim.state.health[0, player])
    labels = []
    for _ in range(40):
        sim.step(act_on(sim, bren, Action.ATTACK, player))
        labels.append(int(sim.reaction[0, bren]))
        if events(sim, EventType.ATTACK, actor=bren):
            break
    (blow,) = events(sim, EventType.ATTACK, actor=bren)
    assert blow.target == player and blow.cause == death_id
    assert sim.state.health[0, player] < health0
    assert Reaction.REVENGE in labels
    revenge = events(sim, EventType.REACTION, reaction=Reaction.REVENGE, actor=bren)
    assert revenge and revenge[0].cause == death_id and revenge[0].target == player


def test_a_timid_witness_flees_to_safety():
    sim = make_sim()
    cai, player = ent(sim, "Cai"), ent(sim, "player")
    kill(sim, "Alda")
    safe = float(sim.w.sight_radius[0]) * sim.t.safe_distance_factor
    fled = False
    labels = []
    for _ in range(20):
        sim.step(act_on(sim, cai, Action.FLEE, player) if not sim.state.busy[0, cai] else idle(sim))
        labels.append(int(sim.reaction[0, cai]))
        if np.linalg.norm(sim.state.pos[0, cai] - sim.state.pos[0, player]) >= safe:
            fled = True
            break
    assert fled and Reaction.FEAR in labels


def test_consoling_is_over_the_villager_the_comforted_grieves_not_the_killer_who_died_since():
    """Cai learns of his mother Alda's death, then of the player's (the killer, struck down by Garth): comforting
    his father Bren is over Alda, whom Bren grieves; nobody grieves the killer, though his death is the news Cai
    heard last."""
    sim = make_sim()
    s = sim.state
    alda, bren, cai, garth, player = (ent(sim, n) for n in ("Alda", "Bren", "Cai", "Garth", "player"))
    for name, dy in (("Bren", 3.0), ("Cai", -3.0)):
        place(sim, name, *(s.pos[0, alda] + (0.0, dy)))
    kill(sim, "Alda")
    s.health[0, player] = 0.01
    s.knows_threat[0, garth, player] = True
    place(sim, "Garth", *(s.pos[0, player] + (0.5, 0.0)))
    for _ in range(5):
        sim.step(act_on(sim, garth, Action.ATTACK, player))
        if not s.alive[0, player]:
            break
    assert not s.alive[0, player] and s.knows_death[0, cai, player]
    assert s.learned_tick[0, cai, player] > s.learned_tick[0, cai, alda] >= 0
    assert s.grief[0, bren] > 0
    for _ in range(10):
        sim.step(act_on(sim, cai, Action.COMFORT, bren))
        if events(sim, EventType.REACTION, reaction=Reaction.CONSOLING, actor=cai):
            break
    (consoling,) = events(sim, EventType.REACTION, reaction=Reaction.CONSOLING, actor=cai)
    assert consoling.target == bren and consoling.cause == s.death_event[0, alda]


def test_event_causes_refer_to_existing_events():
    sim = VillageSim(VILLAGE, 3, seed=2, scenario="random_kill", record=True)
    rng = np.random.default_rng(3)
    sim.command(1, "raider1", "raid")
    for tick in range(144):
        if tick == 20:
            sim.command(2, "player", "attack", target="Bren")
        sim.step((rng.random(sim.mask.shape) * sim.mask).argmax(-1))
    assert sim.log.events
    for b in range(sim.B):
        log = sim.log.for_village(b)
        by_id = {e.id: e for e in log.events}
        assert sorted(by_id) == list(range(int(sim.state.event_count[b]))), "ids are unique and all logged"
        for e in log.events:
            assert e.cause == -1 or (e.cause in by_id and e.cause < e.id)
            if e.type == EventType.ATTACK and e.actor < sim.N and e.cause >= 0:
                cause = by_id[e.cause]  # revenge: the death the attacker blames its target for
                assert cause.type == EventType.DEATH and cause.actor == e.target
            if e.type == EventType.REACTION and e.reaction == Reaction.MOURNING:
                cause = by_id[e.cause]
                assert cause.type == EventType.DEATH and cause.target == e.target
            if e.type == EventType.REACTION and e.reaction == Reaction.CONSOLING and e.cause >= 0:
                cause = by_id[e.cause]  # over a villager's death: an actor's death is nobody's grief
                assert cause.type == EventType.DEATH and cause.target < sim.N


# ---------------------------------------------------------------- raids
def test_raiders_arrive_approach_and_hurt_villagers():
    sim = make_sim()
    raiders = np.flatnonzero(sim.w.entity_kind == EntityKind.RAIDER)
    assert not sim.state.present[0, raiders].any()
    sim.command(0, "raider1", "raid")
    sim.step(idle(sim))
    s = sim.state
    assert s.present[0, raiders].all() and s.alive[0, raiders].all()
    assert len(events(sim, EventType.RAID_START)) == 1

    def nearest_villager() -> float:
        d = np.linalg.norm(s.pos[0, raiders][:, None] - s.pos[0, : sim.N][None], axis=-1)
        return float(d[:, s.alive[0, : sim.N]].min())

    start = nearest_villager()
    health0 = s.health[0, : sim.N].copy()
    for _ in range(3):
        sim.step(idle(sim))
    assert nearest_villager() < start
    for _ in range(40):
        sim.step(idle(sim))
        if events(sim, EventType.ATTACK):
            break
    blows = events(sim, EventType.ATTACK)
    assert blows and all(e.actor in raiders for e in blows)
    hurt = [e.target for e in blows]
    assert (s.health[0, hurt] < health0[hurt]).all()
    sight = float(sim.w.sight_radius[0])
    d = np.linalg.norm(s.pos[0, : sim.N][:, None] - s.pos[0, raiders][None], axis=-1)
    sees = (d <= sight) & s.alive[0, : sim.N, None]
    assert sees.any() and s.knows_threat[0, : sim.N][:, raiders][sees].all()
