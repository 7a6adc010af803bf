"""How does news of a death travel, and where does a trained village lose reach against an untrained one?

For every trigger death whose 48-step window fits (the deaths `news_reach_48` counts), each NPC alive just after
it (victim and an NPC killer excluded) who knows of it 48 steps later is put in the channel it first learned by:
witnessed, found the body, warned (a WARN aimed at it), talked (a TALK or COMFORT between teller and hearer that
step: a chosen conversation) or gossip (told while neither was addressing the other: ambient chat in talking
range, `Tuning.talk_radius`). Shares are of the NPCs counted, pooled over the deaths, so the channels add up to
`reach_48`; `reach_48_per_death` averages each death's share instead, which is `news_reach_48` itself.

It also prints, over the same windows, how the living spent their ticks (the share of NPC-ticks per activity)
and, of the NPCs who knew of the death, the share of their ticks in a telling action (TALK, COMFORT, WARN).

    python bench/news_channels.py --policy default --world generated:48:10000 --villages 8
    python bench/news_channels.py --policy default --world generated:48:10000 --villages 8 --untrained

`--untrained` runs the policy's untrained network (`village eval --compare random_init`'s) instead, in the same
world. Runs the emergence suite's scenarios (`village eval`'s default).
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

from _probe_common import add_probe_args, add_untrained_arg, run_probe  # noqa: E402

from engine.constants import ACTION_NAMES, Action  # noqa: E402
from engine.events import HOW_FOUND_BODY, HOW_TOLD, HOW_WARNED, HOW_WITNESSED  # noqa: E402
from engine.metrics import MetricParams, trigger_deaths  # noqa: E402

CHANNELS = ("witnessed", "found body", "warned", "talked", "gossip")
CONVERSATION = (int(Action.TALK), int(Action.COMFORT))
TELLING = (int(Action.TALK), int(Action.COMFORT), int(Action.WARN))


def _addressed(trace: Any, step: int, b: int, who: int, whom: int) -> bool:
    """`who` was in a TALK or COMFORT aimed at `whom` around step `step` (the state before or after it)."""
    for row in (step, step + 1):
        if trace.activity[row, b, who] in CONVERSATION and trace.target[row, b, who] == whom:
            return True
    return False


def channels(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int,
             on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> dict:
    """Counts per channel of the NPCs who knew of a trigger death 48 steps after it, activity shares, telling."""
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    horizon = MetricParams().news_reach_at
    counts: collections.Counter = collections.Counter()
    doing: collections.Counter = collections.Counter()
    telling = [0, 0]  # knower-ticks in a telling action, knower-ticks
    deaths = 0
    per_death = []  # each death's share, as news_reach_48 averages them
    for scenario in scenarios:
        trace = run_scenario(policy, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                             tuning=policy_tuning(policy), on_tick=on_tick, deterministic=deterministic)
        T, N = trace.activity.shape[0] - 1, trace.N
        msg = trace.messages
        for d in trigger_deaths(trace):
            b, v, s = d.village, d.victim, d.step
            if s + horizon > T - 1:
                continue
            alive = trace.alive[s + 1, b, :N].copy()
            alive[v] = False
            if d.killer < N:
                alive[d.killer] = False
            pop = np.flatnonzero(alive)
            if not len(pop):
                continue
            deaths += 1
            counts["population"] += len(pop)
            learned = trace.learned_tick[b, :, v]
            sel = (msg["village"] == b) & (msg["subject"] == v)
            first = {}  # receiver -> (tick, sender, how) of its first message about v
            for t, snd, rcv, how in zip(msg["tick"][sel], msg["sender"][sel], msg["receiver"][sel], msg["how"][sel],
                                        strict=True):
                rcv = int(rcv)
                if rcv not in first or t < first[rcv][0]:
                    first[rcv] = (int(t), int(snd), int(how))
            knew = 0
            for i in pop:
                L = int(learned[i])
                if L < 0 or s + horizon < L:
                    continue
                knew += 1
                t, snd, how = first.get(int(i), (L, -1, HOW_WITNESSED))
                if how == HOW_WITNESSED:
                    counts["witnessed"] += 1
                elif how == HOW_FOUND_BODY:
                    counts["found body"] += 1
                elif how == HOW_WARNED:
                    counts["warned"] += 1
                elif how == HOW_TOLD and snd >= 0 and (_addressed(trace, t, b, snd, int(i))
                                                       or _addressed(trace, t, b, int(i), snd)):
                    counts["talked"] += 1
                else:
                    counts["gossip"] += 1
            per_death.append(knew / len(pop))
            rows = np.arange(s + 1, s + horizon + 1)
            for i in pop:
                living = trace.alive[rows, b, i]
                acts = trace.activity[rows, b, i][living]
                doing.update(ACTION_NAMES[a] for a in acts)
                knowing = living & (learned[i] >= 0) & (rows - 1 >= learned[i])
                telling[0] += int(np.isin(trace.activity[rows, b, i][knowing], TELLING).sum())
                telling[1] += int(knowing.sum())
    pop = max(counts["population"], 1)
    total = max(sum(doing.values()), 1)
    return {"deaths": deaths, "population": counts["population"],
            "reach_48": sum(counts[c] for c in CHANNELS) / pop,
            "reach_48_per_death": float(np.mean(per_death)) if per_death else None,
            "channels": {c: counts[c] / pop for c in CHANNELS},
            "doing": {k: round(n / total, 3) for k, n in doing.most_common()},
            "knowers_telling": telling[0] / max(telling[1], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios="all", seed=5)
    add_untrained_arg(parser)
    args = parser.parse_args(argv)
    name, out = run_probe(parser, args, lambda policy, spec, scenarios, on_tick: channels(
        policy, spec, scenarios, args.villages, args.seed, on_tick, deterministic=args.greedy))
    print(f"{name} on {args.world}: {out['deaths']} deaths, reach at 48 steps {out['reach_48']:.3f} of "
          f"{out['population']} villagers")
    print("  by channel: " + ", ".join(f"{c} {x:.3f}" for c, x in out["channels"].items()))
    print(f"  knowers' ticks spent telling (talk, comfort, warn): {out['knowers_telling']:.3f}")
    print("  ticks of the living: " + ", ".join(f"{k} {x:.3f}" for k, x in out["doing"].items()))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
