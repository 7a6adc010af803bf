"""The NPC minds of an external world: a one-village simulation whose bodies live in a game engine.

The game owns positions, health, who is alive and what its actors do; it reports attacks, deaths, who
witnessed them and conversations through public queues. `ExternalSim.tick` composes the engine's own phases
(engine/body.py, engine/mind.py) around them: the NPCs' activities (what each one means to do, which the
game reads back), coping, perception, news, appraisal, emotion decay, rewards and reaction labels, with the
game's events where the engine would resolve its own combat, and the game's witness lists deciding which
sightings count. There is no actor physics: the game moves its actors. Used by the bridge's sessions
(`village serve`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine import body, mind
from engine.constants import LETHAL_DAMAGE, Tuning
from engine.events import HOW_WITNESSED
from engine.observe import Observer
from engine.tick import TickContext
from engine.village import Village
from worlds import WorldSpec


def mind_tuning(base: Tuning | None = None) -> Tuning:
    """`base` (default: the engine's defaults) with no damage: the mind's simulation never harms bodies; the game
    resolves blows and reports health and deaths."""
    return replace(base or Tuning(), blow_damage=0.0, blow_damage_aggression=0.0, raider_damage=0.0)


LETHAL = LETHAL_DAMAGE  # damage of an injected death (as the engine's own killing blow)
NUDGE = 1e-6  # damage of an injected attack: registers the hit (fear, anger, interruption), harms nothing
GAME_KILL_PRIORITY = 2.0  # above any seeded blow priority (< 1): the game's killer takes the killing blow


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


class ExternalSim(Village):
    """The minds of one village whose bodies live in an external game.

    The game reports what happened by appending to three queues before `tick`: `injected_hits` (attacks and
    deaths, dealt where the engine deals its own blows), `injected_sightings` (who witnessed them: first-hand
    news of an injected death reaches exactly the listed witnesses, and they learn who is dangerous) and
    `injected_talks` (speaker, listener: news passes as in a TALK). The tick consumes them.
    """

    def __init__(self, spec: WorldSpec, seed: int, slots: int, tuning: Tuning | None = None):
        # tuning: the appraisal and rewards the policy was trained under (npc_brains.config.policy_tuning)
        super().__init__([spec], seed, slots=slots, tuning=mind_tuning(tuning), record=True, max_ticks=2**62)
        self.state = self.fresh_state()
        self.w.raid_probability[:] = 0.0  # raids are the game's business
        self.observer = Observer(self)
        self.obs, self.mask = self.observer.observe()
        self.injected_hits: list[InjectedHit] = []
        self.injected_sightings: list[InjectedSighting] = []
        self.injected_talks: list[tuple[int, int]] = []

    def tick(self, actions: np.ndarray) -> None:
        """One tick of the minds with the queued game events; the queues are consumed."""
        try:
            self._tick(np.asarray(actions, np.int64).reshape(1, self.N))
        finally:
            self.injected_hits.clear()
            self.injected_sightings.clear()
            self.injected_talks.clear()

    def _tick(self, actions: np.ndarray) -> None:
        # with witness lists the senses note threats in a buffer the lists then decide on
        ctx = mind.begin_tick(self, actions, threat_buffer=bool(self.injected_sightings))
        body.npcs_act(self, ctx, self.mask, self.observer.slot_entity)
        self._game_hits(ctx)  # no actor physics: the game moves its actors and reports their blows
        body.resolve_combat(self, ctx)
        mind.feel_attacks(self, ctx)
        mind.note_first_hand(self, ctx, self._listed_only(mind.perceive(self, ctx)))
        self._listed_witnesses(ctx)
        self._listed_sightings(ctx)
        mind.spread_news(self, ctx, *self._conversations(ctx))
        mind.appraise_and_decay(self, ctx)
        body.needs(self, ctx)
        mind.conclude(self, ctx)
        self.obs, self.mask = self.observer.observe()

    # ------------------------------------------------------------------ the game's phases
    def _game_hits(self, ctx: TickContext) -> None:
        """The game's attacks and deaths, dealt after the NPCs' own blows (in queue order)."""
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
                body.accumulate_hits(self, ctx, b, att, tgt, dmg)
                ctx.hits.add(b, att, tgt, np.full(1, -1, np.int64))
            else:
                ctx.damage[0, hit.target] += dmg[0]
            if hit.lethal:  # the game said who killed; no blow of this tick takes the credit
                ctx.hitter[0, hit.target] = hit.attacker
                ctx.hitter_prio[0, hit.target] = GAME_KILL_PRIORITY

    def _listed_only(self, rows: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...] | None:
        """First-hand news of an injected death with a witness list: only the listed witnesses saw it."""
        deaths = [seen for seen in self.injected_sightings if seen.kind == "death"]
        if rows is None or not deaths:
            return rows
        bb, ii, ee, culprit, how = rows
        keep = np.ones(len(bb), bool)
        for seen in deaths:
            first_hand = (ee == seen.subject) & (how == HOW_WITNESSED)
            keep &= ~(first_hand & ~seen.witnesses[np.clip(ii, 0, self.N - 1)])
        return bb[keep], ii[keep], ee[keep], culprit[keep], how[keep]

    def _listed_witnesses(self, ctx: TickContext) -> None:
        """Listed witnesses of an injected death learn it first-hand (with the killer), wherever they were."""
        s, N = self.state, self.N
        for seen in self.injected_sightings:
            v = seen.subject
            if seen.kind != "death" or s.alive[0, v]:
                continue  # not a death, or it did not happen this tick
            who = np.flatnonzero(seen.witnesses & s.alive[0, :N] & ~s.knows_death[0, :N, v])
            if len(who):
                n = len(who)
                mind.note_news(self, ctx, np.zeros(n, np.int64), who, np.full(n, v), np.full(n, int(s.killer[0, v])),
                               np.full(n, -1, np.int64), np.full(n, HOW_WITNESSED, np.int64))

    def _listed_sightings(self, ctx: TickContext) -> None:
        """Who learns this tick that an attacker (or killer) is dangerous: exactly the listed witnesses and the
        attacked, whatever the senses noticed; then what was noticed becomes knowledge."""
        s, N = self.state, self.N
        seen_threat = ctx.seen_threat
        if seen_threat is s.knows_threat:
            return
        for seen in self.injected_sightings:
            culprit = seen.culprit if seen.kind == "death" else seen.subject
            if culprit < 0:
                continue
            unlisted = seen_threat[0, :N, culprit] & ~seen.witnesses
            if seen.kind == "attack" and seen.target < N:
                unlisted[seen.target] = False  # the attacked always knows
            seen_threat[0, unlisted, culprit] = False
            watchers = seen.witnesses & s.alive[0, :N]
            if culprit < N:
                watchers[culprit] = False
            seen_threat[0, watchers, culprit] = True
        s.knows_threat |= seen_threat

    def _conversations(self, ctx: TickContext) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The conversations starting this tick and whom they address: the NPCs' own, and the game's talks."""
        if not self.injected_talks:
            return None, None
        first = ctx.talking_first | ctx.warning_first
        targets = self.state.target.copy()
        for speaker, listener in self.injected_talks:
            first[0, speaker] = True
            targets[0, speaker] = listener
        return first, targets


__all__ = ["ExternalSim", "InjectedHit", "InjectedSighting", "LETHAL", "NUDGE", "mind_tuning"]
