"""Two policies on the same villages: each targeted rate per world size, and their difference with a paired interval.

Judging a change (a lever, a seed, another algorithm) by two `village eval` runs compares two figures that each
move by chance by about as much as most changes do (docs/emergence.md, "Thirty-first session"). Here both policies
play the same scenario runs with the same simulation seeds, villages are resampled together, and what the villages
share (who was killed, who saw it, who is kin) cancels out of the difference. Prints, per world size, each rate of
A and of B with its 95% bootstrap interval over the villages, and A - B with its paired interval; a difference
whose interval excludes 0 is marked, and one line lists them (`beyond_chance` in the JSON). Then each side's
personality diversity per size: SND of its probabilities and SND as played (`village eval`'s `diversity` and
`diversity_played`), without intervals.

    python bench/paired_eval.py --a runs/x/policy.pt --b default --worlds generated:24:10000,generated:96:10000
    python bench/paired_eval.py --a mappo --b default --seeds 32 --json

The worlds default to the issue round's sweep (`village eval --sweep`: two held-out worlds of 12, 24, 48 and 96
NPCs). `--worlds validation` plays two worlds of each of those sizes that are neither trained on nor held out
(generated:N:5000 and 5001): choose between candidates there, and measure only the chosen one on the sweep, so the
sweep's figures are not the best of several draws. `validation:8` (or `sweep:8`) plays eight worlds of each size
instead of two, since worlds of one size differ. `--tuning FIELD=VALUE` (repeatable) changes both policies'
worlds alike. `--greedy a` (or `b`, `both`) plays that side greedily (`village eval --deterministic`), so that one
policy played greedily can be judged against itself sampled: `--a default --b default --greedy a`.
`--temperature-a T` (or `-b`) samples that side's network from softmax(logits / T) (`village eval --temperature`).
`--personality-strength-a S` (or `-b`) plays that side's NPCs' learned personalities S times as strongly
(`village eval --personality-strength`, npc_brains.personality).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="policy A: a policy file, default, mappo, scripted or random")
    parser.add_argument("--b", default="default", help="policy B, the reference (default: %(default)s)")
    parser.add_argument("--worlds", default="sweep",
                        help="comma-separated world ids, world files or generated:N:SEED; sweep (the held-out "
                             "sweep's) or validation (to choose between policies), each with :K for K worlds per "
                             "size instead of two (validation:8) (default: sweep)")
    parser.add_argument("--scenarios", default="all", help="comma-separated scenario ids, or all (default: all)")
    parser.add_argument("--seeds", type=int, default=32, help="villages per scenario and world (default: 32)")
    parser.add_argument("--seed", type=int, default=0, help="base simulation seed (default: 0)")
    parser.add_argument("--tuning", action="append", default=[], metavar="FIELD=VALUE",
                        help="engine field changed on top of each policy's own world (repeatable)")
    parser.add_argument("--greedy", choices=("a", "b", "both"),
                        help="the side(s) that take their most likely action instead of sampling, as village eval "
                             "--deterministic (default: both sample)")
    for side in ("a", "b"):
        parser.add_argument(f"--temperature-{side}", default=None, metavar="T",
                            help=f"policy {side.upper()} samples from softmax(logits / T), as village eval "
                                 "--temperature (default: 1)")
    for side in ("a", "b"):
        parser.add_argument(f"--personality-strength-{side}", default=None, metavar="S",
                            help=f"policy {side.upper()} plays each NPC's learned personality S times as strongly, "
                                 "as village eval --personality-strength (default: 1)")
        parser.add_argument(f"--personality-traits-{side}", default=None, metavar="T,...",
                            help=f"the traits --personality-strength-{side} strengthens, as village eval "
                                 "--personality-traits (default: all five)")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (tqdm, on stderr)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.seed < 0:
        parser.error(f"--seed must be at least 0, got {args.seed}")
    args.parser = parser
    return args


def named_worlds(text: str) -> list[str] | None:
    """sweep / validation, optionally :K worlds per size (two by default), as world labels; None for a list."""
    from npc_brains.evaluate import HELD_OUT_SEED_MIN, SWEEP_PER_SIZE, VALIDATION_SEED_MIN, size_worlds

    name, _, count = text.partition(":")
    first = {"sweep": HELD_OUT_SEED_MIN, "validation": VALIDATION_SEED_MIN}.get(name)
    if first is None:
        return None
    if not count:
        return list(size_worlds(SWEEP_PER_SIZE, first))
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"--worlds {name}:K: K is worlds per size, expected an integer >= 1, got {count!r}")
    return list(size_worlds(int(count), first))


def load(args: argparse.Namespace) -> tuple[list[tuple[str, Any]], list[Any]]:
    """([(name, policy) for A and B], [A's EvalSpec, B's]) from the flags; a bad flag exits with a one-line error.
    The two specs differ at most in `deterministic` (`--greedy`): the same scenarios, worlds and villages."""
    import dataclasses

    from engine.scenarios import bundled_scenarios, load_scenario
    from engine.vec_env import resolve_world
    from npc_brains import PolicyError, load_policy, policy_tuning
    from npc_brains.evaluate import EvalSpec
    from npc_brains.runtime import set_temperature
    from village.cli import UserError, personality_flag
    from village.cmd_eval import _override_tuning

    try:
        labels = named_worlds(args.worlds) or [w.strip() for w in args.worlds.split(",")]
        worlds = [(label, resolve_world(label)) for label in labels]
        names = bundled_scenarios() if args.scenarios == "all" else args.scenarios.split(",")
        scenarios = [load_scenario(name) for name in names]
        policies = [(f"A ({args.a})", load_policy(args.a, seed=args.seed)),
                    (f"B ({args.b})", load_policy(args.b, seed=args.seed))]
        tunings = [policy_tuning(policy) for _, policy in policies]
        learned = next((t for t in tunings if t is not None), None)
        for (_, policy), tuning in zip(policies, tunings, strict=True):
            if tuning is None and learned is not None:  # rules and random actions have no world of their own
                policy.tuning = learned
        if args.tuning:
            _override_tuning(policies, args.tuning)
        for side, (_, policy) in zip("ab", policies, strict=True):
            temperature = getattr(args, f"temperature_{side}")
            if temperature is not None:
                if args.greedy in (side, "both"):
                    raise UserError(f"--temperature-{side}: --greedy plays that side's most likely action and "
                                    "samples nothing; expected one of the two")
                set_temperature(policy, temperature, f"--temperature-{side}")
        for k, side in enumerate("ab"):
            strength = getattr(args, f"personality_strength_{side}")
            if strength is None and getattr(args, f"personality_traits_{side}") is not None:
                raise UserError(f"--personality-traits-{side}: it sets which traits --personality-strength-{side} "
                                "strengthens; expected both")
            if strength is not None:
                name, policy = policies[k]
                policies[k] = (name, personality_flag(policy, strength, f"--personality-strength-{side}",
                                                      seed=args.seed,
                                                      traits=getattr(args, f"personality_traits_{side}"),
                                                      traits_flag=f"--personality-traits-{side}"))
    except (UserError, PolicyError, ValueError, OSError) as exc:  # bad world, scenario, policy or tuning flag
        args.parser.error(str(exc))
    spec = EvalSpec(scenarios, worlds, villages=args.seeds, seed=args.seed)
    greedy = {"a": (True, False), "b": (False, True), "both": (True, True)}.get(args.greedy, (False, False))
    return policies, [dataclasses.replace(spec, deterministic=side) for side in greedy]


def by_size(policy: Any, spec: Any, on_cell: Any) -> tuple[dict[int, Any], dict[int, dict[str, float]]]:
    """({NPCs: Stats}, {NPCs: {diversity, diversity_played}}) of the policy over every scenario x world, the worlds
    pooled by size (SND weighted by probe observations, as `village eval`), cells in a fixed order."""
    from engine.metrics import Stats
    from npc_brains.evaluate import SndPool, evaluate_cell

    out: dict[int, Any] = {}
    pool = SndPool()
    for si in range(len(spec.scenarios)):
        for wi, (_label, world) in enumerate(spec.worlds):
            cell = evaluate_cell(policy, spec, si, wi)
            on_cell()
            size = len(world.npcs)
            st = out.setdefault(size, Stats())
            if cell.stats is not None:  # None: a scenario this world cannot run, skipped alike for both policies
                st += cell.stats
            pool.add(size, cell)
    return out, {size: pool.figures(size) for size in pool.probed()}


def compare(stats_a: dict[int, Any], stats_b: dict[int, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{size: {rate: {a, a_interval, b, b_interval, diff, diff_interval}}}."""
    from engine.metrics import INTERVAL_RATES, paired_intervals

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for size in sorted(stats_a):
        a, b = stats_a[size], stats_b[size]
        ra, rb = a.result(), b.result()
        ia, ib, diff = a.intervals(), b.intervals(), paired_intervals(a, b)
        out[str(size)] = {
            rate: {"a": ra[rate], "a_interval": ia[rate], "b": rb[rate], "b_interval": ib[rate],
                   "diff": None if ra[rate] is None or rb[rate] is None else ra[rate] - rb[rate],
                   "diff_interval": diff[rate]}
            for rate in INTERVAL_RATES
        }
    return out


def beyond_chance(table: dict[str, dict[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """The rates whose paired interval excludes 0: {"lower": ["revenge_rate at 24", ...], "higher": [...]} (A - B)."""
    out: dict[str, list[str]] = {"lower": [], "higher": []}
    for size, rates in table.items():
        for rate, r in rates.items():
            d = r["diff_interval"]
            if d is not None and (d[0] > 0 or d[1] < 0):
                out["higher" if d[0] > 0 else "lower"].append(f"{rate} at {size}")
    return out


def fmt(value: float | None, interval: list[float] | None, sign: bool = False) -> str:
    if value is None:
        return "n/a"
    text = f"{value:+.3f}" if sign else f"{value:.3f}"
    if interval is None:
        return text
    low, high = interval
    return f"{text} [{low:+.3f}, {high:+.3f}]" if sign else f"{text} [{low:.3f}, {high:.3f}]"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    policies, specs = load(args)
    from tqdm import tqdm

    spec = specs[0]
    cells = len(spec.scenarios) * len(spec.worlds)
    with tqdm(total=2 * cells, unit="run", file=sys.stderr, disable=args.quiet, leave=False) as bar:
        played = [by_size(policy, side, bar.update) for (_, policy), side in zip(policies, specs, strict=True)]
    table = compare(*(stats for stats, _ in played))
    snd = [d for _, d in played]
    (name_a, _), (name_b, _) = policies
    traits = (args.personality_traits_a, args.personality_traits_b)
    name_a, name_b = (f"{name}{'' if s is None else f' at strength {s}'}{'' if tr is None else f' on {tr}'}"
                      f"{' greedy' if side.deterministic else '' if t is None else f' at T={t}'}"
                      for name, side, t, s, tr in ((name_a, specs[0], args.temperature_a, args.personality_strength_a,
                                                    traits[0]),
                                                   (name_b, specs[1], args.temperature_b, args.personality_strength_b,
                                                    traits[1])))
    print(f"{name_a} against {name_b} on the same villages: {len(spec.scenarios)} scenarios x "
          f"{', '.join(label for label, _ in spec.worlds)} x {spec.villages} seeds (seed {spec.seed}); "
          "[low, high]: 95% bootstrap intervals over the villages, A - B's paired; * its interval excludes 0")
    print()
    print("| NPCs | rate | A | B | A - B |")
    print("|---:|---|---:|---:|---:|")
    for size, rates in table.items():
        for rate, r in rates.items():
            d = r["diff_interval"]
            mark = " *" if d is not None and (d[0] > 0 or d[1] < 0) else ""
            print(f"| {size} | {rate} | {fmt(r['a'], r['a_interval'])} | {fmt(r['b'], r['b_interval'])} | "
                  f"{fmt(r['diff'], d, sign=True)}{mark} |")
    marked = beyond_chance(table)
    print()
    print("beyond chance: " + ("; ".join(f"A {side} in {', '.join(items)}" for side, items in marked.items() if items)
                               or "no rate differs"))
    print()
    print("| NPCs | SND A | SND B | as played A | as played B |")
    print("|---:|---:|---:|---:|---:|")
    for size in sorted(set(snd[0]) | set(snd[1])):
        cells = [fmt(side.get(size, {}).get(key), None) for key in ("diversity", "diversity_played") for side in snd]
        print(f"| {size} | " + " | ".join(cells) + " |")
    if args.json:
        diversity = {side: {str(k): v for k, v in d.items()} for side, d in zip("ab", snd, strict=True)}
        print(json.dumps({"a": args.a, "b": args.b, "greedy": args.greedy, "temperature_a": args.temperature_a,
                          "temperature_b": args.temperature_b,
                          "personality_strength_a": args.personality_strength_a,
                          "personality_strength_b": args.personality_strength_b,
                          "personality_traits_a": args.personality_traits_a,
                          "personality_traits_b": args.personality_traits_b, "by_size": table,
                          "beyond_chance": marked,
                          "diversity": diversity}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
