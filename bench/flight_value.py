"""Does fleeing pay? What a timid witness's reward says about running, striking, or doing as the policy does.

For every timid witness that `fear_rate` counts (engine.metrics.timid_witnesses) of the first trigger death in
each village, the summed reward it gets over `--horizon` steps from the killing, in three plays of the same
villages with the same draws (the same seeds, so every play is the same run until the witnesses are steered):

- `policy`: the policy chooses, as in `village eval`;
- `flee`: every such witness is made to FLEE from the killer for `--steer` steps (where its mask allows it), then
  the policy chooses again;
- `attack`: every such witness is made to ATTACK the killer for `--steer` steps, then the policy chooses again.

Also each play's share of those witnesses killed within the horizon (and when: 1-2, 3-6, 7-24 or more steps after
the killing) and its `fear_fled_rate` over them (got away while the killer lived). Where `attack` pays a timid
witness more than `flee`, a policy that learns from this reward joins the crowd instead of running, whatever its
observations; a lever meant to make flight learnable should make `flee` pay more than `attack` here before it is
trained.

    python bench/flight_value.py --policy default
    python bench/flight_value.py --policy runs/x/policy.pt --tuning blow_relief_bravery=true --villages 32 --json

`--tuning FIELD=VALUE` (repeatable) changes the world (and with it the reward) on top of the policy's own.
`--training` plays the training scenario (`mixed`, 144 steps) instead of the bundled scenarios: in those the
killer kills once and walks off, in training he may rampage and hunt those who fear him, so the two can disagree
on what a flight is worth.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]  # the repo, bench/

from _probe_common import (  # noqa: E402
    add_probe_args,
    add_untrained_arg,
    probe_name,
    probe_policy,
    read_probe_args,
    tick_progress,
)

from engine.constants import Action  # noqa: E402
from engine.metrics import MetricParams, reached_safety, timid_witnesses, trigger_deaths  # noqa: E402
from engine.village import flat_action  # noqa: E402

SCENARIOS = "kill-in-square,kill-parent,kill-at-night"
KILLED_BY = (2, 6, 24)  # a witness's death is counted by how many steps after the killing it came: <= 2, <= 6, ...
TRAINING = SimpleNamespace(id="mixed", ticks=144)  # the training scenario, played by VillageSim itself
PLAYS = ("policy", "flee", "attack")


class Steering:
    """Forces `kind` on the killer for the listed witnesses for `steps` steps after their village's killing, and
    keeps every NPC's reward per step (the rewards of step t are read at step t + 1's decision)."""

    def __init__(self, kind: Action | None, witnesses: dict[int, tuple[int, int, list[int]]], steps: int,
                 ticks: int, villages: int, npcs: int) -> None:
        self.kind, self.witnesses, self.steps = kind, witnesses, steps
        self.rewards = np.zeros((ticks, villages, npcs), np.float32)

    def __call__(self, sim: Any, tick: int, actions: np.ndarray) -> None:
        if tick > 0:
            self.rewards[tick - 1] = sim.last_reward
        if self.kind is None:
            return
        for b, (death_tick, killer, who) in self.witnesses.items():
            if not death_tick < tick <= death_tick + self.steps or not sim.state.alive[b, killer]:
                continue
            for i in who:
                slots = np.flatnonzero(sim.observer.slot_entity[b, i] == killer)
                if not len(slots) or not sim.state.alive[b, i]:
                    continue
                a = flat_action(self.kind, int(slots[0]), sim.K)
                if sim.mask[b, i, a]:
                    actions[b, i] = a


def killed_by_labels() -> list[str]:
    """'1-2', '3-6', '7-24', '25+': the step ranges of KILLED_BY."""
    lows = (1, *(k + 1 for k in KILLED_BY))
    return [f"{lo}-{hi}" for lo, hi in zip(lows, KILLED_BY, strict=False)] + [f"{lows[-1]}+"]


def first_deaths(trace: Any) -> dict[int, Any]:
    """Each village's first trigger death."""
    out: dict[int, Any] = {}
    for d in sorted(trigger_deaths(trace), key=lambda d: d.step):
        out.setdefault(d.village, d)
    return out


def same_killing(a: Any, b: Any) -> bool:
    """The same victim, killer and step (event ids count every village's events, so they may differ)."""
    return a is not None and (a.victim, a.killer, a.step) == (b.victim, b.killer, b.step)


def play(load: Callable[[], Any], spec: Any, scenario: Any, villages: int, seed: int, kind: Action | None,
         witnesses: dict[int, tuple[int, int, list[int]]], steps: int,
         on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> tuple[Any, Steering]:
    """One play of `scenario` with a freshly loaded policy (so that every play draws the same actions), steering
    the witnesses to `kind` (None: nobody is steered)."""
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    policy = load()
    steering = Steering(kind, witnesses, steps, scenario.ticks, villages, len(spec.npcs))
    if scenario is TRAINING:
        return play_training(policy, spec, villages, seed, steering, on_tick, deterministic), steering
    trace = run_scenario(policy, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                         tuning=policy_tuning(policy), on_tick=on_tick, steer=steering, deterministic=deterministic)
    return trace, steering


def play_training(policy: Any, spec: Any, villages: int, seed: int, steering: Steering,
                  on_tick: Callable[[int], None] | None, deterministic: bool = False) -> Any:
    """One episode of the training scenario (`mixed`: one to three killings, rampages, hunts, as the policy's own
    tuning sets them), recorded like a bundled scenario."""
    from engine.metrics import TraceRecorder
    from engine.scenarios import step_recorded
    from engine.sim import VillageSim
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    sim = VillageSim(spec, villages, seed, slots=policy_slots(policy), max_ticks=TRAINING.ticks, scenario="mixed",
                     record=True, tuning=policy_tuning(policy))
    recorder = TraceRecorder(sim, scenario="mixed", world=spec.id, rng=np.random.default_rng([seed, 29]))
    for tick in range(TRAINING.ticks):
        step_recorded(sim, policy, recorder, tick, deterministic=deterministic, steer=steering)
        if on_tick is not None:
            on_tick(tick)
    return recorder.finish()


def probe(load: Callable[[], Any], spec: Any, scenarios: list[Any], villages: int, seed: int, steer: int = 6,
          horizon: int = 48, on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> dict:
    """Per timid witness of each village's first trigger death, in each play: mean summed reward over `horizon`
    steps from the killing, share killed by then, share that got away while the killer lived. A village whose
    killing is not the same in every play is left out and counted (`villages_out_of_step`)."""
    p = MetricParams()
    sums = {name: {"return": 0.0, "killed": 0, "fled": 0} for name in PLAYS}
    returns: dict[str, list[float]] = {name: [] for name in PLAYS}  # per witness, in the same order in every play
    when = {name: [0] * (len(KILLED_BY) + 1) for name in PLAYS}
    n = out_of_step = 0
    for scenario in scenarios:
        base = play(load, spec, scenario, villages, seed, None, {}, steer, on_tick, deterministic=deterministic)
        deaths = first_deaths(base[0])
        witnesses = {b: (d.step, d.killer, [i for i, _ in timid_witnesses(base[0], p, d)]) for b, d in deaths.items()}
        runs = {"policy": base}
        runs["flee"] = play(load, spec, scenario, villages, seed, Action.FLEE, witnesses, steer, on_tick,
                            deterministic=deterministic)
        runs["attack"] = play(load, spec, scenario, villages, seed, Action.ATTACK, witnesses, steer, on_tick,
                              deterministic=deterministic)
        firsts = [first_deaths(trace) for trace, _ in runs.values()]
        for b, (step, killer, who) in witnesses.items():
            if not all(same_killing(first.get(b), deaths[b]) for first in firsts):
                # the scenario's draws are shared by the villages, so steering one village that saw its killing
                # early can change a later killing elsewhere; such a village is no longer the same run
                out_of_step += 1
                continue
            for i in who:
                n += 1
                for name, (trace, steering) in runs.items():
                    end = min(step + horizon, trace.ticks)
                    returns[name].append(float(steering.rewards[step:end, b, i].sum()))
                    sums[name]["return"] += returns[name][-1]
                    dead = np.flatnonzero(~trace.alive[step + 1:end + 1, b, i])
                    sums[name]["killed"] += int(len(dead) > 0)
                    if len(dead):
                        when[name][int(np.searchsorted(KILLED_BY, dead[0] + 1))] += 1
                    sums[name]["fled"] += int(reached_safety(trace, b, i, killer, step + 1, trace.safe_distance[b], p,
                                                             p.fear_keep, threat_alive=True) >= 0)
    out: dict[str, Any] = {"witnesses": n, "villages_out_of_step": out_of_step}
    for name in PLAYS:
        out[name] = {k: (v / n if n else float("nan")) for k, v in sums[name].items()}
        out[name]["killed_when"] = dict(zip(killed_by_labels(), when[name], strict=True))
        out[name]["return_se"] = standard_error(np.asarray(returns[name]))
    # the plays share their witnesses, villages and draws: a paired difference is the fair comparison
    out["differences"] = {f"{a} - {b}": paired_difference(returns[a], returns[b])
                          for a, b in (("flee", "attack"), ("flee", "policy"), ("attack", "policy"))}
    return out


def standard_error(x: np.ndarray) -> float:
    """Standard error of the mean of x (nan with fewer than two values)."""
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def paired_difference(a: list[float], b: list[float]) -> dict[str, float]:
    """Mean of a - b over the same witnesses, and its standard error."""
    d = np.asarray(a) - np.asarray(b)
    return {"mean": float(d.mean()) if len(d) else float("nan"), "se": standard_error(d)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios=SCENARIOS, seed=1)
    parser.add_argument("--steer", type=int, default=6, help="steps the witnesses are steered (default: 6)")
    parser.add_argument("--training", action="store_true",
                        help="play the training scenario (mixed: one to three killings, rampages, hunts, with the "
                             "policy's own tuning) instead of --scenarios")
    parser.add_argument("--horizon", type=int, default=48, help="steps of reward summed (default: 48)")
    add_untrained_arg(parser)
    args = parser.parse_args(argv)
    if args.steer < 1:
        parser.error(f"--steer must be at least 1, got {args.steer}")
    if args.horizon < 1:
        parser.error(f"--horizon must be at least 1, got {args.horizon}")
    spec, scenarios, _ = read_probe_args(parser, args)
    if args.training:
        scenarios = [TRAINING]
    with tick_progress(scenarios * len(PLAYS), args.quiet) as on_tick:
        def fresh() -> Any:  # the policy as the first play found it, for every play
            return probe_policy(parser, args, read_probe_args(parser, args)[2])[0]

        out = probe(fresh, spec, scenarios, args.villages, args.seed, args.steer,
                    args.horizon, on_tick, deterministic=args.greedy)
    print(f"{probe_name(args)} on {args.world}: {out['witnesses']} timid witnesses; per witness over {args.horizon} "
          f"steps from the killing (steered {args.steer} steps; villages left out, their killing changed by "
          f"another's steering: {out['villages_out_of_step']}):")
    labels = killed_by_labels()
    print(f"  {'play':8s} {'return':>8s} {'+/- se':>7s} {'killed':>7s} {'got away':>9s}   killed, by steps after the "
          f"killing ({', '.join(labels)})")
    for name in PLAYS:
        r = out[name]
        print(f"  {name:8s} {r['return']:8.3f} {r['return_se']:7.3f} {r['killed']:7.3f} {r['fled']:9.3f}   "
              + " / ".join(str(r["killed_when"][k]) for k in labels))
    print("  paired differences of return (same witnesses): "
          + ", ".join(f"{k} {d['mean']:+.3f} +/- {d['se']:.3f}" for k, d in out["differences"].items()))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
