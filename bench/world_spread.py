"""Is a target's failure a property of the village size or of the village? One policy on many worlds per size.

`village eval --sweep` plays two held-out worlds per size, and two other worlds of one size can differ by more than
the sizes do (docs/emergence.md, "Thirty-third session": revenge at 96 NPCs is 0.49 on the sweep's worlds and 0.66
on the validation worlds). Here one policy plays K generated worlds of each size (generator seeds FIRST ..
FIRST + K - 1, below the held-out range by default), every bundled scenario, and the report says, per size: each
target rate pooled over the worlds with a 95% bootstrap interval over the worlds (the worlds are the sample, not
the villages), the spread between worlds (lowest, highest, standard deviation) and how many worlds reach the target.

Then what the worlds are made of: for revenge, the share of the eligible avengers (those `revenge_rate` counts)
who are timid (bravery <= 0.4, the witnesses `fear_rate` asks to run), revenge among the timid and the bold
avengers apart, and each world's revenge against that share and against the size (a least-squares fit over the
worlds, each coefficient with its bootstrap interval over the worlds): a size effect shows as a size coefficient
whose interval excludes 0 with the make-up held fixed.

    python bench/world_spread.py --policy default --per-size 8 --villages 16
    python bench/world_spread.py --policy runs/x/policy.pt --untrained --json > runs/untrained_spread.txt

`--untrained` plays the policy's untrained network (random_init) in the policy's world instead; `--untrained-draws K`
plays K of them as one population (NPC i with draw i mod K), as `village eval --random-init-draws K`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]  # the repo, bench/

from _probe_common import add_untrained_arg, probe_name, probe_policy  # noqa: E402

from engine.constants import Trait  # noqa: E402
from engine.metrics import MetricParams  # noqa: E402

RATES = ("mourning_rate", "revenge_rate", "fear_rate", "fear_kept_rate", "fear_fled_rate", "fear_chosen_rate",
         "news_reach_48", "chain_length")
BOOTSTRAP = 2000  # resamples of the fit
AVENGERS = ("timid", "timid_hit", "bold", "bold_hit")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="default", help="policy file, default or mappo (default: %(default)s)")
    add_untrained_arg(parser)
    parser.add_argument("--sizes", default="12,24,48,96", help="comma-separated NPC counts (default: %(default)s)")
    parser.add_argument("--per-size", type=int, default=8, help="worlds per size (default: %(default)s)")
    parser.add_argument("--first", type=int, default=5000,
                        help="first generator seed: 5000 the validation worlds', 10000 the held-out sweep's "
                             "(default: %(default)s)")
    parser.add_argument("--villages", type=int, default=16,
                        help="villages per scenario and world (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="simulation and policy seed (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (tqdm, on stderr)")
    args = parser.parse_args(argv)
    for flag, value, least in (("--per-size", args.per_size, 2), ("--villages", args.villages, 1),
                               ("--first", args.first, 0), ("--seed", args.seed, 0)):
        if value < least:
            parser.error(f"{flag} must be at least {least}, got {value}")
    try:
        args.size_list = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if any(n < 2 for n in args.size_list):
        parser.error(f"--sizes: every size must be at least 2, got {args.sizes!r}")
    args.parser = parser
    return args


def load(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """(policy, scenarios) from the flags (--untrained: the policy's fresh network); a bad flag exits with a
    one-line error."""
    from engine.scenarios import bundled_scenarios, load_scenario
    from npc_brains import PolicyError, load_policy
    from village.cli import UserError

    try:
        policy = load_policy(args.policy, seed=args.seed)
        scenarios = [load_scenario(name) for name in bundled_scenarios()]
    except (UserError, PolicyError, ValueError, OSError) as exc:
        args.parser.error(str(exc))
    return probe_policy(args.parser, args, policy)[0], scenarios


def avenger_make_up(trace: Any, params: Any) -> dict[str, int]:
    """The eligible avengers `revenge_rate` counts over the trace's killings, split by bravery: {timid, bold} each
    with its hits ({timid_hit, bold_hit})."""
    from engine.metrics import revenge_blow, revenge_candidates, trigger_deaths

    out = dict.fromkeys(AVENGERS, 0)
    for d in trigger_deaths(trace):
        for i, learned, ok in revenge_candidates(trace, params, d)[1]:
            if ok:
                group = "timid" if trace.traits[d.village, i, Trait.BRAVERY] <= params.timid else "bold"
                out[group] += 1
                out[f"{group}_hit"] += revenge_blow(trace, params, d, i, learned) is not None
    return out


def play_world(policy: Any, scenarios: list[Any], label: str, args: argparse.Namespace, on_cell: Any) -> dict:
    """One world: its Stats over every scenario, and its avengers' make-up."""
    from engine.metrics import Stats, trace_stats
    from engine.scenarios import ScenarioError, run_scenario
    from engine.vec_env import resolve_world
    from npc_brains.evaluate import policy_slots
    from npc_brains.tuning import policy_tuning

    world = resolve_world(label)
    params, stats = MetricParams(), Stats()
    avengers = dict.fromkeys(AVENGERS, 0)
    for si, scenario in enumerate(scenarios):
        try:
            trace = run_scenario(policy, scenario, world, villages=args.villages, seed=args.seed + 1009 * si,
                                 slots=policy_slots(policy), tuning=policy_tuning(policy))
        except ScenarioError:  # a scenario this world cannot run
            on_cell()
            continue
        stats += trace_stats(trace, params)
        for key, count in avenger_make_up(trace, params).items():
            avengers[key] += count
        on_cell()
    return {"label": label, "size": len(world.npcs), "stats": stats, **avengers,
            "eligible": avengers["timid"] + avengers["bold"]}


def summarise(worlds: list[dict], seed: int) -> dict[str, dict[str, Any]]:
    """{size: {rate: {pooled, interval, low, high, sd, passing, worlds}, revenge_timid / revenge_bold: {pooled,
    eligible}}}."""
    from engine.metrics import Stats, group_intervals
    from npc_brains.evaluate import TARGETS

    out: dict[str, dict[str, Any]] = {}
    for size in sorted({w["size"] for w in worlds}):
        mine = [w for w in worlds if w["size"] == size]
        stats = [w["stats"] for w in mine]
        intervals = group_intervals(stats, seed=seed)
        total = Stats()
        for st in stats:
            total += st
        pooled = total.result()
        row: dict[str, Any] = {}
        for rate in RATES:
            values = [v for v in (w["rates"][rate] for w in mine) if v is not None]
            target = TARGETS.get(rate)
            row[rate] = {
                "pooled": pooled[rate], "interval": intervals.get(rate),
                "low": min(values) if values else None, "high": max(values) if values else None,
                "sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
                "passing": None if target is None else sum(v >= target for v in values), "worlds": len(values),
            }
        for group in ("timid", "bold"):
            eligible = sum(w[group] for w in mine)
            row[f"revenge_{group}"] = {"pooled": sum(w[f"{group}_hit"] for w in mine) / eligible if eligible else None,
                                       "eligible": eligible}
        out[str(size)] = row
    return out


def size_or_make_up(worlds: list[dict], rng: np.random.Generator) -> dict[str, Any] | None:
    """Least squares of each world's revenge on log2(size) and its avengers' timid share, with bootstrap
    intervals over the worlds; None when too few worlds have eligible avengers."""
    rows = [(np.log2(w["size"]), w["timid"] / w["eligible"], w["rates"]["revenge_rate"])
            for w in worlds if w["eligible"] > 0 and w["rates"]["revenge_rate"] is not None]
    if len(rows) < 6:
        return None
    data = np.array(rows)

    def fit(d: np.ndarray) -> np.ndarray:
        x = np.column_stack([np.ones(len(d)), d[:, 0] - np.log2(12), d[:, 1]])
        return np.linalg.lstsq(x, d[:, 2], rcond=None)[0]

    coef = fit(data)
    draws = np.array([fit(data[rng.integers(0, len(data), len(data))]) for _ in range(BOOTSTRAP)])
    names = ("at 12 NPCs, no timid avenger", "per doubling of the size", "per unit of timid share")
    return {name: {"value": float(coef[j]), "interval": [float(np.quantile(draws[:, j], 0.025)),
                                                         float(np.quantile(draws[:, j], 0.975))]}
            for j, name in enumerate(names)} | {"worlds": len(rows)}


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    policy, scenarios = load(args)
    from tqdm import tqdm

    from npc_brains.evaluate import size_worlds

    labels = size_worlds(args.per_size, args.first, args.size_list)
    worlds = []
    with tqdm(total=len(labels) * len(scenarios), unit="run", file=sys.stderr, disable=args.quiet,
              leave=False) as bar:
        for label in labels:
            bar.set_description(label)
            world = play_world(policy, scenarios, label, args, bar.update)
            world["rates"] = {rate: world["stats"].result()[rate] for rate in RATES}
            worlds.append(world)
    table = summarise(worlds, args.seed)
    fit = size_or_make_up(worlds, np.random.default_rng(args.seed))

    print(f"{probe_name(args)}: {len(scenarios)} scenarios x {args.per_size} generated worlds per size (seeds "
          f"{args.first}-{args.first + args.per_size - 1}) x {args.villages} villages; [low, high]: 95% bootstrap "
          "interval over the worlds")
    print()
    print("| world | revenge | eligible avengers | timid share | mourning | fear_chosen | fear |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for w in worlds:
        r = w["rates"]
        share = fmt(w["timid"] / w["eligible"]) if w["eligible"] else "n/a"
        print(f"| {w['label']} | {fmt(r['revenge_rate'])} | {w['eligible']} | {share} | {fmt(r['mourning_rate'])} | "
              f"{fmt(r['fear_chosen_rate'])} | {fmt(r['fear_rate'])} |")
    print()
    print("| NPCs | rate | pooled [95%] | lowest world | highest world | sd between worlds | worlds at target |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for size, rates in table.items():
        for rate in RATES:
            r = rates[rate]
            iv = r["interval"]
            pooled_text = fmt(r["pooled"]) + (f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else "")
            passing = "-" if r["passing"] is None else f"{r['passing']} of {r['worlds']}"
            print(f"| {size} | {rate} | {pooled_text} | {fmt(r['low'])} | {fmt(r['high'])} | {fmt(r['sd'])} | "
                  f"{passing} |")
    print()
    print(f"revenge by the avengers' bravery, pooled over the worlds (timid: bravery <= {MetricParams().timid}):")
    for size, rates in table.items():
        t, b = rates["revenge_timid"], rates["revenge_bold"]
        print(f"  {size:>3} NPCs: timid {fmt(t['pooled'])} of {t['eligible']}, bold {fmt(b['pooled'])} of "
              f"{b['eligible']}")
    print()
    if fit is None:
        print("revenge against size and make-up: too few worlds with eligible avengers to fit")
    else:
        print(f"revenge against size and make-up (least squares over {fit['worlds']} worlds):")
        for name, c in fit.items():
            if name != "worlds":
                print(f"  {name}: {c['value']:+.3f} [{c['interval'][0]:+.3f}, {c['interval'][1]:+.3f}]")
    if args.json:
        print(json.dumps({"policy": probe_name(args), "by_size": table, "fit": fit,
                          "worlds": [{"label": w["label"], "size": w["size"], "eligible": w["eligible"],
                                      **{key: w[key] for key in AVENGERS}, "rates": w["rates"]} for w in worlds]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
