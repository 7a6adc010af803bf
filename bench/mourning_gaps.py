"""Who does not mourn, and why? The close relations `mourning_rate` counts, split by how long they mourned.

For every close relation the metric finds eligible (engine.metrics.mourning_stats: learned of a trigger death
and the 36-tick window fits), count its ticks at the body or consoling the bereaved in that window, exactly as
the metric does, and group them: mourned (>= 6 ticks), one short spell (1-5 ticks) and never (0). Each group
shows its mean grief on learning and at the window's end, its empathy, its distance from the body on learning,
and what it spent the window doing. A short spell with little grief left at the end means the grief was
mourned away before six ticks (the rule of relief, not the policy's choice); a "never" with grief left and a
far body means the NPC did not go. `p_mourn` is the policy's mean probability of MOURN (any slot) on the
window's ticks where the NPC was free to choose, and `learn_delay` the steps from the death to its learning of
it (hearsay learns late): together they tell a policy that will not go from one that was never free to.
The misses (short spell and never) are also put in the first of these classes that fits (`MISS_CLASSES`): died
before the window ended; mourned another loss (six ticks or more of MOURN at another body: the metric counts a
mourning for the body it is held at, and without Tuning.grief_per_loss one body's mourning eases every loss);
fled or hid (FLEE on twelve ticks or more of the window); charged (ATTACK on six or more); other.
It also counts the relations that would still have mourned counting only ticks on which some grief was left
(>= 0.05), and the share of the windows' mourning ticks that had none: a vigil at the body after the grief is
mourned away (where the body is a good place to meet the next villager to tell, say) is not grief work.

    python bench/mourning_gaps.py --policy default --world generated:12:10000
    python bench/mourning_gaps.py --policy runs/x/policy.pt --world generated:48:10000 --villages 8 --json
    python bench/mourning_gaps.py --policy default --tuning mourn_relief_empathy=false

`--tuning FIELD=VALUE` (repeatable) changes the world on top of the one the policy learned in (a first look at
a lever; the policy was not trained in it). Runs the emergence suite's scenarios (`village eval`'s default).
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

from _probe_common import add_probe_args, probe_policy, read_probe_args, tick_progress  # noqa: E402

from engine.constants import ACTION_NAMES, GRIEF_LEFT, Action, Trait  # noqa: E402
from engine.metrics import MetricParams, mourning_ticks, performed, trigger_deaths  # noqa: E402
from engine.village import action_tables  # noqa: E402

GROUPS = ("mourned", "short spell", "never")
MISS_CLASSES = ("died", "mourned another loss", "fled or hid", "charged", "other")
FLED_TICKS, CHARGED_TICKS = 12, 6  # a third of the window running or hiding; a mourning's worth of charging
STATS = ("grief_on_learning", "grief_at_end", "empathy", "distance_to_body", "p_mourn", "free_share", "learn_delay")


def _group(ticks: int, need: int) -> str:
    return "mourned" if ticks >= need else ("never" if ticks == 0 else "short spell")


class MournProbe:
    """Wraps a policy; records, per tick and row, whether the row could choose (more than one valid action) and
    the policy's probability of MOURN on any slot."""

    def __init__(self, policy: Any, slots: int):
        self.policy, self.name = policy, getattr(policy, "name", "policy")
        kinds, _ = action_tables(slots)
        self.mourn = kinds == int(Action.MOURN)
        self.free: list[np.ndarray] = []
        self.p_mourn: list[np.ndarray] = []

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> Any:
        out = self.policy.act(obs, mask, deterministic=deterministic, with_probs=True, with_values=with_values)
        self.free.append(mask.sum(1) > 1)
        self.p_mourn.append(out.probs[:, self.mourn].sum(1))
        return out


def miss_class(trace: Any, d: Any, i: int, steps: np.ndarray, acted: np.ndarray, kind: np.ndarray,
               target: np.ndarray, need: int) -> str:
    """The first of MISS_CLASSES that fits close relation i, who did not mourn death d in the window `steps`."""
    b = d.village
    if not trace.alive[steps[-1] + 1, b, i]:
        return "died"
    elsewhere = acted[steps, b, i] & (kind[steps, b, i] == Action.MOURN) & (target[steps, b, i] != d.victim)
    if elsewhere.sum() >= need:
        return "mourned another loss"
    doing = trace.activity[steps + 1, b, i]
    if (doing == Action.FLEE).sum() >= FLED_TICKS:
        return "fled or hid"
    if (doing == Action.ATTACK).sum() >= CHARGED_TICKS:
        return "charged"
    return "other"


def gaps(policy: Any, spec: Any, scenarios: list[Any], villages: int, seed: int,
         on_tick: Callable[[int], None] | None = None, *, deterministic: bool = False) -> dict:
    """Per group: count, mean grief on learning and at the window's end, empathy, distance to the body, and the
    share of window ticks per activity (DEAD for ticks after the NPC died)."""
    from engine.scenarios import run_scenario
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    p = MetricParams()
    rows: dict[str, list[tuple[float, ...]]] = collections.defaultdict(list)
    doing: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    ticks_hist: collections.Counter = collections.Counter()
    misses: collections.Counter = collections.Counter()
    by_scenario: dict[str, list[int]] = {}
    grieving_hits = mourn_ticks = griefless_ticks = 0
    for scenario in scenarios:
        probe = MournProbe(policy, policy_slots(policy))
        trace = run_scenario(probe, scenario, spec, villages=villages, seed=seed, slots=policy_slots(policy),
                             tuning=policy_tuning(policy), on_tick=on_tick, deterministic=deterministic)
        free = np.asarray(probe.free).reshape(-1, trace.B, trace.N)
        p_mourn = np.asarray(probe.p_mourn).reshape(-1, trace.B, trace.N)
        acted, kind, target = performed(trace)
        hits = by_scenario.setdefault(scenario.id, [0, 0])
        for d in trigger_deaths(trace):
            b, v = d.village, d.victim
            for i, L, mourn in mourning_ticks(trace, p, d, acted, kind, target):
                steps = np.arange(L + 1, L + p.mourn_window + 1)
                n = int(mourn.sum())
                group = _group(n, p.mourn_min_ticks)
                ticks_hist[n] += 1
                griefless = mourn & (trace.grief[steps, b, i] < GRIEF_LEFT)  # row k: the grief it acted with
                mourn_ticks += n
                griefless_ticks += int(griefless.sum())
                grieving_hits += int((mourn & ~griefless).sum()) >= p.mourn_min_ticks
                hits[0] += group == "mourned"
                if group != "mourned":
                    misses[miss_class(trace, d, i, steps, acted, kind, target, p.mourn_min_ticks)] += 1
                hits[1] += 1
                away = float(np.hypot(*(trace.pos[L + 1, b, i] - trace.pos[d.step + 1, b, v])))
                chose = free[steps, b, i]  # the policy acts at step k on the state of row k
                rows[group].append((float(trace.grief[L + 1, b, i]), float(trace.grief[steps[-1] + 1, b, i]),
                                    float(trace.traits[b, i, Trait.EMPATHY]), away,
                                    float(p_mourn[steps, b, i][chose].mean()) if chose.any() else np.nan,
                                    float(chose.mean()), float(L - d.step)))
                alive = trace.alive[steps + 1, b, i]
                for act, living in zip(trace.activity[steps + 1, b, i], alive, strict=True):
                    doing[group][ACTION_NAMES[act] if living else "DEAD"] += 1
    out: dict = {"eligible": int(sum(ticks_hist.values())),
                 "ticks": {int(k): int(c) for k, c in sorted(ticks_hist.items())},
                 "by_scenario": {k: {"mourned": h, "eligible": n} for k, (h, n) in by_scenario.items()},
                 "mourned_while_grieving": grieving_hits,
                 "griefless_share": griefless_ticks / max(mourn_ticks, 1),
                 "misses": {k: int(misses[k]) for k in MISS_CLASSES}, "groups": {}}
    for group in GROUPS:
        r = np.asarray(rows[group], dtype=float).reshape(-1, len(STATS))
        total = max(1, sum(doing[group].values()))
        out["groups"][group] = {
            "count": int(len(r)),
            **({k: float(x) for k, x in zip(STATS, np.nanmean(r, 0), strict=True)} if len(r) else {}),
            "doing": {k: round(c / total, 3) for k, c in doing[group].most_common(8)},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_probe_args(parser, scenarios="all", seed=5)
    args = parser.parse_args(argv)
    spec, scenarios, policy = read_probe_args(parser, args)
    policy, _ = probe_policy(parser, args, policy)
    with tick_progress(scenarios, args.quiet) as on_tick:
        out = gaps(policy, spec, scenarios, args.villages, args.seed, on_tick, deterministic=args.greedy)
    n = out["eligible"]
    mourned = out["groups"]["mourned"]["count"]
    print(f"{args.policy} on {args.world}: {mourned} of {n} eligible close relations mourned"
          f" ({mourned / max(n, 1):.3f})")
    print(f"counting only ticks with grief >= {GRIEF_LEFT} left: {out['mourned_while_grieving']} mourned"
          f" ({out['mourned_while_grieving'] / max(n, 1):.3f}); {out['griefless_share']:.3f} of the window's mourning"
          " ticks had no grief left")
    print("ticks mourned in the window: " + ", ".join(f"{k}: {c}" for k, c in out["ticks"].items()))
    for group, g in out["groups"].items():
        if not g["count"]:
            continue
        print(f"  {group:11s} {g['count']:4d}  grief {g['grief_on_learning']:.2f} -> {g['grief_at_end']:.2f}, "
              f"empathy {g['empathy']:.2f}, body {g['distance_to_body']:.1f} away, learnt after "
              f"{g['learn_delay']:.1f} steps; free {g['free_share']:.2f} of the window, p(MOURN) {g['p_mourn']:.3f}; "
              + ", ".join(f"{k} {v:.2f}" for k, v in g["doing"].items()))
    print("the misses, each in the first class that fits: "
          + ", ".join(f"{k} {c}" for k, c in out["misses"].items()))
    for name, s in out["by_scenario"].items():
        print(f"  {name:18s} {s['mourned']}/{s['eligible']}")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
