"""`village demo`: run the world's scenario (village-v1: the player kills Alda at tick 30) with the best
policy available and print the reaction timeline and a summary.

Worlds without scenario events (e.g. from `village new`) get the random-kill scenario instead."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from village.cli import (
    UserError,
    add_personality_arguments,
    apply_temperature,
    personality_flag,
    personality_strength_flag,
    personality_traits_flag,
    temperature_flag,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--world", default="village-v1",
                        help="bundled world id or world file (default: village-v1)")
    parser.add_argument("--policy", default="default",
                        help="who decides what the NPCs do: default (the bundled Dr. MAS policy), mappo (the "
                             "bundled MAPPO policy), scripted (hand-written rules), random (uniform valid "
                             "actions), or a policy file written by `village train` (default: default)")
    parser.add_argument("--ticks", type=int, default=144,
                        help="ticks to run; 1 tick = 10 minutes (default: 144, one day)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default: 0)")
    parser.add_argument("--temperature", default=None, metavar="T",
                        help="sample a trained policy's actions from softmax(logits / T) instead of taking each "
                             "NPC's most likely action (the demo's default): below 1 NPCs follow their preferences "
                             "more closely, 1 as trained, above 1 less; seeded by --seed (default: most likely)")
    add_personality_arguments(parser, "a trained policy's NPCs")
    parser.add_argument("--scenario", choices=("auto", "world", "random_kill", "none"), default="auto",
                        help="world: the world file's events; random_kill: the player kills a random villager "
                             "at a random tick; auto: world if the file has events, else random_kill "
                             "(default: auto)")
    parser.add_argument("--json", metavar="FILE", help="also write the timeline as JSON to FILE")
    parser.add_argument("--chart", metavar="FILE",
                        help="also write a PNG chart of the close relations' emotions (needs matplotlib)")


def _load_policy(choice: str, seed: int) -> Any:
    from npc_brains import PolicyError, load_policy

    try:
        return load_policy(choice, seed=seed)
    except PolicyError as exc:
        raise UserError(f"--policy: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from worlds import load_world

    if args.ticks < 1:
        raise UserError(f"--ticks: expected an integer >= 1, got {args.ticks}")
    temperature = temperature_flag(args.temperature)
    strength = personality_strength_flag(args.personality_strength)
    traits = personality_traits_flag(args.personality_traits, strength)
    world = load_world(args.world)
    policy = _load_policy(args.policy, args.seed)
    if temperature is not None:
        apply_temperature(policy, temperature)
    if strength is not None:
        policy = personality_flag(policy, strength, seed=args.seed, traits=traits)

    from engine.timeline import run_timeline, summarize, summary_lines, timeline_dict, timeline_lines
    from npc_brains import policy_slots, policy_tuning

    slots = policy_slots(policy) or 4  # a trained policy fixes K; the baselines adapt
    scenario = args.scenario
    if scenario == "auto":
        scenario = "world" if world.events else "random_kill"
    tl = run_timeline(world, policy, ticks=args.ticks, seed=args.seed, scenario=scenario, slots=slots,
                      tuning=policy_tuning(policy),  # the world the policy learned in
                      deterministic=temperature is None)
    summary = summarize(tl)
    print(f"village demo: {world.name} ({world.id}), {len(world.npcs)} NPCs, {args.ticks} ticks "
          f"from {_clock(0)} to {_clock(args.ticks)}, seed {args.seed}, policy {_describe(args.policy, policy)}"
          + ("" if temperature is None else f" at temperature {temperature:g}")
          + ("" if strength is None else f" at personality strength {strength:g}")
          + ("" if traits is None else f" on {','.join(traits)}"))
    for step in tl.plan:
        print(f"scenario: {step}")
    print()
    lines = timeline_lines(tl)
    print("\n".join(lines) if lines else "(nothing happened)")
    print()
    print("\n".join(summary_lines(tl, summary)))
    if args.json:
        _write(args.json, json.dumps(timeline_dict(tl, summary), indent=1) + "\n", "--json")
        print(f"wrote the timeline JSON to {args.json}")
    if args.chart:
        _chart(tl, args.chart)
    return 0


def _describe(choice: str, policy: Any) -> str:
    """The policy as the header names it: which trained policy (and its algorithm) or which baseline."""
    algo = (getattr(policy, "config", None) or {}).get("algo")
    label = {"drmas": "Dr. MAS", "mappo": "MAPPO", "ippo": "IPPO"}.get(str(algo), str(algo)) if algo else None
    if choice in ("default", "mappo"):
        return f"{policy.name} (the bundled {label or 'trained'} policy)"
    if label:
        return f"{policy.name} ({label}, {choice})"
    return str(getattr(policy, "name", choice))


def _clock(tick: int) -> str:
    from engine.timeline import clock

    return clock(tick)


def _write(path: str, text: str, flag: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{flag}: cannot write {path!r}: {exc.strerror or exc}") from None


def _chart(tl: Any, path: str) -> None:
    """Emotions of the victims' close relations over time, with reaction markers."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed; skipping the chart (pip install matplotlib)")
        return
    import numpy as np

    from engine.constants import EventType, Reaction
    from engine.timeline import EMOTIONS

    victims = [d.target for d in tl.deaths if d.target < tl.n_npcs]
    people = sorted({int(i) for v in victims for i in np.flatnonzero(tl.close[v])} - set(victims))
    if not people:
        people = list(range(tl.n_npcs))
    shown = [e for e in EMOTIONS if e != "joy"]
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 2.6 * len(shown)), sharex=True)
    ticks = np.arange(tl.ticks + 1)
    markers = {Reaction.MOURNING: "s", Reaction.REVENGE: "X", Reaction.FEAR: "v", Reaction.CONSOLING: "P",
               Reaction.ALARM: "^", Reaction.GLOATING: "*", Reaction.DEFENSE: "D", Reaction.AGGRESSION: "x"}
    reactions = [e for e in tl.events if e.type == EventType.REACTION and e.actor in people]
    colors = {}
    for ax, emotion in zip(axes, shown, strict=True):
        trace = tl.emotions[emotion]
        for i in people:
            (line,) = ax.plot(ticks, trace[:, i], label=tl.names[i])
            colors[i] = line.get_color()
        ax.set_ylabel(emotion)
        for d in tl.deaths:
            ax.axvline(d.tick, color="black", lw=0.8, ls="--")
    felt = {Reaction.REVENGE: "anger", Reaction.DEFENSE: "anger", Reaction.AGGRESSION: "anger",
            Reaction.FEAR: "fear", Reaction.ALARM: "fear"}
    for e in reactions:
        t = min(max(e.tick, 0), tl.ticks)
        emotion = felt.get(Reaction(e.reaction), "grief")
        axes[shown.index(emotion)].scatter(
            [t], [tl.emotions[emotion][t, e.actor]], marker=markers.get(Reaction(e.reaction), "o"),
            color=colors.get(e.actor, "grey"), s=40, zorder=3)
    for label, marker in markers.items():
        axes[0].scatter([], [], marker=marker, color="grey", label=label.name.lower())
    axes[0].legend(loc="upper right", fontsize=7, ncol=2)
    victims_text = ", ".join(tl.names[v] for v in victims) or "nobody"
    axes[0].set_title(f"{tl.world_name}: close relations of {victims_text} (policy {tl.policy}, "
                      f"seed {tl.seed}); markers: reactions started")
    axes[-1].set_xlabel("tick (10 min)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise UserError(f"--chart: cannot write {path!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    print(f"wrote the chart to {path}")
