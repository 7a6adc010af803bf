"""What the inspector panel shows for one NPC, read from the engine state (no pygame here).

Rows carry an optional bar (value and range) and an optional edit key; the renderer draws them and
the app turns a click on an editable bar into a world edit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.constants import ACTION_NAMES, REACTION_NAMES, EventType
from engine.events import HOW_NAMES, Event, Message
from worlds import TRAIT_NAMES

if TYPE_CHECKING:
    from engine.sim import VillageSim
    from worlds import WorldSpec

EMOTION_BAR_MAX = 2.0  # emotions are capped at 3; most live below 2
SHOWN_TARGETS = 5
RECENT_REACTIONS = 6


@dataclass(frozen=True)
class Row:
    label: str
    text: str = ""
    bar: float | None = None
    lo: float = 0.0
    hi: float = 1.0
    edit: tuple[str, str] | None = None  # ("trait", name) | ("affinity", other) | ("role", "")
    color: tuple[int, int, int] | None = None


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)


def _names(sim: VillageSim) -> list[str]:
    return sim.entity_names[0]


def inspect_npc(sim: VillageSim, spec: WorldSpec, i: int, *, news: Mapping[tuple[int, int], Message] | None = None,
                recent: Sequence[Event] | None = None) -> list[Section]:
    """The inspector's sections for NPC `i` of village 0.

    `news` ((receiver, subject) -> first message) and `recent` (i's latest reaction events, oldest first)
    are indexes the sandbox keeps as the log grows; without them the log is scanned.
    """
    s, names = sim.state, _names(sim)
    npc = spec.npcs[i]
    head = Section(f"{npc.name}")
    head.rows.append(Row("role", f"{npc.role}  (click to change)", edit=("role", "")))
    head.rows.append(Row("home", npc.home))
    if s.alive[0, i]:
        max_h = float(sim.w.max_health[0, i])
        head.rows.append(Row("health", f"{float(s.health[0, i]):.2f} / {max_h:.2f}", bar=float(s.health[0, i]),
                             hi=max(max_h, 1e-6), color=(200, 70, 70)))
        act = int(s.activity[0, i])
        doing = ACTION_NAMES[act] if 0 <= act < len(ACTION_NAMES) else str(act)
        tgt = int(s.target[0, i])
        if tgt >= 0 and act >= 5:
            doing += f" {names[tgt]}"
        if not bool(s.busy[0, i]):
            doing += " (deciding)"
        elif bool(s.performing[0, i]):
            doing += " (there)"
        head.rows.append(Row("doing", doing))
        label = int(sim.reaction[0, i])
        if label:
            head.rows.append(Row("reaction", REACTION_NAMES[label], color=(250, 210, 90)))
    else:
        killer = int(s.killer[0, i])
        by = f", killed by {names[killer]}" if killer >= 0 else ""
        head.rows.append(Row("status", f"dead since tick {int(s.death_tick[0, i])}{by}", color=(200, 90, 90)))

    traits = Section("traits (click or wheel on a bar)")
    for k, trait in enumerate(TRAIT_NAMES):
        value = float(sim.w.traits[0, i, k])
        traits.rows.append(Row(trait, f"{value:.2f}", bar=value, edit=("trait", trait), color=(120, 170, 230)))

    needs = Section("needs")
    needs.rows.append(Row("hunger", f"{float(s.hunger[0, i]):.2f}", bar=float(s.hunger[0, i]),
                          color=(220, 150, 60)))
    needs.rows.append(Row("energy", f"{float(s.energy[0, i]):.2f}", bar=float(s.energy[0, i]),
                          color=(110, 200, 110)))
    needs.rows.append(Row("social", f"{float(s.social[0, i]):.2f}", bar=float(s.social[0, i]),
                          color=(200, 130, 200)))

    emotions = Section("emotions")
    anger, fear = s.anger[0, i], s.fear[0, i]
    for label, value, color in (("grief", s.grief[0, i], (80, 140, 240)), ("anger", anger.max(), (230, 60, 60)),
                                ("fear", fear.max(), (190, 120, 240)), ("joy", s.joy[0, i], (250, 210, 60))):
        emotions.rows.append(Row(label, f"{float(value):.2f}", bar=float(value), hi=EMOTION_BAR_MAX, color=color))
    for label, per_target, color in (("anger at", anger, (230, 60, 60)), ("fear of", fear, (190, 120, 240))):
        top = [int(e) for e in np.argsort(-per_target)[:SHOWN_TARGETS] if per_target[e] > 0.01]
        for e in top:
            emotions.rows.append(Row(f"{label} {names[e]}", f"{float(per_target[e]):.2f}", bar=float(per_target[e]),
                                     hi=EMOTION_BAR_MAX, color=color))

    knows = Section("knows")
    for e in np.flatnonzero(s.knows_death[0, i]):
        e = int(e)
        culprit = int(s.known_culprit[0, i, e])
        by = f"by {names[culprit]}" if culprit >= 0 else "culprit unknown"
        source = _source(sim, i, e, news)
        knows.rows.append(Row(f"{names[e]} dead", f"{by}; {source}, tick {int(s.learned_tick[0, i, e])}"))
    threats = [names[int(e)] for e in np.flatnonzero(s.knows_threat[0, i])]
    if threats:
        knows.rows.append(Row("dangerous", ", ".join(threats)))
    if not knows.rows:
        knows.rows.append(Row("", "nothing unusual"))

    ties = Section("ties (shift+click an NPC: add; bar: affinity)")
    for rel in spec.relationships:
        if npc.name not in (rel.a, rel.b):
            continue
        other = rel.b if rel.a == npc.name else rel.a
        color = (110, 200, 110) if rel.affinity >= 0 else (220, 80, 80)
        ties.rows.append(Row(f"{other}", f"{rel.kind} {rel.affinity:+.2f}", bar=rel.affinity, lo=-1.0, hi=1.0,
                             edit=("affinity", other), color=color))
    if not ties.rows:
        ties.rows.append(Row("", "no ties"))

    reactions = Section("recent reactions")
    if recent is None:
        recent = [e for e in sim.log.events if e.village == 0 and e.type == EventType.REACTION and e.actor == i]
    shown = list(recent)[::-1][:RECENT_REACTIONS]
    for e in shown:
        target = names[e.target] if 0 <= e.target < len(names) else ""
        reactions.rows.append(Row(f"tick {e.tick}", f"{e.reaction_name} {target} ({e.intensity:.2f})"))
    if not shown:
        reactions.rows.append(Row("", "none yet"))
    return [head, traits, needs, emotions, knows, ties, reactions]


def _source(sim: VillageSim, i: int, e: int, news: Mapping[tuple[int, int], Message] | None) -> str:
    """How NPC i learned of e's death: told or warned by whom, or witnessed / found the body."""
    names = _names(sim)
    if news is not None:
        first = news.get((i, e))
    else:
        first = next((m for m in sim.log.messages if m.village == 0 and m.receiver == i and m.subject == e), None)
    if first is not None:
        return f"{HOW_NAMES[first.how]} by {names[first.sender]}" if first.sender >= 0 else HOW_NAMES[first.how]
    sender = int(sim.state.learned_from[0, i, e])
    if sender >= 0:
        return f"told by {names[sender]}"
    return "saw it or found the body"
