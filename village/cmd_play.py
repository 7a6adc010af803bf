"""`village play`: the pygame designer sandbox (docs/sandbox.md).

    village play [--world W] [--policy default|scripted|random|PATH] [--seed S]
    village play --headless --ticks N --screenshot out.png [--script commands.toml]
    village play --replay session.toml [--headless]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from village.cli import (
    UserError,
    add_personality_arguments,
    personality_strength_flag,
    personality_traits_flag,
    temperature_flag,
)

SCREEN_MIN, SCREEN_MAX = 640, 4096


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1280x800, got {text!r}") from None
    if not (SCREEN_MIN <= w <= SCREEN_MAX and SCREEN_MIN // 2 <= h <= SCREEN_MAX):
        raise argparse.ArgumentTypeError(f"expected a width in [{SCREEN_MIN}, {SCREEN_MAX}] and a height in "
                                         f"[{SCREEN_MIN // 2}, {SCREEN_MAX}], got {text!r}")
    return w, h


# SDL video drivers that open no visible window: the sandbox would run with nobody able to see or close it
INVISIBLE_DRIVERS = ("dummy", "offscreen")


def _no_display() -> str | None:
    """Why no window can be shown here, or None where one may be: checked before pygame is imported, since
    SDL on a Linux box without X11 or Wayland may fall back to a driver that shows nothing and never returns."""
    if os.environ.get("SDL_VIDEODRIVER"):
        return None  # the user chose a driver
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "DISPLAY and WAYLAND_DISPLAY are not set"
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--world", default=None,
                        help="bundled id, world file, or generated:N[:SEED] (default: village-v1)")
    parser.add_argument("--policy", default=None,
                        help="default (bundled trained policy, else scripted), scripted, random, or a checkpoint "
                             "path (default: default)")
    parser.add_argument("--seed", type=int, default=None, help="simulation and policy seed (default: 0)")
    parser.add_argument("--temperature", default=None, metavar="T",
                        help="a trained policy samples from softmax(logits / T): below 1 NPCs follow their "
                             "preferences more closely, above 1 less; recorded in sessions (default: 1, as "
                             "trained, or the replayed session's)")
    add_personality_arguments(parser, "a trained policy's NPCs", note="; recorded in sessions (a replay plays at its "
                              "session's unless given)")
    parser.add_argument("--scenario", choices=("world", "none"), default=None,
                        help="world: run the world file's scripted events (e.g. village-v1's killing at tick "
                             "30); none: only what you do (default: world)")
    parser.add_argument("--slots", type=int, default=None, help="observation slots K (default: 4)")
    parser.add_argument("--speed", type=int, choices=(0, 1, 4, 16), default=1, help="start speed (0: paused)")
    parser.add_argument("--size", type=_size, default=(1280, 800), help="window size WIDTHxHEIGHT")
    parser.add_argument("--headless", action="store_true",
                        help="no window (SDL dummy driver): run --ticks ticks, then write --screenshot")
    parser.add_argument("--ticks", type=int, default=None,
                        help="headless: ticks to run (default: 60, or the replayed session's length)")
    parser.add_argument("--screenshot", type=Path, default=None, help="headless: write the last frame as a PNG")
    parser.add_argument("--script", type=Path, default=None,
                        help="TOML/JSON file of tick-stamped commands to send (see docs/sandbox.md)")
    parser.add_argument("--replay", type=Path, default=None,
                        help="replay a recorded session (its world, seed, policy and commands)")
    parser.add_argument("--record", default=None,
                        help="write the session to this file on exit (and on F5): replay it with --replay")
    parser.add_argument("--select", default=None, help="NPC to select at the start (inspector)")
    parser.add_argument("--graph", action="store_true", help="start with the social-graph overlay on")
    parser.add_argument("--zoom", type=float, default=1.0,
                        help="start zoomed in by this factor, centred on the selected NPC (default: 1, whole map)")


def run(args: argparse.Namespace) -> int:
    from sandbox.policy import PolicyError
    from sandbox.session import SessionError, load_session

    if args.ticks is not None and args.ticks < 0:
        raise UserError(f"--ticks: expected an integer >= 0, got {args.ticks}")
    if args.seed is not None and args.seed < 0:
        raise UserError(f"--seed: expected an integer >= 0, got {args.seed}")
    args.temperature = temperature_flag(args.temperature)
    args.personality_strength = personality_strength_flag(args.personality_strength)
    args.personality_traits = personality_traits_flag(args.personality_traits, args.personality_strength)
    if args.slots is not None and args.slots < 1:
        raise UserError(f"--slots: expected an integer >= 1, got {args.slots}")
    if args.screenshot is not None and not args.headless:
        raise UserError("--screenshot: only with --headless")
    if not 0.5 <= args.zoom <= 8:
        raise UserError(f"--zoom: expected a factor in [0.5, 8], got {args.zoom}")
    if args.replay is not None and args.script is not None:
        raise UserError("--replay and --script: choose one (a replay already sends its commands)")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    if not args.headless:
        missing = _no_display()
        if missing:
            raise UserError(f"no display to open a window on ({missing}); use --headless (with --ticks and "
                            "--screenshot) on a machine without one")
    try:
        session = load_session(args.replay) if args.replay is not None else None
        script = load_session(args.script) if args.script is not None else None
        model = _build_model(args, session)
    except (SessionError, PolicyError) as exc:
        raise UserError(str(exc)) from None
    if script is not None:
        model.load_script(script)

    import pygame

    from sandbox.app import SandboxApp

    try:
        app = SandboxApp(model, size=args.size, headless=args.headless, session_path=args.record,
                         world_path=args.world if args.world and Path(args.world).suffix else None,
                         speed=args.speed)
    except pygame.error as exc:
        raise UserError(f"cannot open a window ({exc}); use --headless on a machine without a display") from None
    if not args.headless and pygame.display.get_driver() in INVISIBLE_DRIVERS:
        driver = pygame.display.get_driver()
        app.close()
        raise UserError(f"no display to open a window on (SDL chose its {driver!r} video driver, which shows "
                        "nothing); use --headless (with --ticks and --screenshot) on a machine without one")
    try:
        if args.select is not None:
            if args.select not in model.spec.npc_names:
                raise UserError(f"--select: expected the name of an NPC of {model.spec.id}, got {args.select!r}")
            app.ui.selected = model.spec.npc_index(args.select)
        app.ui.show_graph = args.graph
        if args.zoom != 1.0 and not args.headless:
            app.zoom(args.zoom)
        if args.headless:
            return _headless(app, args, session)
        app.run()
        if args.record:
            app.save_session(args.record)
            print(f"session saved to {args.record}")
        return 0
    finally:
        app.close()


def _build_model(args: argparse.Namespace, session):  # -> SandboxModel
    from engine.vec_env import resolve_world
    from sandbox.model import SandboxModel

    world_arg = args.world or (session.world_ref if session is not None and session.world is None else None)
    if session is not None and session.world is not None and args.world is None:
        spec = session.world
        world_ref = session.world_ref
    else:
        spec = resolve_world(world_arg or "village-v1")
        world_ref = world_arg or "village-v1"
    policy = args.policy or (session.policy if session is not None else None) or "default"
    seed = args.seed if args.seed is not None else (session.seed if session is not None and session.seed is not None
                                                     else 0)
    scenario = args.scenario or (session.scenario if session is not None else None) or "world"
    slots = args.slots or (session.slots if session is not None else None) or 4
    temperature = args.temperature if args.temperature is not None else (
        session.temperature if session is not None else None)
    strength = args.personality_strength if args.personality_strength is not None else (
        session.personality_strength if session is not None else None)
    traits = args.personality_traits if args.personality_strength is not None else (
        session.personality_traits if session is not None else None)
    model = SandboxModel(spec, policy=policy, seed=seed, scenario=scenario, slots=slots, world_ref=world_ref,
                         temperature=temperature, personality_strength=strength, personality_traits=traits)
    if session is not None:
        model.load_script(session)
        model.replaying = True
    return model


def _headless(app, args: argparse.Namespace, session) -> int:
    model = app.model
    ticks = args.ticks
    if ticks is None:
        ticks = session.ticks if session is not None and session.ticks is not None else 60
    model.step(ticks)
    deaths = sum(1 for e in model.sim.log.events if e.type.name == "DEATH")
    reactions = sum(1 for e in model.sim.log.events if e.type.name == "REACTION")
    at = "" if model.temperature is None else f" at temperature {model.temperature:g}"
    if model.personality_strength is not None:
        at += f" at personality strength {model.personality_strength:g}"
        if model.personality_traits is not None:
            at += f" on {','.join(model.personality_traits)}"
    print(f"ran {ticks} ticks of {model.spec.id} (policy {model.source.name}{at}, seed {model.seed}): "
          f"{deaths} deaths, {reactions} reactions, {len(model.sim.log.messages)} news messages")
    if args.zoom != 1.0:
        app.zoom(args.zoom)  # centred on the selected NPC where it is now
    if args.screenshot is not None:
        try:
            app.screenshot(args.screenshot)
        except Exception as exc:  # pygame.error or OSError: a bad path
            raise UserError(f"--screenshot: cannot write {args.screenshot}: {exc}") from None
        print(f"screenshot: {args.screenshot}")
    if args.record:
        app.save_session(args.record)
        print(f"session saved to {args.record}")
    status = 0
    if session is not None and session.digest is not None:
        if session.ticks is not None and model.tick != session.ticks:
            print(f"replay: stopped at tick {model.tick}, the session has {session.ticks}; state not compared")
        elif model.digest() == session.digest:
            print(f"replay: state at tick {model.tick} matches the recording")
        else:
            print(f"replay: state at tick {model.tick} DIFFERS from the recording", file=sys.stderr)
            status = 1
    return status
