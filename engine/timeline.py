"""Readable timelines of one village run: who died, who saw it, who learned when and from whom, and how
each NPC reacted (with the reaction label and the event that caused it), plus a summary.

Pure Python + numpy (no torch, pygame or zmq): the sandbox and the evaluation can render the same
timeline from a recorded `VillageSim` log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.constants import START_TICK_OF_DAY, TICKS_PER_DAY, EventType, Reaction, Tuning, close_relations
from engine.events import HOW_FOUND_BODY, HOW_NAMES, HOW_TOLD, HOW_WARNED, HOW_WITNESSED, Event, Message
from engine.policy_api import Policy
from engine.sim import VillageSim
from worlds import Location, WorldSpec

EMOTIONS: tuple[str, ...] = ("grief", "anger", "fear", "joy")
# which emotion a reaction's intensity measures (labels not listed carry no meaningful intensity)
_INTENSITY_OF = {
    Reaction.MOURNING: "grief",
    Reaction.REVENGE: "anger",
    Reaction.FEAR: "fear",
    Reaction.GLOATING: "joy",
    Reaction.ALARM: "fear",
}


def clock(tick: int) -> str:
    """Game clock of a tick: tick 0 is 06:00 on day 1, one tick is 10 minutes ('11:00', 'day 2 00:10')."""
    total = int(tick) + START_TICK_OF_DAY
    day, of_day = divmod(total, TICKS_PER_DAY)
    minutes = of_day * (24 * 60 // TICKS_PER_DAY)
    text = f"{minutes // 60:02d}:{minutes % 60:02d}"
    return text if day == 0 else f"day {day + 1} {text}"


@dataclass
class Timeline:
    """What one recorded village run left behind (village 0 of its simulation)."""

    world_id: str
    world_name: str
    policy: str
    seed: int | None
    ticks: int
    n_npcs: int
    names: list[str]  # entity names: NPCs then actors
    events: list[Event]
    messages: list[Message]
    locations: tuple[Location, ...]
    knows_death: np.ndarray  # (N, E) at the end
    alive: np.ndarray  # (E,) at the end
    close: np.ndarray  # (N, N) close relations (affinity >= close threshold, or kin/spouse)
    emotions: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (ticks + 1, N), tick 0 first
    notes: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)  # what the scenario sets up ("at tick 30 (11:00) ...")
    _by_id: dict[int, Event] = field(default_factory=dict, init=False, repr=False, compare=False)

    def name(self, entity: int) -> str:
        return self.names[entity] if 0 <= entity < len(self.names) else "someone"

    def place(self, x: float, y: float) -> str:
        """'at the Well' / 'near Miller House', from the nearest location of the map."""
        if not self.locations:
            return f"at ({x:.0f}, {y:.0f})"
        pts = np.array([(loc.x, loc.y) for loc in self.locations])
        d = np.hypot(pts[:, 0] - x, pts[:, 1] - y)
        k = int(np.argmin(d))
        loc = self.locations[k]
        article = "" if loc.kind == "home" else "the "  # "at Miller House", "at the Well"
        return f"{'at' if d[k] <= loc.radius + 1.0 else 'near'} {article}{loc.name}"

    def event(self, event_id: int) -> Event | None:
        if len(self._by_id) != len(self.events):
            self._by_id = {e.id: e for e in self.events}
        return self._by_id.get(event_id)

    @property
    def deaths(self) -> list[Event]:
        return [e for e in self.events if e.type == EventType.DEATH]


def run_timeline(world: WorldSpec, policy: Policy, *, ticks: int = 144, seed: int | None = 0,
                 scenario: str = "world", slots: int = 4, deterministic: bool = True,
                 tuning: Tuning | None = None) -> Timeline:
    """Run one village of `world` for `ticks` with `policy` choosing every NPC's action, recording the log."""
    if ticks < 1:
        raise ValueError(f"ticks must be >= 1, got {ticks}")
    sim = VillageSim(world, 1, seed, slots=slots, max_ticks=ticks, scenario=scenario, tuning=tuning,
                     record=True)
    N = sim.N
    traces = {name: np.zeros((ticks + 1, N), np.float32) for name in EMOTIONS}

    def snapshot(t: int) -> None:
        s = sim.state
        traces["grief"][t] = s.grief[0]
        traces["anger"][t] = s.anger[0].max(-1)
        traces["fear"][t] = s.fear[0].max(-1)
        traces["joy"][t] = s.joy[0]

    plan = _scenario_plan(sim, world, scenario)
    snapshot(0)
    for t in range(1, ticks + 1):
        out = policy.act(sim.obs[0], sim.mask[0], deterministic=deterministic)
        sim.step(np.asarray(out.actions).reshape(1, N))
        snapshot(t)
    s = sim.state
    close = close_relations(sim.w.base_affinity[0], sim.w.kin[0])  # as the emergence metrics count them
    np.fill_diagonal(close, False)
    return Timeline(
        world_id=world.id,
        world_name=world.name,
        policy=getattr(policy, "name", type(policy).__name__),
        seed=seed,
        ticks=ticks,
        n_npcs=N,
        names=sim.entity_names[0],
        events=list(sim.log.events),
        messages=list(sim.log.messages),
        locations=world.locations,
        knows_death=s.knows_death[0].copy(),
        alive=s.alive[0].copy(),
        close=close,
        emotions=traces,
        plan=plan,
    )


def _scenario_plan(sim: VillageSim, world: WorldSpec, scenario: str) -> list[str]:
    """Readable list of what the scenario will make the non-NPC actors do."""
    if scenario == "world":
        return [f"at tick {ev.tick} ({clock(ev.tick)}) {ev.actor} sets out to {ev.type}"
                + (f" {ev.target}" if ev.target else "") for ev in world.events]
    if scenario in ("random_kill", "mixed"):
        return [f"at tick {int(tick)} ({clock(int(tick))}) the player sets out to kill {sim.entity_names[0][victim]}"
                for tick, victim in zip(sim.driver.kill_tick[0], sim.driver.kill_victim[0], strict=True) if tick >= 0]
    return []


# ---------------------------------------------------------------------------------------------- lines
def _prefix(tick: int) -> str:
    return f"tick {tick:>3} ({clock(tick)})"


def _event_text(tl: Timeline, e: Event) -> str | None:
    """One sentence for an event, or None for events folded into another line."""
    actor, target = tl.name(e.actor), tl.name(e.target)
    cause = tl.event(e.cause) if e.cause >= 0 else None
    cause_text = f" <- {cause.type.name.lower()} #{cause.id}" if cause is not None else ""
    if e.type == EventType.DEATH:
        who = f"{actor} killed {target}" if e.actor >= 0 else f"{target} died"
        return f"{who} {tl.place(e.x, e.y)} [death #{e.id}]"
    if e.type == EventType.ATTACK:
        killing_blow = any(d.type == EventType.DEATH and d.tick == e.tick and d.actor == e.actor
                           and d.target == e.target for d in tl.events)
        if killing_blow:
            return None
        kind = " (revenge blow)" if cause is not None and cause.type == EventType.DEATH else ""
        return f"{actor} struck {target}{kind} [attack #{e.id}]{cause_text}"
    if e.type == EventType.REACTION:
        label = Reaction(e.reaction)
        measure = _INTENSITY_OF.get(label)
        amount = f" ({measure} {e.intensity:.2f})" if measure else ""
        victim = tl.name(cause.target) if cause is not None and cause.type == EventType.DEATH else None
        if label == Reaction.MOURNING:
            what = f"mourning at {target}'s body"
        elif label == Reaction.REVENGE:
            what = f"takes revenge on {target}" + (f" for {victim}" if victim else "")
        elif label == Reaction.FEAR:
            what = f"flees from {target}"
        elif label == Reaction.CONSOLING:
            what = f"consoling {target}" + (f" over {victim}" if victim else "")
        elif label == Reaction.ALARM:
            what = f"warns {target} of danger"
        elif label == Reaction.GLOATING:
            what = f"gloats over {target}'s death"
        elif label == Reaction.DEFENSE:
            what = f"fights back against {target}"
        elif label == Reaction.AGGRESSION:
            what = f"attacks {target}"
        else:
            what = f"{label.name.lower()} toward {target}"
        return f"{actor} {what}{amount} [{label.name.lower()}]{cause_text}"
    if e.type == EventType.RAID_START:
        return f"raiders appear {tl.place(e.x, e.y)}"
    if e.type == EventType.GIFT:
        return f"{actor} gave {target} a gift"
    return f"{e.type.name.lower()}: {actor} -> {target}"


def _message_text(tl: Timeline, m: Message, first: bool) -> str | None:
    receiver, subject = tl.name(m.receiver), tl.name(m.subject)
    if m.how == HOW_WITNESSED or m.receiver == m.subject:
        return None  # listed with the death
    if m.how == HOW_FOUND_BODY:
        return f"{receiver} found {subject}'s body"
    sender = tl.name(m.sender)
    if not first:  # the receiver already knew of the death: this message named the culprit
        return f"{receiver} learned from {sender} that {tl.name(m.culprit)} killed {subject}"
    by = f" (killed by {tl.name(m.culprit)})" if m.culprit >= 0 else ""
    return f"{receiver} learned of {subject}'s death{by} from {sender} ({HOW_NAMES[m.how]})"


def timeline_lines(tl: Timeline) -> list[str]:
    """The run as readable lines, in time order: deaths (with witnesses), news, reactions, blows."""
    entries: list[tuple[int, int, int, str]] = []  # (tick, kind order, sequence, line)
    witnesses: dict[int, list[str]] = {}
    for m in tl.messages:
        if m.how == HOW_WITNESSED:
            witnesses.setdefault(m.subject, []).append(tl.name(m.receiver))
    order = {EventType.DEATH: 0, EventType.ATTACK: 1, EventType.RAID_START: 1, EventType.REACTION: 3}
    for seq, e in enumerate(tl.events):
        text = _event_text(tl, e)
        if text is None:
            continue
        entries.append((e.tick, order.get(e.type, 4), seq, f"{_prefix(e.tick)} {text}"))
        if e.type == EventType.DEATH:
            seen = witnesses.get(e.target, [])
            line = f"{' ' * 20}witnessed by {', '.join(seen)}" if seen else f"{' ' * 20}no one saw it"
            entries.append((e.tick, 0, seq, line))
    known: set[tuple[int, int]] = set()
    for seq, m in enumerate(tl.messages):
        first = (m.receiver, m.subject) not in known
        known.add((m.receiver, m.subject))
        text = _message_text(tl, m, first)
        if text is not None:
            entries.append((m.tick, 2, len(tl.events) + seq, f"{_prefix(m.tick)} {text}"))
    entries.sort(key=lambda x: (x[0], x[1], x[2]))
    return [line for *_, line in entries]


# ---------------------------------------------------------------------------------------------- summary
def _longest_chain(tl: Timeline) -> list[int]:
    """Event ids of the longest chain of cause links, first cause first."""
    chains: dict[int, list[int]] = {}

    def chain_of(e: Event, seen: frozenset[int]) -> list[int]:
        if e.id in chains:
            return chains[e.id]
        cause = tl.event(e.cause) if e.cause >= 0 and e.cause not in seen else None
        head = chain_of(cause, seen | {e.id}) if cause is not None else []
        chains[e.id] = [*head, e.id]
        return chains[e.id]

    best: list[int] = []
    for e in sorted(tl.events, key=lambda ev: ev.id):  # causes come first, so the recursion stays shallow
        chain = chain_of(e, frozenset())
        if len(chain) > len(best):
            best = chain
    return best


def _news_hops(tl: Timeline, subject: int) -> int:
    """How many tellings the longest path of this death's news took (0: only witnesses knew)."""
    hops: dict[int, int] = {}
    for m in tl.messages:
        if m.subject != subject or m.receiver in hops or m.receiver == subject:
            continue
        if m.how in (HOW_TOLD, HOW_WARNED):
            hops[m.receiver] = hops.get(m.sender, 0) + 1
        else:
            hops[m.receiver] = 0
    return max(hops.values(), default=0)


def summarize(tl: Timeline) -> dict[str, Any]:
    """Counts behind the timeline: who knew by the end, reactions by type and by NPC, the longest chain."""
    N = tl.n_npcs
    deaths = []
    for d in tl.deaths:
        v = d.target
        how = Counter(HOW_NAMES[m.how] for m in tl.messages
                      if m.subject == v and m.receiver != v and _first_message(tl, m))
        others = [i for i in range(N) if i != v]
        knew = [tl.names[i] for i in others if tl.knows_death[i, v]]
        close = [tl.names[i] for i in np.flatnonzero(tl.close[v])] if v < N else []
        deaths.append({
            "id": d.id,
            "tick": d.tick,
            "clock": clock(d.tick),
            "victim": tl.name(v),
            "killer": tl.name(d.actor) if d.actor >= 0 else None,
            "place": tl.place(d.x, d.y),
            "witnesses": [tl.name(m.receiver) for m in tl.messages
                          if m.subject == v and m.how == HOW_WITNESSED],
            "knew_by_end": len(knew),
            "never_learned": [tl.names[i] for i in others if not tl.knows_death[i, v]],
            "villagers": len(others),
            "learned_by": dict(how),
            "close_relations": close,
            "news_hops": _news_hops(tl, v),
        })
    reactions = [e for e in tl.events if e.type == EventType.REACTION and e.reaction != Reaction.NONE]
    by_type = Counter(Reaction(e.reaction).name.lower() for e in reactions)
    by_npc: dict[str, dict[str, int]] = {}
    for e in reactions:
        per = by_npc.setdefault(tl.name(e.actor), {})
        label = Reaction(e.reaction).name.lower()
        per[label] = per.get(label, 0) + 1
    revenge_blows = sum(1 for e in tl.events if e.type == EventType.ATTACK and e.cause >= 0
                        and (c := tl.event(e.cause)) is not None and c.type == EventType.DEATH)
    chain = _longest_chain(tl)
    return {
        "world": tl.world_id,
        "policy": tl.policy,
        "seed": tl.seed,
        "ticks": tl.ticks,
        "deaths": deaths,
        "reactions": dict(sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))),
        "by_npc": {name: by_npc[name] for name in tl.names if name in by_npc},
        "revenge_blows": revenge_blows,
        "chain_length": len(chain),
        "chain": chain,
    }


def _first_message(tl: Timeline, m: Message) -> bool:
    for other in tl.messages:
        if other.receiver == m.receiver and other.subject == m.subject:
            return other is m
    return False


def summary_lines(tl: Timeline, summary: dict[str, Any] | None = None) -> list[str]:
    s = summary if summary is not None else summarize(tl)
    lines = [f"Summary ({s['ticks']} ticks, policy {s['policy']}):"]
    if not s["deaths"]:
        lines.append("  no one died")
    for d in s["deaths"]:
        killer = f" by {d['killer']}" if d["killer"] else ""
        learned = ", ".join(f"{n} {how}" for how, n in d["learned_by"].items()) or "nobody learned of it"
        lines.append(f"  {d['victim']} killed{killer} at tick {d['tick']} ({d['clock']}): "
                     f"{d['knew_by_end']} of {d['villagers']} villagers knew by the end ({learned}); "
                     f"news travelled {d['news_hops']} hop(s)")
        unaware_close = [n for n in d["close_relations"] if n in d["never_learned"]]
        if unaware_close:
            lines.append(f"    close relations who never learned: {', '.join(unaware_close)}")
    if s["reactions"]:
        lines.append("  reactions: " + ", ".join(f"{label} {n}" for label, n in s["reactions"].items()))
        for name, per in s["by_npc"].items():
            lines.append(f"    {name}: " + ", ".join(f"{label} x{n}" for label, n in per.items()))
    else:
        lines.append("  reactions: none")
    lines.append(f"  revenge blows: {s['revenge_blows']}")
    chain = " -> ".join(_chain_step(tl, i) for i in s["chain"])
    lines.append(f"  longest cause chain: {s['chain_length']} event(s)" + (f": {chain}" if s["chain"] else ""))
    return lines


_REACTION_PREPOSITION = {Reaction.MOURNING: "for", Reaction.REVENGE: "on", Reaction.FEAR: "of",
                         Reaction.CONSOLING: "", Reaction.ALARM: "about", Reaction.GLOATING: "over",
                         Reaction.DEFENSE: "against", Reaction.AGGRESSION: "against"}


def _chain_step(tl: Timeline, event_id: int) -> str:
    e = tl.event(event_id)
    if e is None:
        return f"#{event_id}"
    # each step says who did what to whom: "player death #1" read as the player's own death
    actor, target = tl.name(e.actor), tl.name(e.target)
    if e.type == EventType.DEATH:
        what = f"{actor} killed {target}" if e.actor >= 0 else f"{target} died"
    elif e.type == EventType.ATTACK:
        what = f"{actor} attacked {target}"
    elif e.type == EventType.REACTION:
        label = Reaction(e.reaction).name.lower()
        towards = _REACTION_PREPOSITION.get(Reaction(e.reaction), "towards")
        whom = " ".join(w for w in (towards, target) if w)
        what = f"{actor} {label}" + (f" {whom}" if e.target >= 0 and e.target != e.actor else "")
    else:
        what = f"{actor} {e.type.name.lower()}" + (f" {target}" if e.target >= 0 else "")
    return f"{what} #{e.id}"


# ---------------------------------------------------------------------------------------------- JSON
def timeline_dict(tl: Timeline, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The timeline as JSON-able data, with entity names resolved."""

    def name_or_none(i: int) -> str | None:
        return tl.name(i) if i >= 0 else None

    events = []
    for e in tl.events:
        row = e.as_dict()
        row.update(clock=clock(e.tick), actor_name=name_or_none(e.actor), target_name=name_or_none(e.target),
                   place=tl.place(e.x, e.y))
        events.append(row)
    messages = [
        {"tick": m.tick, "clock": clock(m.tick), "sender": name_or_none(m.sender),
         "receiver": tl.name(m.receiver), "subject": tl.name(m.subject), "culprit": name_or_none(m.culprit),
         "how": HOW_NAMES[m.how]}
        for m in tl.messages
    ]
    return {
        "world": {"id": tl.world_id, "name": tl.world_name},
        "policy": tl.policy,
        "seed": tl.seed,
        "ticks": tl.ticks,
        "npcs": tl.names[: tl.n_npcs],
        "actors": tl.names[tl.n_npcs:],
        "notes": list(tl.notes),
        "plan": list(tl.plan),
        "lines": timeline_lines(tl),
        "events": events,
        "messages": messages,
        "emotions": {k: np.round(v, 3).T.tolist() for k, v in tl.emotions.items()},  # [npc][tick]
        "summary": summary if summary is not None else summarize(tl),
    }
