"""Where does revenge go? What the avengers `revenge_rate` counts did in its window.

For every avenger `revenge_rate` counts as eligible (an aggressive close relation of a victim who learned the
right culprit while he was alive, with the 24-tick window inside the episode), the outcome: a landed blow on the
killer (a hit); the killer died by other hands before any blow of its own; it chose ATTACK on the killer but
landed nothing; it performed FLEE or hid at home; or none of these. The counts are split by bravery (timid <=
0.4, the witnesses `fear_rate` asks to run, against the rest), since a world that prices death by bravery asks
the timid avengers both to run and to strike. Then who struck the killer: the blows landed on him in the revenge
window after each killing, by whether the striker was a close relation of the victim, aggressive (the avengers'
threshold) and timid; and how many steps the killer lived after the killing. "could have struck" bounds the hits
from above: the avengers who, charging straight from where they learned the culprit, would have reached him alive
within the window. "also timid witnesses" counts the avengers who are also `fear_chosen_rate`'s witnesses of the
same death (timid, they saw it): the two targets ask those villagers for a blow within 24 ticks and for a flight
kept for 24, and the line says which each one gave.

    python bench/revenge_probe.py --policy default
    python bench/revenge_probe.py --policy runs/x/policy.pt --world generated:24:10000 --villages 32 --json

Runs every bundled scenario with a killing by default. `--tuning FIELD=VALUE` (repeatable) changes the world
on top of the one the policy learned in.
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

from _probe_common import add_probe_args, add_untrained_arg, course, print_courses, run_probe  # noqa: E402

from engine.constants import Action, EventType, Trait  # noqa: E402
from engine.metrics import (  # noqa: E402
    MetricParams,
    chosen_flights,
    close_relations,
    revenge_blow,
    revenge_candidates,
    trigger_deaths,
)

SCENARIOS = "kill-at-night,kill-fighter,kill-in-square,kill-loner,kill-parent,kill-rival,repeated-killings"
OUTCOMES = ("hit", "killer_died_first", "chose_attack_missed", "fled_or_hid", "other")
# an avenger who is also one of `fear_chosen_rate`'s timid witnesses of the same death: what it did for each target
SHARED = ("struck, chose a flight", "struck, no chosen flight", "no blow, chose a flight", "no blow, no chosen flight")


def classify(trace: Any, p: MetricParams, d: Any, i: int, start: int) -> tuple[str, list[int]]:
    """(outcome, activities in the window) of avenger i against death d's killer from step `start`."""
    b, k, window = d.village, d.killer, p.revenge_window
    rows = range(start + 1, min(start + 1 + window, trace.ticks + 1))
    acts = [int(trace.activity[t, b, i]) for t in rows]
    if revenge_blow(trace, p, d, i, start) is not None:
        return "hit", acts
    dead = np.flatnonzero(~trace.alive[start + 1:start + 1 + window, b, k])
    if len(dead):
        return "killer_died_first", acts
    if any(trace.activity[t, b, i] == Action.ATTACK and trace.target[t, b, i] == k for t in rows):
        return "chose_attack_missed", acts
    if Action.FLEE in acts:
        return "fled_or_hid", acts
    return "other", acts


def could_strike(trace: Any, b: int, i: int, k: int, start: int, window: int, tuning: Any) -> bool:
    """Whether avenger i, charging from where it stood when it learned the culprit (state start + 1) in a straight
    line at `charge_speed`, could have come within striking distance of killer k at some state of the revenge
    window while he was alive going into that step: an upper bound on what any policy could make of this village,
    whatever the crowd did (it ignores the time a performance under way takes to end)."""
    first = start + 1
    last = min(start + 1 + window, trace.ticks)
    if first > last:
        return False
    strike = tuning.reach * tuning.strike_reach_factor
    rows = np.arange(first, last + 1)
    gap = np.linalg.norm(trace.pos[rows, b, k] - trace.pos[first, b, i], axis=-1)
    in_time = gap <= tuning.charge_speed * (rows - first) + strike
    alive = trace.alive[np.maximum(rows - 1, 0), b, k]
    return bool((in_time & alive).any())


def blows_on_killer(trace: Any, p: MetricParams, d: Any) -> collections.Counter:
    """Blows villagers landed on death d's killer in the revenge window after it, by who struck: a close relation
    of the victim or another, aggressive or calm, timid or bold."""
    b, k, ev = d.village, d.killer, trace.events
    landed = ((ev["village"] == b) & (ev["type"] == EventType.ATTACK) & (ev["target"] == k)
              & (ev["tick"] >= d.step) & (ev["tick"] <= d.step + p.revenge_window)
              & (ev["actor"] >= 0) & (ev["actor"] < trace.N))
    close = close_relations(trace, b, d.victim, p.close_affinity)
    out: collections.Counter = collections.Counter()
    for a in ev["actor"][landed]:
        aggressive = trace.traits[b, a, Trait.AGGRESSION] >= p.aggressive
        timid = trace.traits[b, a, Trait.BRAVERY] <= p.timid
        out[f"{'close' if close[a] else 'other'} {'aggressive' if aggressive else 'calm'} "
            f"{'timid' if timid else 'bold'}"] += 1
    return out


def probe(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int,
          on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> dict:
    """Outcome counts over the eligible avengers, by bravery, and their most common first four activities."""
    from engine.constants import Tuning
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    p = MetricParams()
    tuning = policy_tuning(policy) or Tuning()
    out: dict[str, Any] = {group: dict.fromkeys(OUTCOMES, 0) for group in ("timid", "bold")}
    reachable = {"timid": 0, "bold": 0}
    first: collections.Counter = collections.Counter()
    strikers: collections.Counter = collections.Counter()
    lived: list[int] = []
    shared = dict.fromkeys(SHARED, 0)
    for scenario in scenarios:
        trace = run_scenario(policy, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                             tuning=tuning, on_tick=on_tick, deterministic=deterministic)
        for d in trigger_deaths(trace):
            b, k = d.village, d.killer
            flights = chosen_flights(trace, p, d)
            for i, start, eligible in revenge_candidates(trace, p, d)[1]:
                if not eligible:
                    continue
                outcome, acts = classify(trace, p, d, i, start)
                if i in flights:
                    shared[SHARED[2 * (outcome != "hit") + (not flights[i])]] += 1
                group = "timid" if trace.traits[b, i, Trait.BRAVERY] <= p.timid else "bold"
                out[group][outcome] += 1
                reachable[group] += could_strike(trace, b, i, k, start, p.revenge_window, tuning)
                if outcome != "hit":
                    first[course(acts)] += 1
            strikers.update(blows_on_killer(trace, p, d))
            dead = np.flatnonzero(~trace.alive[d.step + 1:, b, k])
            if len(dead):
                lived.append(int(dead[0]))
    out["could_strike"] = reachable
    out["also_fear_witnesses"] = shared
    out["first_activities_of_misses"] = dict(first.most_common(8))
    out["blows_on_killer"] = dict(strikers.most_common())
    out["killer_lived"] = {"killed": len(lived), "median_steps": float(np.median(lived)) if lived else None}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios=SCENARIOS, seed=1)
    add_untrained_arg(parser)
    args = parser.parse_args(argv)
    name, out = run_probe(parser, args, lambda policy, spec, scenarios, on_tick: probe(
        policy, spec, scenarios, args.villages, args.seed, on_tick, deterministic=args.greedy))
    print(f"{name} on {args.world}: eligible avengers by outcome in the revenge window")
    timid = MetricParams().timid
    for group in ("timid", "bold"):
        counts = out[group]
        n = sum(counts.values())
        rate = f"{counts['hit'] / n:.3f}" if n else "-"
        print(f"  {group:5s} (bravery {'<=' if group == 'timid' else '>'} {timid}): {n} eligible, hit rate {rate}; "
              + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES)
              + f"; could have struck {out['could_strike'][group]}")
    both = out["also_fear_witnesses"]
    print(f"  also timid witnesses counted by fear_chosen_rate: {sum(both.values())}; "
          + ", ".join(f"{key} {n}" for key, n in both.items()))
    print("  misses' first four activities:")
    print_courses(out["first_activities_of_misses"])
    blows = out["blows_on_killer"]
    lived = out["killer_lived"]
    print(f"blows landed on the killer in the window, {sum(blows.values())} in all (striker: relation to the victim, "
          f"aggression, bravery); the killer died in {lived['killed']} runs, a median {lived['median_steps']} steps "
          "after the killing:")
    for who, n in blows.items():
        print(f"  {n:5d}  {who}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
