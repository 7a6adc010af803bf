"""Do the timid flee? What the timid witnesses `fear_rate` counts did in the ticks after a killing.

For every timid witness of a trigger death that `fear_rate` counts (engine.metrics.timid_witnesses: bravery
<= 0.4, saw it, within the safe distance of the killer), the activity it performed in each of the `--ticks`
states after the killing, how many chose FLEE at least once, and the outcome under the three fear metrics
(safe within the window; and kept away; and got away while the killer lived; and kept away by a flight it chose,
`fear_chosen_rate`'s hit). A `fear_rate` that is high while nobody chose FLEE is the crowd's doing: the killer
died, and the witnesses were safe without running. Those who chose FLEE and still miss `fear_chosen_rate` are
split by why: never safe in the window, safe but back within the killer's reach before 24 ticks, or kept away
from a state before their flight (the killer was already dead or gone) or by fleeing someone else; and for those
misses, what brought them back: the activity (and whom it was aimed at) in the first state that found them within
the safe distance of the living killer again after they had been beyond it, or that they never got beyond it.
For the witnesses who never chose FLEE: what they mostly did instead (the commonest activity of the states after
the first), by whether they were close relations of the victim, with their mean distance from the killer just after
the killing.

"Could get away" counts the witnesses for whom getting away from a living killer was possible at all: running
at `flee_speed` from the first step after the killing, straight away from a killer standing still, they would
reach the safe distance within the metric's window and before the killer died. It bounds `fear_fled_rate` from
above for the village the policy made: a crowd that beats the killer to death in two ticks leaves no one the
time to get away.

    python bench/flight_probe.py --policy default
    python bench/flight_probe.py --policy runs/x/policy.pt --world generated:24:10000 --villages 32 --json

Runs `kill-in-square`, `kill-parent` and `kill-at-night` by default (the scenarios with most timid witnesses
near the killer). `--tuning FIELD=VALUE` (repeatable) changes the world on top of the one the policy learned in.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]  # the repo, bench/

from _probe_common import add_probe_args, add_untrained_arg, course, print_courses, run_probe  # noqa: E402

from engine.constants import Action, Tuning  # noqa: E402
from engine.metrics import (  # noqa: E402
    MetricParams,
    chose_flight,
    close_relations,
    reached_safety,
    revenge_candidates,
    timid_witnesses,
    trigger_deaths,
)

SCENARIOS = "kill-in-square,kill-parent,kill-at-night"


def came_back(trace: Any, p: MetricParams, d: Any, i: int, dist: np.ndarray, fled_at: int) -> str:
    """What witness i was doing in the first state, from its flight on (within the fear metrics' window and keep
    after the killing), that found it within the safe distance of the living killer after it had been beyond it:
    "ACTIVITY -> killer | victim | villager | -" (the activity's target); else whether it ever got beyond it."""
    b, safe = d.village, trace.safe_distance[d.village]
    got_away = False
    for t in range(fled_at, min(d.step + 1 + p.fear_window + p.fear_keep, trace.ticks) + 1):
        if dist[t] >= safe:
            got_away = True
        elif got_away:
            target = int(trace.target[t, b, i])
            whom = ("killer" if target == d.killer else "victim" if target == d.victim
                    else "villager" if 0 <= target < trace.N else "-")
            return f"{Action(int(trace.activity[t, b, i])).name.lower()} -> {whom}"
    return "away, but too late or not by its own running" if got_away else "never got away"


def probe(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int, ticks: int = 7,
          on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> dict:
    """Counts over the eligible timid witnesses: chose FLEE, outcome (safe, kept, fled from a living killer)
    and the most common first four activities after the killing."""
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    p = MetricParams()
    out = {"witnesses": 0, "chose_flee": 0, "safe": 0, "kept": 0, "fled_living_killer": 0, "could_get_away": 0,
           "chosen": 0, "fled_never_safe": 0, "fled_safe_not_kept": 0, "fled_kept_otherwise": 0,
           "avengers_too": 0, "avengers_too_chosen": 0}
    flee_speed = (policy_tuning(policy) or Tuning()).flee_speed  # None: the default world
    first: collections.Counter = collections.Counter()
    back: collections.Counter = collections.Counter()
    instead: collections.Counter = collections.Counter()
    instead_distance: collections.defaultdict = collections.defaultdict(float)
    for scenario in scenarios:
        trace = run_scenario(policy, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                             tuning=policy_tuning(policy), on_tick=on_tick, deterministic=deterministic)
        for d in trigger_deaths(trace):
            b, k = d.village, d.killer
            safe = trace.safe_distance[b]
            dead = np.flatnonzero(~trace.alive[d.step + 1:, b, k])
            last_alive = d.step + int(dead[0]) if len(dead) else trace.ticks  # the last state with the killer alive
            close = close_relations(trace, b, d.victim, p.close_affinity)
            # those revenge_rate counts as avengers too: a blow within its window is no flight kept away
            avenger = {i for i, _, eligible in revenge_candidates(trace, p, d)[1] if eligible}
            for i, dist in timid_witnesses(trace, p, d):
                rows = range(d.step + 1, min(d.step + 1 + ticks, trace.ticks + 1))
                acts = [int(trace.activity[t, b, i]) for t in rows]
                out["witnesses"] += 1
                out["chose_flee"] += int(Action.FLEE in acts)
                if Action.FLEE not in acts:
                    mostly = collections.Counter(acts[1:] or acts).most_common(1)[0][0]
                    key = f"{Action(mostly).name.lower()}, {'close relation' if close[i] else 'other'}"
                    instead[key] += 1
                    instead_distance[key] += float(dist[d.step + 1])
                first_safe = d.step + 1 + math.ceil(max(0.0, safe - dist[d.step + 1]) / flee_speed)
                out["could_get_away"] += int(first_safe <= min(d.step + p.fear_window, last_alive))
                is_safe = reached_safety(trace, b, i, k, d.step + 1, safe, p, dist=dist) >= 0
                t_kept = reached_safety(trace, b, i, k, d.step + 1, safe, p, p.fear_keep, dist=dist)
                chosen = t_kept >= 0 and chose_flight(trace, b, i, k, d.step + 1, t_kept)
                out["safe"] += int(is_safe)
                out["kept"] += int(t_kept >= 0)
                out["chosen"] += int(chosen)
                out["avengers_too"] += int(i in avenger)
                out["avengers_too_chosen"] += int(i in avenger and chosen)
                if Action.FLEE in acts and not chosen:
                    missed = "fled_safe_not_kept" if is_safe else "fled_never_safe"
                    out["fled_kept_otherwise" if t_kept >= 0 else missed] += 1
                    if t_kept < 0:
                        back[came_back(trace, p, d, i, dist, d.step + 1 + acts.index(Action.FLEE))] += 1
                out["fled_living_killer"] += int(reached_safety(trace, b, i, k, d.step + 1, safe, p, p.fear_keep,
                                                                threat_alive=True, dist=dist) >= 0)
                first[course(acts)] += 1
    out["first_activities"] = dict(first.most_common(8))
    out["back_by"] = dict(back.most_common())
    out["instead"] = {key: {"count": n, "mean_distance": instead_distance[key] / n} for key, n in instead.most_common()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios=SCENARIOS, seed=1)
    parser.add_argument("--ticks", type=int, default=7, help="states after the killing to look at (default: 7)")
    add_untrained_arg(parser)
    args = parser.parse_args(argv)
    if args.ticks < 1:
        parser.error(f"--ticks must be at least 1, got {args.ticks}")
    name, out = run_probe(parser, args, lambda policy, spec, scenarios, on_tick: probe(
        policy, spec, scenarios, args.villages, args.seed, args.ticks, on_tick, deterministic=args.greedy))
    n = out["witnesses"]
    print(f"{name} on {args.world}: {out['chose_flee']} of {n} timid witnesses chose FLEE in the "
          f"{args.ticks} ticks after the killing; safe {out['safe']}, kept away {out['kept']}, "
          f"got away from a living killer {out['fled_living_killer']} (could have: {out['could_get_away']}); "
          f"kept away by a chosen flight {out['chosen']}")
    print(f"chose FLEE and missed fear_chosen_rate: never safe {out['fled_never_safe']}, safe but not kept away "
          f"{out['fled_safe_not_kept']}, kept away from before the flight or by fleeing another "
          f"{out['fled_kept_otherwise']}")
    print(f"counted by revenge_rate as avengers too (aggressive close relations who knew the culprit): "
          f"{out['avengers_too']} of {n}; kept away by a chosen flight {out['avengers_too_chosen']}")
    print("what brought back those who fled and were not kept away (activity -> its target):")
    for why, n in out["back_by"].items():
        print(f"  {n:5d}  {why}")
    print("what those who never chose FLEE mostly did (activity, relation to the victim; mean distance from the "
          "killer just after the killing):")
    for key, row in out["instead"].items():
        print(f"  {row['count']:5d}  {key}; {row['mean_distance']:.1f}")
    print_courses(out["first_activities"])
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
