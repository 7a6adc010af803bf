"""`village eval`: measure whether mourning, revenge and fear emerge from a policy, on the scenario suite.

Runs every scenario (worlds/scenarios/) on every world with K seeds (K villages batched in one simulation),
for the given policy and the comparisons (MAPPO if bundled, the scripted rules, an untrained network of the
same architecture, random actions); prints a markdown table and the issue's thresholds with pass/fail. With
--json the last line printed is one JSON object {policy: {metric: value}}. Definitions: docs/emergence.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from village.cli import UserError, add_personality_arguments

DEFAULT_SEEDS = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="default",
                        help="the policy to measure: default (the bundled Dr. MAS policy), mappo (the bundled "
                             "MAPPO policy), scripted (hand-written rules), random (uniform valid actions), or a "
                             "policy file written by `village train` (default: default)")
    parser.add_argument("--scenarios", default="all",
                        help="comma-separated scenario ids or scenario files, or 'all' for the bundled suite "
                             "(default: all); a shipped scenario outside the suite (suite = false, such as "
                             "return-next-day) runs only when named")
    parser.add_argument("--worlds", default=None,
                        help="comma-separated world ids, world files or generated:N:SEED (default: village-v1 "
                             "and two held-out generated 12-NPC worlds, seeds 10000 and 10001)")
    parser.add_argument("--sweep", action="store_true",
                        help="the held-out size sweep: --worlds becomes two held-out generated worlds of each of "
                             "12, 24, 48 and 96 NPCs (generator seeds 10000 and 10001); the output adds a table "
                             "per size and the second round's targets per size (docs/emergence.md)")
    parser.add_argument("--sweep-worlds", default=None, metavar="K",
                        help="with --sweep: K held-out worlds of each size instead of two (generator seeds 10000 "
                             "to 10000 + K - 1); two worlds of one size can differ by more than the sizes do, so "
                             "more worlds measure a size's rate with less luck of the draw; with 4 or more the "
                             "targets also get an interval over the worlds (default: 2)")
    parser.add_argument("--sizes", default=None, metavar="N,...",
                        help="with --sweep: play only its worlds of these sizes (among 12, 24, 48, 96), on the "
                             "villages the whole sweep gives them, so that the sweep can run in parts (over "
                             "processes or machines, each with its own --out) and --merge reads the parts as one "
                             "run (default: every size)")
    parser.add_argument("--seeds", default=str(DEFAULT_SEEDS),
                        help=f"villages (simulation seeds) per scenario and world (default: {DEFAULT_SEEDS})")
    parser.add_argument("--seed", default="0", help="base simulation seed (default: 0)")
    parser.add_argument("--compare", default="mappo,scripted,random_init,random",
                        help="comma-separated comparisons among mappo, scripted, random_init, random, or 'none' "
                             "(default: all four; unavailable ones are skipped with a note)")
    parser.add_argument("--random-init-draws", default="1", metavar="K",
                        help="the random_init comparison as K untrained networks (torch seeds SEED to SEED + K - 1), "
                             "NPC i acting with draw i mod K, so that the untrained figure is not one network's "
                             "habit (default: 1)")
    parser.add_argument("--random-init-seed", default=None, metavar="S",
                        help="the first untrained network's torch seed, so that one population can be played on "
                             "villages of another --seed (a sweep split over processes; default: --seed)")
    parser.add_argument("--max-ticks", default=None,
                        help="cap every scenario's episode length (ticks), for quick runs (default: no cap)")
    parser.add_argument("--tuning", action="append", default=None, metavar="FIELD=VALUE",
                        help="run every policy with this engine Tuning field changed, on top of the world each "
                             "policy learned (docs/engine.md), e.g. --tuning rumour_error=0.2 for hearsay that can "
                             "name the wrong culprit; repeatable (default: each policy's own tuning)")
    parser.add_argument("--deterministic", action="store_true",
                        help="take each policy's most likely action instead of sampling")
    parser.add_argument("--temperature", default=None, metavar="T",
                        help="sample every network (the policy, mappo, random_init) from softmax(logits / T): "
                             "below 1 NPCs follow their preferences more closely, above 1 less; the rules and "
                             "random actions have none (default: 1, as trained)")
    add_personality_arguments(parser, "every network's (the policy's, mappo's, random_init's) NPCs",
                              note="; with --deterministic too")
    parser.add_argument("--json", action="store_true",
                        help="end the output with one line of JSON: {policy: {metric: value, ...}, ...}")
    parser.add_argument("--out", metavar="DIR",
                        help="also write results.json, table.md and PNG plots (rates, reach, diversity, distance)")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 if a threshold fails")
    parser.add_argument("--merge", metavar="DIR,DIR,...",
                        help="run nothing: merge the --out directories of one held-out sweep run in parts split by "
                             "world size (over processes or machines, each part with --sweep --sizes) and print the "
                             "tables per size and the targets, as one run would; with --out and --json as for a run "
                             "(docs/emergence.md, \"A sweep in parts\")")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    from village.cmd_train import add_ray_arguments

    add_ray_arguments(parser, "evaluate the policies side by side on Ray actors (the [distributed] extra; "
                              "docs/distributed.md), with the same results: local starts Ray here, auto joins "
                              "this node's cluster, HOST:PORT a head's address",
                      "evaluation actors, one policy each at a time (default: 2)")


def _int_flag(text: str, flag: str, minimum: int) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UserError(f"{flag}: expected an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise UserError(f"{flag}: expected an integer >= {minimum}, got {value}")
    return value


def _untrained_seed(args: argparse.Namespace) -> int:
    """The untrained population's first torch seed: --random-init-seed, else --seed."""
    if args.random_init_seed is None:
        return _int_flag(args.seed, "--seed", 0)
    return _int_flag(args.random_init_seed, "--random-init-seed", 0)


def _items(text: str, flag: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise UserError(f"{flag}: expected a comma-separated list without empty entries, got {text!r}")
    return items


def _load_main_policy(choice: str, seed: int) -> tuple[str, Any]:
    from npc_brains import PolicyError, load_policy

    try:
        policy = load_policy(choice, seed=seed)
    except PolicyError as exc:
        raise UserError(f"--policy: {exc}") from None
    return policy.name, policy


def _comparisons(names: list[str], main_name: str, main: Any, seed: int, notes: list[str],
                 draws: int = 1, untrained_seed: int = 0) -> list[tuple[str, Any]]:
    from npc_brains import PolicyError, load_policy, policy_tuning
    from npc_brains.evaluate import random_init_policy

    out = []
    for name in names:
        if name == main_name:
            continue
        if name == "mappo":
            try:
                policy = load_policy("mappo", seed=seed)
            except PolicyError as exc:
                notes.append(f"mappo skipped: {exc}")
                continue
            out.append(("mappo", policy))
        elif name == "random_init":
            fresh = random_init_policy(main, seed=untrained_seed, draws=draws)
            if fresh is None:
                notes.append(f"random_init skipped: {main_name} has no network to re-initialise")
                continue
            if draws > 1:
                notes.append(f"random_init: {draws} untrained networks (torch seeds {untrained_seed} to "
                             f"{untrained_seed + draws - 1}), "
                             f"NPC i acting with draw i mod {draws}")
            out.append(("random_init", fresh))
        else:
            baseline = load_policy(name, seed=seed)
            # rules and random actions have no world of their own: they run in the main policy's
            baseline.tuning = policy_tuning(main)
            out.append((name, baseline))
    return out


def _temperature_flag(text: str | None, deterministic: bool) -> float | None:
    from village.cli import temperature_flag

    if text is not None and deterministic:
        raise UserError("--temperature: it sets how sharply policies sample, and --deterministic samples nothing; "
                        "expected one of the two")
    return temperature_flag(text)


def _set_temperature(policies: list[tuple[str, Any]], temperature: float, notes: list[str]) -> None:
    """Sample every network at `temperature`; the main policy must have one."""
    from village.cli import apply_temperature

    for k, (_name, policy) in enumerate(policies):
        if k == 0 or hasattr(policy, "temperature"):  # the rules and random actions compared have none
            apply_temperature(policy, temperature)
    notes.append(f"the networks sample at temperature {temperature:g}")


def _set_personality_strength(policies: list[tuple[str, Any]], strength: str, traits: str | None, seed: int,
                               notes: list[str]) -> list[tuple[str, Any]]:
    """Every network played at personality `strength` on `traits`; the main policy must have a learned
    personality."""
    from village.cli import personality_flag

    out = []
    for k, (name, policy) in enumerate(policies):
        if k == 0 or hasattr(policy, "temperature"):  # the rules and random actions compared have none
            policy = personality_flag(policy, strength, seed=seed, traits=traits)
        out.append((name, policy))
    on = "" if traits is None else f" (on {traits})"
    notes.append(f"the networks play their personalities at strength {float(strength):g}{on}")
    return out


def _override_tuning(policies: list[tuple[str, Any]], flags: list[str]) -> None:
    """Apply `--tuning FIELD=VALUE` flags on top of each policy's own engine tuning."""
    from npc_brains import policy_tuning
    from npc_brains.tuning import TuningError, with_overrides
    from village.cmd_train import _tuning_flags

    overrides = _tuning_flags(flags)
    try:
        for _, policy in policies:
            policy.tuning = with_overrides(policy_tuning(policy), overrides)
    except TuningError as exc:
        raise UserError(f"--{exc}") from None


# the flags that --merge reads; every other flag sets up a run, which --merge does not make
MERGE_FLAGS = ("merge", "out", "json", "quiet")


def merge(args: argparse.Namespace) -> int:
    """`village eval --merge`: the per-size tables and targets of a sweep run in parts, from their results.json."""
    from npc_brains.evaluate import MergeError, merge_by_size, size_report, target_checks, without_curves

    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    for key, value in vars(args).items():
        if key not in MERGE_FLAGS and value != defaults.get_default(key):
            flag = "--" + key.replace("_", "-")
            raise UserError(f"--merge: it runs nothing and reads the parts' own settings; {flag} does not apply")
    parts = []
    for directory in _items(args.merge, "--merge"):
        path = Path(directory) / "results.json"
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"--merge: no results.json in {directory!r} (write one with village eval --out DIR)") \
                from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"--merge: cannot read {str(path)!r}: {exc}") from None
        parts.append((directory, payload))
    try:
        main_name, results, config = merge_by_size(parts)
    except MergeError as exc:
        raise UserError(f"--merge: {exc}") from None
    targets = target_checks(results, main_name)
    sizes = ", ".join(f"{label} ({', '.join(sorted(p['results'][main_name]['held_out_by_size'], key=int))} NPCs)"
                      for label, p in parts)
    print(f"village eval --merge: policy {main_name} vs {', '.join(n for n in results if n != main_name) or 'nothing'}"
          f"; {len(parts)} parts: {sizes}")
    if "random" in results:
        print("note: random: uniform random actions draw on each part's --seed, so its rows are not one run's "
              "(no target reads them)")
    print()
    report = size_report(results, targets, main_name)
    print(report)
    if args.out is not None:
        out_dir = Path(args.out)
        payload = {"policy": main_name, "config": {**config, "merged_from": [label for label, _ in parts]},
                   "targets_by_size": {n: [c.__dict__ for c in cs] for n, cs in targets.items()}, "results": results}
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
            (out_dir / "table.md").write_text(f"# village eval --merge: {main_name}\n\n{report}\n", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--out: cannot write to {str(out_dir)!r}: {exc.strerror or exc}") from None
        print(f"wrote results.json and table.md to {out_dir}")
    if args.json:
        print(json.dumps({name: {"held_out_by_size": without_curves(r["held_out_by_size"])}
                          for name, r in results.items()}, separators=(",", ":")))
    return 0


@dataclass
class Plan:
    """What the flags ask to run, checked: scenarios x worlds x villages, the comparisons and where to write."""

    villages: int
    seed: int
    max_ticks: int | None
    compare: list[str]
    draws: int
    untrained_seed: int
    temperature: float | None
    scenarios: list[Any]
    world_labels: list[str]
    worlds: list[tuple[str, Any]]
    out_dir: Path | None
    ray: Any  # RayOptions, connected; None: play here
    world_index: tuple[int, ...] | None  # --sizes: each world's place in the whole sweep


def run(args: argparse.Namespace) -> int:
    if args.merge is not None:
        return merge(args)
    plan = _plan(args)
    notes: list[str] = []
    policies = _policies(args, plan, notes)
    results, wall = _play(args, plan, policies, notes)
    return _report(args, plan, policies, results, notes, wall)


def _plan(args: argparse.Namespace) -> Plan:
    """Check every flag before anything is loaded or played; UserError names the first bad one."""
    from engine.scenarios import ScenarioError, bundled_scenarios, load_scenario
    from engine.vec_env import resolve_world
    from npc_brains.evaluate import COMPARISONS, DEFAULT_WORLDS, SWEEP_PER_SIZE, SWEEP_SIZES, size_worlds, world_size

    villages = _int_flag(args.seeds, "--seeds", 1)
    seed = _int_flag(args.seed, "--seed", 0)
    max_ticks = None if args.max_ticks is None else _int_flag(args.max_ticks, "--max-ticks", 1)
    compare = [] if args.compare.strip() == "none" else _items(args.compare, "--compare")
    for name in compare:
        if name not in COMPARISONS:
            raise UserError(f"--compare: unknown comparison {name!r}; expected some of {', '.join(COMPARISONS)} "
                            f"or 'none'")
    draws = _int_flag(args.random_init_draws, "--random-init-draws", 1)
    temperature = _temperature_flag(args.temperature, args.deterministic)
    if args.personality_strength is not None:
        from npc_brains.personality import check_personality, check_traits

        try:
            check_personality(args.personality_strength, "--personality-strength")
            check_traits(args.personality_traits, "--personality-traits")
        except ValueError as exc:
            raise UserError(str(exc)) from None
    elif args.personality_traits is not None:
        raise UserError("--personality-traits: it sets which traits --personality-strength strengthens; expected "
                        "--personality-strength with it")
    if draws > 1 and "random_init" not in compare:
        raise UserError("--random-init-draws: it sets the random_init comparison; expected random_init in --compare")
    untrained_seed = _untrained_seed(args)
    if args.random_init_seed is not None and "random_init" not in compare:
        raise UserError("--random-init-seed: it sets the random_init comparison; expected random_init in --compare")
    scenario_ids = bundled_scenarios() if args.scenarios.strip() == "all" else _items(args.scenarios, "--scenarios")
    try:
        scenarios = [load_scenario(s) for s in scenario_ids]
    except ScenarioError as exc:
        raise UserError(f"--scenarios: {exc}") from None
    if args.sweep and args.worlds is not None:
        raise UserError("--sweep: it sets the worlds itself; expected no --worlds with it")
    if args.sweep_worlds is not None and not args.sweep:
        raise UserError("--sweep-worlds: it sets how many worlds --sweep plays; expected --sweep with it")
    per_size = SWEEP_PER_SIZE if args.sweep_worlds is None else _int_flag(args.sweep_worlds, "--sweep-worlds", 1)
    world_labels = list(size_worlds(per_size) if args.sweep else DEFAULT_WORLDS) if args.worlds is None else _items(
        args.worlds, "--worlds")
    world_index = None
    if args.sizes is not None:
        if not args.sweep:
            raise UserError("--sizes: it picks sizes of --sweep's worlds; expected --sweep with it")
        sizes = {_int_flag(text, "--sizes", 1) for text in _items(args.sizes, "--sizes")}
        unknown = sorted(sizes - set(SWEEP_SIZES))
        if unknown:
            raise UserError(f"--sizes: {unknown[0]} is not a size of the sweep; expected some of "
                            f"{', '.join(map(str, SWEEP_SIZES))}")
        picked = [(j, label) for j, label in enumerate(world_labels) if world_size(label) in sizes]
        world_index = tuple(j for j, _ in picked)
        world_labels = [label for _, label in picked]
    worlds = [(label, resolve_world(label)) for label in world_labels]
    out_dir = None
    if args.out:
        out_dir = Path(args.out)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out: cannot create {str(out_dir)!r}: {exc.strerror or exc}") from None
    from village.cmd_train import ray_options

    return Plan(villages, seed, max_ticks, compare, draws, untrained_seed, temperature, scenarios, world_labels,
                worlds, out_dir, ray_options(args), world_index)


def _policies(args: argparse.Namespace, plan: Plan, notes: list[str]) -> list[tuple[str, Any]]:
    """The measured policy first, then its comparisons, each played as the flags say."""
    main_name, main = _load_main_policy(args.policy, plan.seed)
    policies = [(main_name, main), *_comparisons(plan.compare, main_name, main, plan.seed, notes, plan.draws,
                                                 plan.untrained_seed)]
    if args.tuning:
        _override_tuning(policies, args.tuning)
    if plan.temperature is not None:
        _set_temperature(policies, plan.temperature, notes)
    if args.personality_strength is not None:
        policies = _set_personality_strength(policies, args.personality_strength, args.personality_traits,
                                             plan.seed, notes)
    return policies


def _play(args: argparse.Namespace, plan: Plan, policies: list[tuple[str, Any]],
          notes: list[str]) -> tuple[dict[str, Any], float]:
    """Every policy on every scenario run (here, or on Ray actors with --ray); (results, wall seconds)."""
    from tqdm import tqdm

    from npc_brains.evaluate import EvalSpec, add_diversity_ratio, evaluate

    spec = EvalSpec(plan.scenarios, plan.worlds, villages=plan.villages, seed=plan.seed, max_ticks=plan.max_ticks,
                    deterministic=args.deterministic, world_index=plan.world_index)
    total = len(policies) * len(plan.scenarios) * len(plan.worlds)
    started = time.perf_counter()
    with tqdm(total=total, file=sys.stderr, disable=args.quiet, unit="run", dynamic_ncols=True) as bar:
        calls = [0]

        def progress(desc: str) -> None:  # called as each run starts
            if calls[0]:
                bar.update(1)
            calls[0] += 1
            bar.set_description(desc, refresh=False)

        if plan.ray is None:
            results = evaluate(policies, spec, progress=progress, notes=notes)
        else:
            from npc_brains.distributed import evaluate_parallel

            results = evaluate_parallel(policies, spec, plan.ray, progress=progress, notes=notes)
            add_diversity_ratio(results)
        bar.update(total - bar.n)
    return results, time.perf_counter() - started


def _report(args: argparse.Namespace, plan: Plan, policies: list[tuple[str, Any]], results: dict[str, Any],
            notes: list[str], wall: float) -> int:
    """Print the tables, thresholds and targets; write --out; the exit status (--strict)."""
    from npc_brains.evaluate import (
        checks_table,
        json_line,
        markdown_table,
        scenario_table,
        size_report,
        target_checks,
        threshold_checks,
        write_plots,
    )

    main_name = policies[0][0]
    checks, scope = threshold_checks(results, main_name)
    print(f"village eval: policy {main_name} vs {', '.join(n for n, _ in policies[1:]) or 'nothing'}; "
          f"{len(plan.scenarios)} scenarios x {len(plan.worlds)} worlds ({', '.join(plan.world_labels)}) x "
          f"{plan.villages} seeds")
    for note in dict.fromkeys(notes):
        print(f"note: {note}")
    print()
    print(markdown_table(results))
    print()
    print(checks_table(checks, main_name, scope))
    print()
    targets = target_checks(results, main_name)
    if targets:
        print(size_report(results, targets, main_name))
        print()
    print(f"wall time: {wall:.1f} s")
    if plan.out_dir is not None:
        plotted = _write_outputs(plan.out_dir, results, checks, scope, main_name, notes, wall, args,
                                 plan.world_labels, [s.id for s in plan.scenarios], plan.villages, markdown_table,
                                 checks_table, scenario_table, write_plots, targets)
        print(f"wrote results.json, table.md{' and plots' if plotted else ''} to {plan.out_dir}")
    if args.json:
        print(json.dumps(json_line(results), separators=(",", ":")))
    failed = any(c.passed is False for c in checks)
    return 1 if args.strict and failed else 0


def _write_outputs(out_dir: Path, results: dict[str, Any], checks: list[Any], scope: str, main_name: str,
                   notes: list[str], wall: float, args: argparse.Namespace, world_labels: list[str],
                   scenario_ids: list[str], villages: int, markdown_table: Any, checks_table: Any,
                   scenario_table: Any, write_plots: Any, targets: dict[str, list[Any]] | None = None) -> bool:
    """Write results.json, table.md and (with matplotlib) the plots; True if the plots were written."""
    from npc_brains.evaluate import SCALARS

    payload = {
        "policy": main_name,
        "config": {"scenarios": scenario_ids, "worlds": world_labels, "seeds": villages, "seed": args.seed,
                   "max_ticks": args.max_ticks, "deterministic": args.deterministic,
                   "temperature": 1.0 if args.temperature is None else float(args.temperature),
                   "personality_strength": 1.0 if args.personality_strength is None
                   else float(args.personality_strength),
                   "personality_traits": args.personality_traits or "all",
                   "random_init_draws": int(args.random_init_draws),
                   "random_init_seed": _untrained_seed(args)},
        "wall_seconds": round(wall, 2),
        "notes": list(dict.fromkeys(notes)),
        "thresholds": {"scope": scope, "checks": [c.__dict__ for c in checks]},
        "targets_by_size": {n: [c.__dict__ for c in cs] for n, cs in (targets or {}).items()},
        "results": results,
    }
    parts = [f"# village eval: {main_name}", "", markdown_table(results, SCALARS), "", checks_table(checks, main_name,
                                                                                                    scope)]
    if targets:
        from npc_brains.evaluate import size_report

        parts += ["", size_report(results, targets, main_name)]
    for metric in ("mourning_rate", "revenge_rate", "revenge_accuracy", "fear_rate", "consistency"):
        parts += ["", scenario_table(results, metric)]
    if notes:
        parts += ["", *[f"- note: {n}" for n in dict.fromkeys(notes)]]
    try:
        (out_dir / "results.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        (out_dir / "table.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
        try:
            import matplotlib  # noqa: F401  (an optional dependency: the "plots" extra)
        except ImportError:
            print("note: PNG plots skipped: matplotlib is not installed (pip install 'village-npc[plots]')")
            return False
        write_plots(results, out_dir)
        return True
    except OSError as exc:
        raise UserError(f"--out: cannot write to {str(out_dir)!r}: {exc.strerror or exc}") from None
