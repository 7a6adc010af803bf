"""What are a death's causal chains made of? The events of each trigger death's tree, by depth and kind.

`chain_length` (docs/emergence.md) is the deepest level of the tree of events reached from a trigger death along
the log's cause links. This probe builds the same trees (`engine.metrics.chain_stats`) and counts their events
per depth and kind (a reaction's label; an ATTACK blow or a DEATH with who struck whom, a villager or an actor
such as the player), per trigger death, so two policies' chains can be compared level by level: which events
make the untrained network's chains deeper, which the trained one's.

    python bench/chain_anatomy.py --policy default --world generated:48:10000 --villages 8
    python bench/chain_anatomy.py --policy default --world generated:48:10000 --villages 8 --untrained

It also reports, per village run, the first villager who set out to strike another villager and what it knew
then (`FirstFeudBlows`): whether feuds begin with villagers who take the killer's avenger for a threat.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]  # the repo, bench/

from _probe_common import add_probe_args, add_untrained_arg, probe_policy, read_probe_args, tick_progress  # noqa: E402

from engine.constants import REACTION_NAMES, EventType, Reaction  # noqa: E402
from engine.metrics import Stats, cause_parents, chain_stats, trigger_deaths  # noqa: E402


def _kind(trace: Any, row: int) -> str:
    ev = trace.events
    t = int(ev["type"][row])
    if t == EventType.REACTION:
        return REACTION_NAMES[int(ev["reaction"][row])]
    def who(e: int) -> str:
        return "villager" if 0 <= e < trace.N else "actor"

    name = EventType(t).name.lower()
    return f"{name} of {who(int(ev['target'][row]))} by {who(int(ev['actor'][row]))}"


def follow_news(trace: Any, b: int, victim: int, depth: dict[int, int]) -> dict[int, int]:
    """The same tree, re-levelled as if hearsay carried causality: an event of the tree by a villager who learned
    of the victim's death from j sits one level below j's latest warning or consoling aimed at it (an ALARM or
    CONSOLING event of the tree, logged no later than the step it learned) when that is deeper than its cause.
    Membership is unchanged; only the levels move (a what-if, not `chain_length`'s definition)."""
    ev, N = trace.events, trace.N
    rows = np.flatnonzero(ev["village"] == b)
    row_of = {int(ev["id"][r]): int(r) for r in rows}
    root = min(depth, key=depth.get)
    parent = cause_parents(trace, rows)
    carriers = {}  # (teller, hearer) -> [(tick, event id)] of the tree's warnings and consolings
    for e in depth:
        r = row_of[e]
        if ev["type"][r] == EventType.REACTION and ev["reaction"][r] in (Reaction.ALARM, Reaction.CONSOLING):
            carriers.setdefault((int(ev["actor"][r]), int(ev["target"][r])), []).append((int(ev["tick"][r]), e))
    out = {root: 0}
    for e in sorted(depth):
        if e == root:
            continue
        r = row_of[e]
        cause = parent.get(e, -1)
        level = depth[e] if cause not in out else out[cause] + 1
        i = int(ev["actor"][r])
        teller = int(trace.learned_from[b, i, victim]) if 0 <= i < N else -1
        if teller >= 0:
            heard = int(trace.learned_tick[b, i, victim])
            before = [x for t, x in carriers.get((teller, i), []) if t <= heard and x in out and x < e]
            if before:
                level = max(level, out[max(before)] + 1)
        out[e] = level
    return out


def villager_blows(trace: Any) -> collections.Counter:
    """Blows of villagers on villagers, and how many struck one who had struck someone before (a villager who
    hit the killer, say) or had killed an actor (the killer's death)."""
    ev, N = trace.events, trace.N
    out: collections.Counter = collections.Counter()
    for b in np.unique(ev["village"]):
        rows = np.flatnonzero(ev["village"] == b)
        kind, actor, target, tick = ev["type"][rows], ev["actor"][rows], ev["target"][rows], ev["tick"][rows]
        npc_actor = (actor >= 0) & (actor < N)
        blow = (kind == EventType.ATTACK) & npc_actor
        killed_actor = (kind == EventType.DEATH) & npc_actor & (target >= N)
        for k in np.flatnonzero(blow & (target < N)):
            out["blows"] += 1
            earlier = tick < tick[k]
            out["on one who had struck"] += bool((blow & earlier & (actor == target[k])).any())
            out["on one who had killed an actor"] += bool((killed_actor & earlier & (actor == target[k])).any())
    return out


class FirstFeudBlows:
    """A `run_scenario` steer that changes nothing: in each village, the first villager who sets out to ATTACK
    another villager, and what it knew then (of villagers' deaths and their culprits; of the one its target last
    struck, such as the killer the target avenged). Where the feuds that lengthen chains begin."""

    KEYS = ("first blows", "striker knew of a villager's death", "striker knew its culprit",
            "target had last struck an actor", "target had killed that actor",
            "striker knew the target's last victim was dead", "striker saw that death",
            "striker knew the target's last victim as a threat")

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter({k: 0 for k in self.KEYS})
        self.started: set[int] = set()

    def __call__(self, sim: Any, tick: int, actions: np.ndarray) -> None:
        from engine.constants import Action

        s, N = sim.state, sim.N
        feud = s.busy[:, :N] & (s.activity == Action.ATTACK) & (s.target >= 0) & (s.target < N)
        for b, i in zip(*np.nonzero(feud), strict=True):
            if b in self.started:
                continue
            self.started.add(b)
            t, c = int(s.target[b, i]), self.counts
            deaths = np.flatnonzero(s.knows_death[b, i, :N])
            struck = int(s.threat_victim[b, t])
            c["first blows"] += 1
            c["striker knew of a villager's death"] += len(deaths) > 0
            c["striker knew its culprit"] += bool((s.known_culprit[b, i, deaths] >= 0).any())
            c["target had last struck an actor"] += struck >= N
            c["target had killed that actor"] += struck >= N and int(s.killer[b, struck]) == t
            knew_dead = struck >= 0 and bool(s.knows_death[b, i, struck])
            c["striker knew the target's last victim was dead"] += knew_dead
            c["striker saw that death"] += knew_dead and int(s.learned_from[b, i, struck]) == -1
            c["striker knew the target's last victim as a threat"] += struck >= 0 and bool(s.knows_threat[b, i, struck])


def anatomy(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int,
            on_tick: Callable[[int], None] | None = None, *, news: bool = False,
            deterministic: bool = False) -> dict:
    """{depth: {kind: events per trigger death}}, the mean deepest level, and the deepest levels' histogram."""
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    levels: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    deepest: collections.Counter = collections.Counter()
    blows: collections.Counter = collections.Counter()
    first_blows: collections.Counter = collections.Counter()
    roots = 0
    for scenario in scenarios:
        feuds = FirstFeudBlows()
        trace = run_scenario(policy, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                             tuning=policy_tuning(policy), on_tick=on_tick, steer=feuds, deterministic=deterministic)
        first_blows.update(feuds.counts)
        deaths = trigger_deaths(trace)
        trees = chain_stats(trace, Stats(), deaths)
        row_of = {(int(b), int(i)): r for r, (b, i) in enumerate(zip(trace.events["village"], trace.events["id"],
                                                                      strict=True))}
        victim_of = {(d.village, d.event): d.victim for d in deaths}
        blows.update(villager_blows(trace))
        for (b, root), depth in trees.items():
            if news:
                depth = follow_news(trace, b, victim_of[(b, root)], depth)
            roots += 1
            below = {e: k for e, k in depth.items() if e != root}
            deepest[max(below.values(), default=0)] += 1
            for e, k in below.items():
                levels[k][_kind(trace, row_of[(b, e)])] += 1
    n = max(roots, 1)
    return {"deaths": roots,
            "chain_length": sum(k * c for k, c in deepest.items()) / n,
            "deepest": {int(k): c for k, c in sorted(deepest.items())},
            "villager_blows": dict(blows),
            "first_villager_blows": {k: first_blows[k] for k in FirstFeudBlows.KEYS},
            "levels": {int(k): {kind: round(c / n, 3) for kind, c in levels[k].most_common()}
                       for k in sorted(levels)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios="all", seed=5)
    add_untrained_arg(parser)
    parser.add_argument("--follow-news", action="store_true",
                        help="what-if: re-level each tree as if a warning or consoling that told a villager of the "
                             "death caused its later reactions (see follow_news)")
    args = parser.parse_args(argv)
    spec, scenarios, policy = read_probe_args(parser, args)
    policy, name = probe_policy(parser, args, policy)
    with tick_progress(scenarios, args.quiet) as on_tick:
        out = anatomy(policy, spec, scenarios, args.villages, args.seed, on_tick, news=args.follow_news,
                      deterministic=args.greedy)
    print(f"{name} on {args.world}: {out['deaths']} trigger deaths, mean chain length {out['chain_length']:.2f}; "
          "deepest level: " + ", ".join(f"{k}: {c}" for k, c in out["deepest"].items()))
    vb = out["villager_blows"]
    print(f"  blows of villagers on villagers: {vb.get('blows', 0)}, on one who had struck before "
          f"{vb.get('on one who had struck', 0)}, on one who had killed an actor "
          f"{vb.get('on one who had killed an actor', 0)}")
    fb = out["first_villager_blows"]
    print(f"  first villager to set out to strike a villager, per village run: {fb['first blows']} of "
          f"{len(scenarios) * args.villages}; " + ", ".join(f"{k} {v}" for k, v in list(fb.items())[1:]))
    for k, kinds in out["levels"].items():
        print(f"  depth {k}: " + ", ".join(f"{kind} {x:.2f}" for kind, x in kinds.items()))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
