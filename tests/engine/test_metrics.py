"""Emergence metrics on hand-built traces with known answers (engine/metrics.py, docs/emergence.md)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.constants import Action, EntityKind, EventType, Reaction
from engine.metrics import (
    UNIT_COUNTS,
    MetricParams,
    Stats,
    Trace,
    TraceRecorder,
    entropy,
    group_intervals,
    paired_intervals,
    performed,
    summarize,
    system_neural_diversity,
    trace_stats,
    tv_distance,
)

N, PLAYER, T = 4, 4, 60  # NPCs 0..3, the player is entity 4
VICTIM, DEATH_STEP = 0, 5


class Builder:
    """A one-village trace: NPC 0 is killed by the player at step 5; everything else is set by each test."""

    def __init__(self, ticks: int = T):
        E = N + 1
        self.ticks = ticks
        self.traits = np.full((1, N, 5), 0.5, np.float32)
        self.affinity = np.zeros((1, N, N), np.float32)
        self.kin = np.zeros((1, N, N), bool)
        self.pos = np.zeros((ticks + 1, 1, E, 2), np.float32)
        self.pos[:, 0, :N, 0] = np.arange(N) * 2.0  # NPCs in a row, 2 apart
        self.pos[:, 0, PLAYER] = (0.5, 0.0)  # the player stands by the victim
        self.alive = np.ones((ticks + 1, 1, E), bool)
        self.alive[DEATH_STEP + 1:, 0, VICTIM] = False
        z = (ticks + 1, 1, N)
        self.activity = np.zeros(z, np.int8)
        self.target = np.full(z, -1, np.int16)
        self.performing = np.zeros(z, bool)
        self.busy = np.zeros(z, bool)
        self.reaction = np.zeros(z, np.int8)
        self.grief = np.zeros(z, np.float32)
        self.joy = np.zeros(z, np.float32)
        self.learned_tick = np.full((1, N, E), -1, np.int32)
        self.learned_from = np.full((1, N, E), -2, np.int32)
        self.known_culprit = np.full((1, N, E), -1, np.int32)
        self.culprit_tick = np.full((1, N, E), -1, np.int32)
        self.events: list[tuple[int, ...]] = []  # (id, tick, type, actor, target, cause, reaction)
        self.messages: list[tuple[int, ...]] = []
        self.event(DEATH_STEP, EventType.DEATH, PLAYER, VICTIM)

    def event(self, tick: int, type_: EventType, actor: int, target: int, cause: int = -1,
              reaction: Reaction = Reaction.NONE) -> int:
        eid = len(self.events)
        self.events.append((eid, tick, int(type_), actor, target, cause, int(reaction)))
        return eid

    def relate(self, i: int, j: int, affinity: float, kin: bool = False) -> None:
        self.affinity[0, i, j] = self.affinity[0, j, i] = affinity
        self.kin[0, i, j] = self.kin[0, j, i] = kin

    def learns(self, i: int, step: int, sender: int = -1, culprit: bool = True, subject: int = VICTIM) -> None:
        self.learned_tick[0, i, subject] = step
        self.learned_from[0, i, subject] = sender
        if culprit:
            self.known_culprit[0, i, subject] = PLAYER
            self.culprit_tick[0, i, subject] = step

    def does(self, i: int, kind: Action, target: int, rows: range, performing: bool = True) -> None:
        """NPC i is busy with `kind` on `target` in the given state rows (performing there if asked)."""
        for t in rows:
            self.activity[t, 0, i] = kind
            self.target[t, 0, i] = target
            self.busy[t, 0, i] = True
            self.performing[t, 0, i] = performing

    def build(self) -> Trace:
        cols = ("id", "tick", "type", "actor", "target", "cause", "reaction")
        ev = {c: np.array([e[k] for e in self.events], np.int64) for k, c in enumerate(cols)}
        ev["village"] = np.zeros(len(self.events), np.int64)
        mcols = ("tick", "sender", "receiver", "subject", "culprit", "how")
        ms = {c: np.array([m[k] for m in self.messages], np.int64) for k, c in enumerate(mcols)}
        ms["village"] = np.zeros(len(self.messages), np.int64)
        death_tick = np.full((1, N + 1), -1)
        killer = np.full((1, N + 1), -1)
        death_tick[0, VICTIM], killer[0, VICTIM] = DEATH_STEP, PLAYER
        M = 1
        return Trace(
            scenario="test", world="test", ticks=self.ticks,
            entity_kind=np.array([EntityKind.NPC] * N + [EntityKind.PLAYER], np.int8),
            traits=self.traits, affinity=self.affinity, kin=self.kin, sight_radius=np.array([10.0]),
            safe_distance=np.array([10.0]), joy_decay=0.97, pos=self.pos, alive=self.alive,
            activity=self.activity, target=self.target, performing=self.performing, busy=self.busy,
            reaction=self.reaction, grief=self.grief, joy=self.joy,
            fear_actor=np.zeros((self.ticks + 1, 1, N, M), np.float32),
            anger_actor=np.zeros((self.ticks + 1, 1, N, M), np.float32),
            learned_tick=self.learned_tick, learned_from=self.learned_from, known_culprit=self.known_culprit,
            culprit_tick=self.culprit_tick, death_tick=death_tick, killer=killer, events=ev, messages=ms,
        )


def result(b: Builder, **params: float) -> dict:
    return trace_stats(b.build(), MetricParams(**params)).result()


# ------------------------------------------------------------------ building blocks
def test_performed_counts_the_last_tick_whose_flag_is_already_cleared() -> None:
    b = Builder()
    b.does(1, Action.MOURN, VICTIM, range(9, 14))  # performing after steps 8..12; the 6th tick is step 13
    acted, kind, target = performed(b.build())
    steps = np.flatnonzero(acted[:, 0, 1])
    assert steps.tolist() == list(range(8, 14))
    assert (kind[steps, 0, 1] == Action.MOURN).all() and (target[steps, 0, 1] == VICTIM).all()


def test_tv_distance_entropy_and_snd_on_known_distributions() -> None:
    assert tv_distance([1, 0, 0], [0, 1, 0]) == pytest.approx(1.0)
    assert tv_distance([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0)
    assert entropy(np.array([1, 1, 1, 1])) == pytest.approx(2.0)
    assert entropy(np.array([5, 0])) == pytest.approx(0.0)
    same = np.tile([[0.2, 0.8]], (3, 4, 1))  # (P=3, G=4, A=2): every agent acts alike
    assert system_neural_diversity(same) == pytest.approx(0.0)
    # two agents, one-hot on different actions for one observation, identical on the other
    probs = np.array([[[1, 0], [0, 1]], [[0.5, 0.5], [0.5, 0.5]]], float)
    assert system_neural_diversity(probs) == pytest.approx(0.5)
    # three agents: TV(a,b)=0.4, TV(a,c)=0.4, TV(b,c)=0 -> mean 0.8/3
    probs = np.array([[[0.6, 0.4], [0.2, 0.8], [0.2, 0.8]]])
    assert system_neural_diversity(probs) == pytest.approx(0.8 / 3)
    assert system_neural_diversity(np.zeros((0, 3, 2))) is None
    assert system_neural_diversity(np.ones((2, 1, 2))) is None
    with pytest.raises(ValueError, match="probs"):
        system_neural_diversity(np.ones((2, 2)))


# ------------------------------------------------------------------ mourning
def test_mourning_counts_close_relations_who_spend_enough_ticks_at_the_body() -> None:
    b = Builder()
    b.relate(0, 1, 0.9, kin=True)  # spouse: mourns 6 ticks -> yes
    b.relate(0, 2, 0.6)  # friend: mourns 5 ticks -> no
    b.relate(0, 3, 0.2)  # acquaintance: not a close relation, whatever it does
    for i in (1, 2, 3):
        b.learns(i, DEATH_STEP)
    b.does(1, Action.MOURN, VICTIM, range(9, 14))  # steps 8..13
    b.does(2, Action.MOURN, VICTIM, range(9, 13))  # steps 8..12
    b.does(3, Action.MOURN, VICTIM, range(9, 20))
    r = result(b)
    assert r["mourning_rate"] == pytest.approx(0.5)
    assert r["counts"]["mourn_eligible"] == 2
    assert r["mourning_latency"] == pytest.approx(8 - DEATH_STEP)


def test_walking_to_the_body_is_not_mourning_and_consoling_grieving_kin_is() -> None:
    b = Builder()
    b.relate(0, 1, 0.9, kin=True)
    b.relate(0, 2, 0.7)
    b.learns(1, DEATH_STEP)
    b.learns(2, DEATH_STEP)
    b.does(1, Action.MOURN, VICTIM, range(6, 40), performing=False)  # walks the whole time, never arrives
    b.does(2, Action.COMFORT, 1, range(10, 15))  # comforts the grieving spouse, steps 9..14
    r = result(b)
    assert r["mourning_rate"] == pytest.approx(0.5)
    assert r["mourning_latency"] == pytest.approx(9 - DEATH_STEP)


def test_mourning_edge_cases_nobody_close_never_told_or_window_cut_off() -> None:
    b = Builder()
    b.relate(0, 1, 0.3)  # nobody close
    b.learns(1, DEATH_STEP)
    assert result(b)["mourning_rate"] is None
    b = Builder()
    b.relate(0, 1, 0.9, kin=True)  # close, but never learns of it
    r = result(b)
    assert r["mourning_rate"] is None and r["counts"]["mourn_close"] == 1
    b = Builder()
    b.relate(0, 1, 0.9, kin=True)
    b.learns(1, T - 10)  # the 36-tick window does not fit in the episode
    r = result(b)
    assert r["mourning_rate"] is None and r["counts"]["mourn_informed"] == 1


# ------------------------------------------------------------------ revenge
def test_revenge_rate_counts_aggressive_close_relations_who_land_a_blow_in_time() -> None:
    b = Builder()
    for i in (1, 2, 3):
        b.relate(0, i, 0.8, kin=True)
        b.learns(i, DEATH_STEP)
    b.traits[0, 1, 1] = 0.9  # aggressive, strikes the culprit -> yes
    b.traits[0, 2, 1] = 0.7  # aggressive, strikes too late -> no
    b.traits[0, 3, 1] = 0.2  # not aggressive: not counted even though it strikes
    b.event(12, EventType.ATTACK, 1, PLAYER, cause=0)
    b.event(DEATH_STEP + 30, EventType.ATTACK, 2, PLAYER, cause=0)
    b.event(12, EventType.ATTACK, 3, PLAYER, cause=0)
    r = result(b)
    assert r["revenge_rate"] == pytest.approx(0.5)
    assert r["counts"]["revenge_eligible"] == 2


def test_revenge_needs_the_culprit_known_and_accuracy_is_per_attacker() -> None:
    b = Builder()
    b.relate(0, 1, 0.8, kin=True)
    b.traits[0, 1, 1] = 0.9
    b.learns(1, DEATH_STEP, culprit=False)  # knows of the death, not who did it
    b.event(12, EventType.ATTACK, 1, PLAYER)  # on the culprit
    b.event(14, EventType.ATTACK, 1, 3)  # on a bystander
    b.event(15, EventType.ATTACK, 2, PLAYER)  # on the culprit
    b.event(3, EventType.ATTACK, 3, 2)  # before the killing: not counted
    r = result(b)
    assert r["revenge_rate"] is None and r["counts"]["revenge_close"] == 1
    assert r["revenge_accuracy"] == pytest.approx((0.5 + 1.0) / 2)
    assert r["counts"]["attackers"] == 2


def test_zero_attacks_leave_accuracy_undefined() -> None:
    b = Builder()
    assert result(b)["revenge_accuracy"] is None


# ------------------------------------------------------------------ fear
def test_fear_counts_timid_witnesses_who_get_themselves_to_safety() -> None:
    b = Builder()
    b.traits[0, 1:, 0] = 0.2  # all timid
    for i in (1, 2, 3):
        b.learns(i, DEATH_STEP)  # all saw it
    # NPC 1 runs away north and stays away; the player walks off south two ticks later
    b.pos[DEATH_STEP + 2:, 0, 1] = (2.0, 6.0)
    b.pos[DEATH_STEP + 3:, 0, 1] = (2.0, 12.0)
    b.pos[DEATH_STEP + 3:, 0, PLAYER] = (0.0, -40.0)
    # NPC 2 stands still while the player walks off: far enough, but it did not flee
    # NPC 3 was already far from the player when it happened: not eligible
    b.pos[:, 0, 3] = (0.0, 25.0)
    r = result(b)
    assert r["counts"]["fear_witnesses"] == 3
    assert r["counts"]["fear_eligible"] == 2
    assert r["fear_rate"] == pytest.approx(0.5)
    curve = r["curves"]["distance_witness"]
    assert curve[0] == pytest.approx((1.5 + 3.5 + np.hypot(0.5, 25.0)) / 3 / 10.0)


def test_fear_requires_keeping_the_distance_and_ignores_the_brave_and_hearsay() -> None:
    b = Builder()
    b.traits[0, 1, 0] = 0.2
    b.learns(1, DEATH_STEP)
    b.pos[DEATH_STEP + 2:DEATH_STEP + 4, 0, 1] = (0.0, 12.0)  # away for 2 ticks, then back
    b.traits[0, 2, 0] = 0.9  # brave witness: not counted
    b.learns(2, DEATH_STEP)
    b.traits[0, 3, 0] = 0.1  # timid but told: hearsay curve only
    b.learns(3, DEATH_STEP + 4, sender=1)
    r = result(b)
    assert r["counts"]["fear_eligible"] == 1 and r["fear_rate"] == pytest.approx(0.0)
    assert r["curves"]["distance_hearsay"][0] == pytest.approx(np.hypot(6.0 - 0.5, 0.0) / 10.0)


def test_fear_kept_needs_the_distance_held_for_four_hours() -> None:
    """fear_kept_rate: the same flight as fear_rate, then the safe distance kept for fear_keep ticks; a witness
    who flees and comes back within them counts for fear_rate only."""
    b = Builder()
    b.traits[0, 1:, 0] = 0.2
    for i in (1, 2):
        b.learns(i, DEATH_STEP)
        b.pos[DEATH_STEP + 2:, 0, i] = (2.0, 12.0)  # both flee north at once
    b.pos[DEATH_STEP + 2 + 10:, 0, 2] = (0.0, 1.0)  # NPC 2 is back by the player after 10 ticks
    r = result(b)
    assert r["fear_rate"] == pytest.approx(1.0)
    assert r["counts"]["fear_kept_eligible"] == 2
    assert r["fear_kept_rate"] == pytest.approx(0.5)
    assert result(b, fear_keep=8)["fear_kept_rate"] == pytest.approx(1.0)  # 10 ticks away is enough for 8
    assert r["fear_by_culprit_death"] == pytest.approx(0.0)  # both got away by running
    b.alive[DEATH_STEP + 6:, 0, PLAYER] = False  # the killer dies: NPC 3 standing by is safe without fleeing
    b.learns(3, DEATH_STEP)
    assert result(b)["fear_by_culprit_death"] == pytest.approx(1 / 3)
    short = Builder(ticks=DEATH_STEP + 20)  # room for fear_rate's window, not for four hours
    short.traits[0, 1, 0] = 0.2
    short.learns(1, DEATH_STEP)
    short.pos[DEATH_STEP + 2:, 0, 1] = (2.0, 12.0)
    r = result(short)
    assert r["fear_rate"] == pytest.approx(1.0) and r["fear_kept_rate"] is None


def test_fear_chosen_needs_a_flight_the_witness_chose() -> None:
    """fear_chosen_rate: fear_kept_rate's hit, on the way to which the witness performed FLEE from the killer; one
    who walked off as far on another errand, or fled from someone else, is kept away but did not choose to run
    from him. A killer who dies while the witness flees does not undo the choice (unlike fear_fled_rate)."""
    b = Builder()
    b.traits[0, 1:, 0] = 0.2
    for npc in (1, 2):
        b.learns(npc, DEATH_STEP)
        b.pos[DEATH_STEP + 2:, 0, npc] = (2.0 * npc, 12.0)  # both end up far north at once
    b.activity[DEATH_STEP + 1:DEATH_STEP + 3, 0, 1] = Action.FLEE
    b.target[DEATH_STEP + 1:DEATH_STEP + 3, 0, 1] = PLAYER  # NPC 1 runs from the killer
    b.activity[DEATH_STEP + 1:, 0, 2] = Action.EAT  # NPC 2 goes to eat
    b.alive[DEATH_STEP + 3:, 0, PLAYER] = False  # the crowd kills him as they run
    r = result(b)
    assert r["counts"]["fear_kept_eligible"] == 2 and r["fear_kept_rate"] == pytest.approx(1.0)
    assert r["fear_chosen_rate"] == pytest.approx(0.5)  # NPC 1 only
    b.target[DEATH_STEP + 1:DEATH_STEP + 3, 0, 1] = 3  # NPC 1's flight is from someone else
    assert result(b)["fear_chosen_rate"] == pytest.approx(0.0)


def test_fear_fled_needs_a_flight_from_a_living_killer() -> None:
    """fear_fled_rate: fear_kept_rate's flight and four hours away, reached while the killer lived; a witness
    who is safe because the crowd killed the killer counts for fear_kept_rate, not for it, and one who fled
    before the killer died counts for both."""
    b = Builder()
    b.traits[0, 1:, 0] = 0.2
    b.learns(1, DEATH_STEP)
    b.pos[DEATH_STEP + 2:, 0, 1] = (2.0, 12.0)  # NPC 1 flees north at once
    b.learns(2, DEATH_STEP)  # NPC 2 stays by the body
    b.alive[DEATH_STEP + 5:, 0, PLAYER] = False  # the crowd kills the killer three ticks after NPC 1 got away
    r = result(b)
    assert r["counts"]["fear_kept_eligible"] == 2
    assert r["fear_kept_rate"] == pytest.approx(1.0)  # both: NPC 2 by the killer's death
    assert r["fear_fled_rate"] == pytest.approx(0.5)  # NPC 1 only
    b.pos[DEATH_STEP + 2:, 0, 1] = b.pos[DEATH_STEP + 1, 0, 1]  # NPC 1 stays too: nobody fled
    assert result(b)["fear_fled_rate"] == pytest.approx(0.0)


def test_no_witnesses_leaves_fear_undefined() -> None:
    b = Builder()
    b.traits[0, :, 0] = 0.1
    b.learns(1, DEATH_STEP + 3, sender=2)
    assert result(b)["fear_rate"] is None


# ------------------------------------------------------------------ news
def test_news_reach_curve_and_path_lengths() -> None:
    b = Builder()
    b.relate(1, 2, 0.5)
    b.relate(2, 3, 0.5)
    b.learns(1, DEATH_STEP)  # saw it
    b.learns(2, DEATH_STEP + 2, sender=1)  # one hop, graph distance 1
    b.learns(3, DEATH_STEP + 4, sender=2)  # two hops, graph distance 2
    r = trace_stats(b.build(), MetricParams(news_horizon=6)).result()
    assert r["curves"]["news_reach"][:6] == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3, 1.0, 1.0])
    assert r["news_reach"] == pytest.approx(1.0)
    assert r["news_hops"] == pytest.approx(1.5)
    assert r["news_graph_distance"] == pytest.approx(1.5)


# ------------------------------------------------------------------ consistency
def test_consistency_passes_a_clean_trace_and_catches_each_violation() -> None:
    def clean() -> Builder:
        b = Builder()
        b.relate(0, 1, 0.9, kin=True)
        b.relate(0, 3, -0.6)  # a rival of the victim
        b.learns(1, DEATH_STEP + 2, sender=2)
        b.learns(2, DEATH_STEP)
        b.learns(3, DEATH_STEP + 3, sender=2)
        b.grief[DEATH_STEP + 3:, 0, 1] = 1.0  # grief when it learns (row = step + 1)
        b.joy[DEATH_STEP + 4:, 0, 3] = 0.5  # the rival gloats when it learns
        b.does(1, Action.MOURN, VICTIM, range(DEATH_STEP + 5, DEATH_STEP + 10))
        b.event(DEATH_STEP + 5, EventType.REACTION, 1, VICTIM, cause=0, reaction=Reaction.MOURNING)
        b.event(DEATH_STEP + 12, EventType.ATTACK, 1, PLAYER, cause=0)
        b.event(DEATH_STEP + 12, EventType.REACTION, 1, PLAYER, cause=0, reaction=Reaction.REVENGE)
        return b

    r = result(clean())
    assert r["consistency"] == pytest.approx(1.0)
    assert set(r["consistency_checks"]) == {"reacts_after_knowing", "mourns_after_knowing",
                                            "no_grief_before_knowing", "gloating_not_grief",
                                            "revenge_on_known_culprit", "dead_do_nothing"}

    def failed(b: Builder) -> set[str]:
        checks = result(b)["consistency_checks"]
        return {k for k, v in checks.items() if v["passed"] < v["total"]}

    b = clean()  # mourning before knowing
    b.does(1, Action.MOURN, VICTIM, range(DEATH_STEP + 1, DEATH_STEP + 3))
    b.event(DEATH_STEP + 1, EventType.REACTION, 1, VICTIM, cause=0, reaction=Reaction.MOURNING)
    assert failed(b) == {"mourns_after_knowing", "reacts_after_knowing"}
    b = clean()  # grief before knowing
    b.grief[DEATH_STEP + 2, 0, 1] = 0.5
    assert failed(b) == {"no_grief_before_knowing"}
    b = clean()  # the rival grieves instead of gloating
    b.grief[DEATH_STEP + 4:, 0, 3] = 0.3
    b.joy[:, 0, 3] = 0.0
    assert failed(b) == {"gloating_not_grief"}
    b = clean()  # revenge on someone never blamed and who never attacked it
    b.event(DEATH_STEP + 20, EventType.REACTION, 1, 3, cause=-1, reaction=Reaction.REVENGE)
    assert failed(b) == {"revenge_on_known_culprit"}
    b = clean()  # the victim acts after its death
    b.event(DEATH_STEP + 2, EventType.ATTACK, VICTIM, 2)
    assert "dead_do_nothing" in failed(b)
    r = result(b)
    assert 0.0 < r["consistency"] < 1.0


def test_revenge_on_ones_own_attacker_is_consistent() -> None:
    b = Builder()
    b.event(8, EventType.ATTACK, 3, 1)  # NPC 3 hits NPC 1
    b.event(9, EventType.REACTION, 1, 3, reaction=Reaction.REVENGE)
    assert result(b)["consistency_checks"]["revenge_on_known_culprit"] == {"passed": 1, "total": 1}


# ------------------------------------------------------------------ chains
def test_chain_length_follows_cause_links_from_the_trigger() -> None:
    b = Builder()
    b.event(7, EventType.REACTION, 1, VICTIM, cause=0, reaction=Reaction.MOURNING)  # depth 1
    blow = b.event(9, EventType.ATTACK, 2, PLAYER, cause=0)  # depth 1
    b.event(10, EventType.REACTION, 3, 2, cause=blow, reaction=Reaction.FEAR)  # depth 2
    b.event(11, EventType.REACTION, 1, 2, cause=-1, reaction=Reaction.ALARM)  # unlinked
    r = result(b)
    assert r["chain_length"] == pytest.approx(2.0)
    assert r["chain_events"] == pytest.approx(3.0)


def test_a_killing_by_an_npc_is_linked_to_its_blow() -> None:
    b = Builder()
    blow = b.event(9, EventType.ATTACK, 2, 3, cause=0)  # revenge gone wrong: NPC 2 kills NPC 3
    death = b.event(9, EventType.DEATH, 2, 3)
    b.event(10, EventType.REACTION, 1, 3, cause=death, reaction=Reaction.MOURNING)
    b.alive[10:, 0, 3] = False
    assert blow < death
    assert result(b)["chain_length"] == pytest.approx(3.0)


def test_chain_branching_depth_share_and_deaths() -> None:
    b = Builder()
    b.event(7, EventType.REACTION, 1, VICTIM, cause=0, reaction=Reaction.MOURNING)  # root child 1
    b.event(9, EventType.ATTACK, 2, 3, cause=0)  # root child 2
    death = b.event(9, EventType.DEATH, 2, 3)  # linked to the blow
    b.event(10, EventType.REACTION, 1, 3, cause=death, reaction=Reaction.MOURNING)  # the feud goes on
    b.alive[10:, 0, 3] = False
    r = result(b)
    # inner nodes: the root (2 children), the blow (1), the death (1): 4 events below the root / 3 inner
    assert r["chain_branching"] == pytest.approx(4 / 3)
    assert r["chain_deep_share"] == pytest.approx(1.0)
    assert r["chain_deaths"] == pytest.approx(1.0)


def test_news_reach_at_48_needs_the_whole_window() -> None:
    b = Builder(ticks=DEATH_STEP + 50)
    b.learns(1, DEATH_STEP)
    b.learns(2, DEATH_STEP + 48, sender=1)  # just in time
    b.learns(3, DEATH_STEP + 49, sender=2)  # too late
    assert result(b)["news_reach_48"] == pytest.approx(2 / 3)
    short = Builder(ticks=DEATH_STEP + 40)  # the window does not fit: not eligible
    short.learns(1, DEATH_STEP)
    assert result(short)["news_reach_48"] is None


def test_hearsay_accuracy_counts_non_witnesses_who_believe_a_culprit() -> None:
    b = Builder()
    b.learns(1, DEATH_STEP)  # a witness: not hearsay
    b.learns(2, DEATH_STEP + 2, sender=1, culprit=False)
    b.known_culprit[0, 2, VICTIM], b.culprit_tick[0, 2, VICTIM] = PLAYER, DEATH_STEP + 5  # right, 3 steps later
    b.learns(3, DEATH_STEP + 3, sender=2, culprit=False)
    b.known_culprit[0, 3, VICTIM], b.culprit_tick[0, 3, VICTIM] = 1, DEATH_STEP + 3  # a wrong rumour
    r = result(b)
    assert r["hearsay_culprit_share"] == pytest.approx(1.0)
    assert r["hearsay_accuracy"] == pytest.approx(0.5)
    assert r["hearsay_culprit_delay"] == pytest.approx(1.5)


def test_player_reactions_counts_distinct_labels_about_the_killing_per_npc() -> None:
    b = Builder()
    b.event(7, EventType.REACTION, 1, VICTIM, cause=0, reaction=Reaction.MOURNING)  # in the chain
    b.event(9, EventType.REACTION, 1, PLAYER, cause=-1, reaction=Reaction.REVENGE)  # targets the killer
    b.event(12, EventType.REACTION, 1, PLAYER, cause=-1, reaction=Reaction.REVENGE)  # the same label again
    b.event(10, EventType.REACTION, 2, PLAYER, cause=-1, reaction=Reaction.FEAR)
    b.event(11, EventType.REACTION, 3, 2, cause=-1, reaction=Reaction.ALARM)  # about something else
    b.event(DEATH_STEP + 144, EventType.REACTION, 3, PLAYER, reaction=Reaction.FEAR)  # a day later: not counted
    r = result(b)
    assert r["player_reactions"] == pytest.approx((2 + 1 + 0) / 3)


def remembered(b: Builder, return_tick: int, **params: float) -> dict:
    trace = b.build()
    trace.return_tick = return_tick
    return trace_stats(trace, MetricParams(**params)).result()


def test_player_remembered_splits_the_living_by_what_they_knew_at_the_return() -> None:
    R = 20
    b = Builder()
    b.learns(1, DEATH_STEP)  # knew the culprit before the return
    b.learns(2, R + 3)  # learned it only after the return: unknowing at R
    b.learns(3, DEATH_STEP, culprit=False)  # knew of the death, not who did it
    b.event(R - 4, EventType.REACTION, 3, PLAYER, reaction=Reaction.FEAR)  # before the window: not counted
    b.event(R + 2, EventType.REACTION, 1, PLAYER, reaction=Reaction.FEAR)  # knowing, reacts
    b.event(R + 5, EventType.REACTION, 1, PLAYER, reaction=Reaction.DEFENSE)  # the same NPC again
    blow = b.event(R + 6, EventType.ATTACK, PLAYER, 3)  # the player's blow of day 2
    b.event(R + 7, EventType.REACTION, 2, 3, cause=blow, reaction=Reaction.ALARM)  # a warning about the player
    elsewhere = b.event(R + 1, EventType.ATTACK, 1, 2)
    b.event(R + 8, EventType.REACTION, 3, 1, cause=elsewhere, reaction=Reaction.ALARM)  # about NPC 1: no
    b.event(R + 9, EventType.REACTION, 3, PLAYER, reaction=Reaction.AGGRESSION)  # not a reaction to a threat
    b.event(R + 24, EventType.REACTION, 3, PLAYER, reaction=Reaction.FEAR)  # after the window: not counted
    r = remembered(b, R, remember_window=24)
    assert r["player_remembered"] == pytest.approx(1.0)  # NPC 1
    assert r["player_reacted_unknowing"] == pytest.approx(0.5)  # NPC 2 of NPCs 2 and 3
    assert r["player_remembered_gap"] == pytest.approx(0.5)
    assert r["player_known_share"] == pytest.approx(1 / 3)
    c = r["counts"]
    assert (c["remember_knew"], c["remember_knew_reacted"], c["remember_unknowing"],
            c["remember_unknowing_reacted"], c["remember_strikes"], c["remember_villages"]) == (1, 1, 2, 1, 1, 1)


def test_player_remembered_is_absent_without_a_return_and_void_when_the_player_died() -> None:
    b = Builder()
    b.learns(1, DEATH_STEP)
    r = remembered(b, -1)
    assert not any(k in r for k in ("player_remembered", "player_reacted_unknowing", "player_remembered_gap"))
    assert not any(k.startswith("remember_") for k in r["counts"])
    assert "player_remembered" not in remembered(b, 50, remember_window=24)  # the window does not fit
    b.alive[15:, 0, PLAYER] = False  # the villagers killed the player on day 1: no one comes back
    r = remembered(b, 20, remember_window=24)
    assert r["counts"]["remember_player_dead"] == 1
    assert r["player_remembered"] is None and r["player_remembered_gap"] is None


def test_no_trigger_deaths_gives_empty_rates() -> None:
    b = Builder()
    b.events.clear()
    b.alive[:] = True
    r = result(b)
    assert r["counts"]["deaths"] == 0
    assert r["mourning_rate"] is None and r["revenge_rate"] is None and r["fear_rate"] is None
    assert r["chain_length"] is None


# ------------------------------------------------------------------ pooling and the recorder
def test_rates_pool_counts_over_traces() -> None:
    def one(mourns: bool) -> Trace:
        b = Builder()
        b.relate(0, 1, 0.9, kin=True)
        b.learns(1, DEATH_STEP)
        if mourns:
            b.does(1, Action.MOURN, VICTIM, range(9, 16))
        return b.build()

    assert summarize([one(True), one(False), one(False)])["mourning_rate"] == pytest.approx(1 / 3)
    total = Stats()
    total += trace_stats(one(True))
    assert total.result()["mourning_rate"] == 1.0


def test_recorder_captures_a_real_killing() -> None:
    from engine.sim import VillageSim
    from worlds import load_world

    world = load_world("village-v1")
    sim = VillageSim(world, 2, seed=3, max_ticks=30, scenario="none", record=True)
    rec = TraceRecorder(sim, scenario="manual", world=world.id, probe_rows=16)
    victim = 5
    player = sim.entity_names[0].index("player")
    for t in range(30):
        if t == 1:
            for b in range(2):
                sim.command(b, "player", "kill", target=victim)
        rec.before_step()
        sim.step(np.zeros((2, sim.N), np.int64))
        rec.after_step()
    trace = rec.finish()
    assert trace.ticks == 30 and trace.pos.shape == (31, 2, sim.E, 2)
    assert (trace.learned_tick == sim.state.learned_tick).all()
    deaths = trace.events["type"] == EventType.DEATH
    assert deaths.sum() == 2 and (trace.events["actor"][deaths] == player).all()
    step = int(trace.death_tick[0, victim])
    assert not trace.alive[step + 1, 0, victim] and trace.alive[step, 0, victim]
    witnesses = (trace.learned_from[0, :, victim] == -1) & (trace.known_culprit[0, :, victim] >= 0)
    assert witnesses.any()
    assert (trace.culprit_tick[0, witnesses, victim] == trace.learned_tick[0, witnesses, victim]).all()
    assert 0 < len(trace.probe_obs) <= 16 and trace.probe_obs.shape[1] == sim.obs.shape[-1]
    assert trace.personas.shape == (sim.N, len(trace.persona_cols))


# ------------------------------------------------------------------ hearsay that goes wrong (engine switch)
@pytest.mark.parametrize("error", [0.0, 1.0])
def test_rumour_error_makes_hearsay_name_someone_else(error: float) -> None:
    from engine.constants import Tuning
    from engine.scenarios import load_scenario, run_scenario
    from npc_brains.baselines import get_baseline
    from worlds import load_world

    trace = run_scenario(get_baseline("scripted", seed=0), load_scenario("kill-in-square"), load_world("village-v1"),
                         villages=6, seed=3, max_ticks=60, probe_rows=0, tuning=Tuning(rumour_error=error))
    r = trace_stats(trace).result()
    assert r["counts"]["hearsay_believers"] > 0
    if error == 0.0:
        assert r["hearsay_accuracy"] == pytest.approx(1.0)
    else:  # every culprit passed on is garbled, but a hearer can also see the killer for itself
        assert r["hearsay_accuracy"] < 0.5


# ------------------------------------------------------------------ intervals
def units_of(rows: list[dict[str, float]]) -> Stats:
    """A Stats whose villages have the given counts (every other count zero)."""
    st = Stats()
    st.units = np.array([[row.get(k, 0.0) for k in UNIT_COUNTS] for row in rows])
    return st


def test_intervals_resample_villages_and_are_reproducible() -> None:
    half = units_of([{"revenge_hit": 1, "revenge_eligible": 1}] * 20 + [{"revenge_eligible": 1}] * 20)
    low, high = half.intervals()["revenge_rate"]
    assert 0.25 < low < 0.5 < high < 0.75
    assert half.intervals() == half.intervals()  # a fixed seed: the same runs, the same interval
    every = units_of([{"mourn_hit": 2, "mourn_eligible": 2}] * 5)
    assert every.intervals()["mourning_rate"] == [1.0, 1.0]
    assert every.intervals()["fear_rate"] is None  # nobody eligible
    assert Stats().intervals()["revenge_rate"] is None


def test_a_villages_deaths_stay_together_and_stats_add_their_villages() -> None:
    b = Builder()
    for i in (1, 2):
        b.relate(0, i, 0.8, kin=True)
        b.learns(i, DEATH_STEP)
        b.traits[0, i, 1] = 0.9
    b.event(12, EventType.ATTACK, 1, PLAYER, cause=0)
    st = trace_stats(b.build(), MetricParams())
    row = dict(zip(UNIT_COUNTS, st.units[0], strict=True))
    assert st.units.shape[0] == 1 and row["revenge_hit"] == 1 and row["revenge_eligible"] == 2
    assert all(row[k] == st.n.get(k, 0.0) for k in UNIT_COUNTS)  # one village: its counts are the totals
    both = Stats()
    both += st
    both += st
    assert both.units.shape[0] == 2 and both.n["revenge_eligible"] == 4


def counts_of(**n: float) -> Stats:
    """A Stats whose totals are the given counts (one group, say a world)."""
    st = Stats()
    st.n.update(n)
    return st


def test_group_intervals_resample_whole_groups() -> None:
    # two kinds of world: every avenger strikes in one, none in the other; the villages inside a world cannot say
    # how the pooled rate moves with the worlds drawn, the groups' resampling does
    worlds = [counts_of(revenge_hit=10, revenge_eligible=10)] * 6 + [counts_of(revenge_eligible=10)] * 6
    low, high = group_intervals(worlds)["revenge_rate"]
    assert 0.15 < low < 0.5 < high < 0.85
    assert group_intervals(worlds) == group_intervals(worlds)  # a fixed seed
    alike = [counts_of(revenge_hit=3, revenge_eligible=4)] * 5
    assert group_intervals(alike)["revenge_rate"] == [0.75, 0.75]  # worlds alike: nothing to move
    assert group_intervals(alike)["fear_rate"] is None  # nobody eligible
    assert group_intervals([])["revenge_rate"] is None


def test_paired_intervals_draw_the_same_villages_for_both() -> None:
    mixed = units_of([{"revenge_hit": 1, "revenge_eligible": 1}] * 10 + [{"revenge_eligible": 1}] * 10)
    assert paired_intervals(mixed, mixed)["revenge_rate"] == [0.0, 0.0]  # the same villages: no difference at all
    every = units_of([{"revenge_hit": 1, "revenge_eligible": 1}] * 20)
    low, high = paired_intervals(every, mixed)["revenge_rate"]
    assert 0.25 < low < 0.5 < high < 0.75
    assert paired_intervals(every, mixed)["fear_rate"] is None  # nobody eligible
    with pytest.raises(ValueError, match="same villages"):
        paired_intervals(every, units_of([{"revenge_eligible": 1}] * 3))
