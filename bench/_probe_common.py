"""What the policy probes (mourning_gaps.py, flight_probe.py) share: their command line and how it is read."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def add_probe_args(parser: argparse.ArgumentParser, *, scenarios: str, seed: int) -> None:
    """--policy, --world, --villages, --seed, --scenarios, --tuning, --greedy and --json, with these defaults."""
    parser.add_argument("--policy", default="default", help="policy file or 'default' (default: %(default)s)")
    parser.add_argument("--world", default="generated:12:10000",
                        help="world id, world file or generated:N:SEED (default: %(default)s)")
    parser.add_argument("--villages", type=int, default=16, help="villages per scenario (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=seed, help="simulation and policy seed (default: %(default)s)")
    parser.add_argument("--scenarios", default=scenarios,
                        help="comma-separated scenario ids, or all (default: %(default)s)")
    parser.add_argument("--tuning", action="append", default=[], metavar="FIELD=VALUE",
                        help="engine field changed on top of the policy's own world (repeatable)")
    parser.add_argument("--greedy", action="store_true",
                        help="play the runs with each NPC's most likely action, as village eval --deterministic "
                             "(default: sampled, as the bridge and the sandbox play)")
    parser.add_argument("--personality-strength", type=float, default=None, metavar="S",
                        help="play each NPC's learned personality S times as strongly (npc_brains.personality; "
                             "default: 1, the trained policy)")
    parser.add_argument("--personality-traits", default=None, metavar="T,...",
                        help="the traits --personality-strength strengthens (default: all five)")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (tqdm, on stderr)")


@contextmanager
def tick_progress(scenarios: list[Any], quiet: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar over the scenarios' ticks (stderr); yields the per-tick callback for run_scenario."""
    from tqdm import tqdm

    with tqdm(total=sum(s.ticks for s in scenarios), desc="probe", unit="tick", file=sys.stderr,
              disable=quiet, leave=False) as bar:
        yield lambda _tick: bar.update()


def read_probe_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Any, list[Any], Any]:
    """(world spec, scenarios, policy) from the parsed flags; a bad flag exits with a one-line error (code 2)."""
    if args.villages < 1:
        parser.error(f"--villages must be at least 1, got {args.villages}")
    from engine.scenarios import bundled_scenarios, load_scenario
    from engine.vec_env import resolve_world
    from npc_brains import load_policy
    from village.cli import UserError
    from village.cmd_eval import _override_tuning

    try:
        spec = resolve_world(args.world)
        names = bundled_scenarios() if args.scenarios == "all" else args.scenarios.split(",")
        scenarios = [load_scenario(name) for name in names]
        policy = load_policy(args.policy, seed=args.seed)  # seeded: the same flags give the same figures
        if args.tuning:
            _override_tuning([(args.policy, policy)], args.tuning)
    except (UserError, ValueError, OSError) as exc:  # bad world, scenario, policy file or tuning flag
        parser.error(str(exc))
    return spec, scenarios, policy


def add_untrained_arg(parser: argparse.ArgumentParser) -> None:
    """--untrained: probe the policy's untrained network (`village eval --compare random_init`'s) instead;
    --untrained-draws K: K of them as one population (`village eval --random-init-draws K`)."""
    parser.add_argument("--untrained", action="store_true",
                        help="run the policy's untrained network (random_init) in the policy's world")
    parser.add_argument("--untrained-draws", type=int, metavar="K",
                        help="with --untrained: K untrained networks (torch seeds SEED to SEED + K - 1), NPC i acting "
                             "with draw i mod K, as village eval --random-init-draws (default: one)")


def probe_name(args: argparse.Namespace) -> str:
    """The probed policy's name in the report: --policy's, marked when --untrained."""
    if not getattr(args, "untrained", False):
        return args.policy
    draws = getattr(args, "untrained_draws", None)
    return f"{args.policy} (untrained, {draws} draws)" if draws and draws > 1 else f"{args.policy} (untrained)"


def probe_policy(parser: argparse.ArgumentParser, args: argparse.Namespace, policy: Any) -> tuple[Any, str]:
    """(policy, name) to probe: the loaded one, or with --untrained its freshly initialised network (or
    --untrained-draws K of them)."""
    draws = getattr(args, "untrained_draws", None)
    if draws is not None and not getattr(args, "untrained", False):
        parser.error("--untrained-draws: it sets how many untrained networks --untrained plays; expected "
                     "--untrained with it")
    if draws is not None and draws < 1:
        parser.error(f"--untrained-draws: expected an integer >= 1, got {draws}")
    if getattr(args, "untrained", False):
        from npc_brains.evaluate import random_init_policy

        fresh = random_init_policy(policy, seed=args.seed, draws=draws or 1)
        if fresh is None:
            parser.error(f"{args.policy} has no network to re-initialise")
        if getattr(policy, "tuning", None) is not None:  # --tuning's world, not only the one the policy learned in
            fresh.tuning = policy.tuning
        policy = fresh
    strength = getattr(args, "personality_strength", None)
    if strength is None and getattr(args, "personality_traits", None) is not None:
        parser.error("--personality-traits: it sets which traits --personality-strength strengthens; expected "
                     "--personality-strength with it")
    if strength is not None:
        from village.cli import UserError, personality_flag

        try:
            policy = personality_flag(policy, strength, seed=args.seed, traits=args.personality_traits)
        except UserError as exc:
            parser.error(str(exc))
    return policy, probe_name(args)


def run_probe(parser: argparse.ArgumentParser, args: argparse.Namespace,
              probe: Callable[[Any, Any, list[Any], Callable[[int], None]], dict]) -> tuple[str, dict]:
    """Read the probe flags, pick the policy (--untrained too) and run `probe(policy, spec, scenarios, on_tick)`
    under a progress bar; (the policy's report name, what the probe returned)."""
    spec, scenarios, policy = read_probe_args(parser, args)
    policy, name = probe_policy(parser, args, policy)
    with tick_progress(scenarios, args.quiet) as on_tick:
        return name, probe(policy, spec, scenarios, on_tick)


def course(activities: list[int], steps: int = 4) -> str:
    """The first `steps` activities as 'talk > flee > flee > flee'."""
    from engine.constants import ACTION_NAMES

    return " > ".join(ACTION_NAMES[a] for a in activities[:steps])


def print_courses(courses: dict[str, int]) -> None:
    """One line per course, commonest first: its count and the course."""
    for seq, count in courses.items():
        print(f"  {count:4d}  {seq}")
