"""The NPC minds of an external world: a one-village simulation whose bodies live in a game engine.

The game owns positions, health and who is alive; this simulation runs perception, news, appraisal, emotion
decay and reaction labels on them with the engine's own code, and takes the game's events (attacks, deaths,
witnesses, conversations) through public queues. Used by the bridge's sessions (`village serve`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.constants import Tuning
from engine.events import HOW_WITNESSED
from engine.sim import VillageSim
from worlds import WorldSpec


def mind_tuning(base: Tuning | None = None) -> Tuning:
    """`base` (default: the engine's defaults) with no damage: the mind's simulation never harms bodies; the game
    resolves blows and reports health and deaths."""
    return replace(base or Tuning(), blow_damage=0.0, blow_damage_aggression=0.0, raider_damage=0.0)


LETHAL = 1e3  # damage of an injected death (as the engine's own killing blow)
NUDGE = 1e-6  # damage of an injected attack: registers the hit (fear, anger, interruption), harms nothing


@dataclass
class InjectedHit:
    """An external attack or death, applied in the tick's combat resolution."""

    attacker: int  # entity, -1: unknown (a death of unknown cause)
    target: int
    lethal: bool
    pos: np.ndarray | None  # where the victim died (lethal hits)


@dataclass
class InjectedSighting:
    """An explicit witness list for an injected death or attack (replaces the engine's sight test)."""

    kind: str  # "death" | "attack"
    subject: int  # the victim (death) or the attacker (attack)
    culprit: int  # the killer (death), -1 unknown; the attacker (attack)
    target: int  # the attacked (attack) or the victim (death)
    witnesses: np.ndarray  # (N,) bool


class ExternalSim(VillageSim):
    """A one-village VillageSim whose bodies live in an external game.

    The game reports what happened by appending to three queues before `tick`: `injected_hits` (attacks and
    deaths, applied where the tick resolves its own combat, just before damage is dealt), `injected_sightings`
    (who witnessed them: first-hand news of an injected death reaches exactly the listed witnesses, and they
    learn who is dangerous) and `injected_talks` (speaker, listener: news passes as in a TALK). They are consumed
    by the tick. This class lives in the engine because it hooks the tick's internals (combat resolution, news
    recording and spreading); the bridge's sessions (bridge/sessions.py) are its user, and
    tests/bridge/test_sessions.py pins its behaviour.
    """

    def __init__(self, spec: WorldSpec, seed: int, slots: int, tuning: Tuning | None = None):
        # tuning: the appraisal and rewards the policy was trained under (npc_brains.config.policy_tuning)
        super().__init__(spec, 1, seed, slots=slots, max_ticks=2**62, scenario="none", tuning=mind_tuning(tuning),
                         record=True)
        self.w.raid_probability[:] = 0.0  # raids are the game's business
        self.injected_hits: list[InjectedHit] = []
        self.injected_sightings: list[InjectedSighting] = []
        self.injected_talks: list[tuple[int, int]] = []
        self._before_threat = self.state.knows_threat.copy()

    def tick(self, actions: np.ndarray) -> None:
        """One engine step with the queued injections; they are consumed."""
        self._before_threat = self.state.knows_threat.copy()
        try:
            self.step(np.asarray(actions, np.int64).reshape(1, self.N))
        finally:
            self.injected_hits.clear()
            self.injected_sightings.clear()
            self.injected_talks.clear()

    def _step_actors(self, damage, hitter, hitter_prio, hits) -> None:  # engine hook (combat)
        super()._step_actors(damage, hitter, hitter_prio, hits)
        s = self.state
        b = np.zeros(1, np.int64)
        for hit in self.injected_hits:
            if not s.alive[0, hit.target]:
                continue
            if hit.lethal and hit.pos is not None:
                s.pos[0, hit.target] = hit.pos
            dmg = np.array([LETHAL if hit.lethal else NUDGE], np.float32)
            tgt = np.array([hit.target])
            if hit.attacker >= 0:
                att = np.array([hit.attacker])
                self._accumulate_hits(damage, hitter, hitter_prio, b, att, tgt, dmg)
                hits.append((b, att, tgt, np.full(1, -1, np.int64)))
            else:
                damage[0, hit.target] += dmg[0]
            if hit.lethal:  # the game said who killed; no blow of this tick takes the credit
                hitter[0, hit.target] = hit.attacker
                hitter_prio[0, hit.target] = 2.0

    def _note_news(self, bb, ii, ee, culprit, sender, how, **kwargs):  # engine hook (who learns what)
        """Drop first-hand 'witnessed' news of an injected death for NPCs not on its witness list."""
        deaths = [seen for seen in self.injected_sightings if seen.kind == "death"]
        if deaths and len(bb):
            how_k = np.broadcast_to(np.asarray(how), np.shape(bb))
            sender_k = np.broadcast_to(np.asarray(sender), np.shape(bb))
            keep = np.ones(len(bb), bool)
            for seen in deaths:
                first_hand = (ee == seen.subject) & (how_k == HOW_WITNESSED) & (sender_k == -1)
                keep &= ~(first_hand & ~seen.witnesses[np.clip(ii, 0, self.N - 1)])
            if not keep.all():
                bb, ii, ee = bb[keep], ii[keep], ee[keep]
                culprit = np.broadcast_to(np.asarray(culprit), keep.shape)[keep]
                sender, how = sender_k[keep], how_k[keep]
                if isinstance(kwargs.get("death_known"), np.ndarray):
                    kwargs["death_known"] = kwargs["death_known"][keep]
        return super()._note_news(bb, ii, ee, culprit, sender, how, **kwargs)

    def _add_witnesses(self) -> None:
        """Listed witnesses of an injected death learn it first-hand (with the killer), wherever they were."""
        s, N = self.state, self.N
        for seen in self.injected_sightings:
            v = seen.subject
            if seen.kind != "death" or s.alive[0, v]:
                continue  # not a death, or it did not happen this tick
            who = np.flatnonzero(seen.witnesses & s.alive[0, :N] & ~s.knows_death[0, :N, v])
            if len(who):
                n = len(who)
                self._note_news(np.zeros(n, np.int64), who, np.full(n, v), np.full(n, int(s.killer[0, v])),
                                np.full(n, -1, np.int64), np.full(n, HOW_WITNESSED, np.int64))

    def _spread_news(self, talking_first, *args, **kwargs) -> None:  # engine hook (news)
        self._add_witnesses()
        self._apply_sightings()
        if not self.injected_talks:
            super()._spread_news(talking_first, *args, **kwargs)
            return
        s = self.state
        talking_first = talking_first.copy()
        saved = {a: int(s.target[0, a]) for a, _ in self.injected_talks}
        for a, t in self.injected_talks:
            talking_first[0, a] = True
            s.target[0, a] = t
        try:
            super()._spread_news(talking_first, *args, **kwargs)
        finally:
            for a, t in saved.items():
                s.target[0, a] = t

    def _apply_sightings(self) -> None:
        """Who knows the attacker (or killer) is dangerous: exactly the listed witnesses and the attacked.

        Runs after the tick's perception and before news and appraisal. (Which NPCs learned of a death
        first-hand is decided in `_note_news` and `_add_witnesses`.)"""
        s, N = self.state, self.N
        for seen in self.injected_sightings:
            culprit = seen.culprit if seen.kind == "death" else seen.subject
            if culprit < 0:
                continue
            fresh = s.knows_threat[0, :N, culprit] & ~self._before_threat[0, :N, culprit]
            revert = fresh & ~seen.witnesses
            if seen.kind == "attack" and seen.target < N:
                revert[seen.target] = False  # the attacked always knows
            s.knows_threat[0, revert, culprit] = False
            watchers = seen.witnesses & s.alive[0, :N]
            if culprit < N:
                watchers[culprit] = False
            s.knows_threat[0, watchers, culprit] = True


__all__ = ["ExternalSim", "InjectedHit", "InjectedSighting", "LETHAL", "NUDGE", "mind_tuning"]
