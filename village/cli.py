"""`village`: a thin dispatcher. Each subcommand lives in its own module, imported only when it runs,
so `village train` never loads pygame or zmq and `village --help` loads nothing heavy."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

# Interactive commands run small batches (one village, one request): BLAS threads only add latency there.
# Set before numpy is first imported; an explicit setting by the user wins.
SINGLE_THREADED = ("demo", "play", "serve")

DISTRIBUTION = "village-npc"

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("village.cmd_demo", "run the default scenario on village-v1 and print the reaction timeline"),
    "new": ("village.cmd_new", "generate a random village world file"),
    "train": ("village.cmd_train", "train NPC brains headless (Dr. MAS, MAPPO, IPPO)"),
    "diagnose": ("village.cmd_diagnose", "find training faults in a run's metrics and say what to fix"),
    "eval": ("village.cmd_eval", "measure emergent reactions of a policy on the scenario suite"),
    "serve": ("village.cmd_serve", "serve trained policies to game engines over ZeroMQ and WebSocket"),
    "export": ("village.cmd_export", "export a trained policy's actor as ONNX (Unity Sentis, Unreal NNE)"),
    "keys": ("village.cmd_keys", "generate CurveZMQ key pairs for the bridge"),
    "play": ("village.cmd_play", "open the pygame village sandbox"),
}


class UserError(Exception):
    """A mistake by the user (bad flag, bad file): printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """A bad flag is one line naming it (exit 2), not the whole usage followed by the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def temperature_flag(text: str | None, flag: str = "--temperature") -> float | None:
    """A sampling temperature flag's value (None when not given); UserError, one line naming `flag`, otherwise."""
    if text is None:
        return None
    from npc_brains.runtime import check_temperature

    try:
        return check_temperature(text, flag)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def apply_temperature(policy: object, temperature: float, flag: str = "--temperature") -> None:
    """Make `policy` sample at `temperature`; UserError, one line naming `flag`, for one without learned
    probabilities (the rules, random actions)."""
    from npc_brains.runtime import set_temperature

    try:
        set_temperature(policy, temperature, flag)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def add_personality_arguments(parser: argparse.ArgumentParser, who: str, *, default: str | None = None,
                              note: str = "") -> None:
    """--personality-strength and --personality-traits, explained once: `who` plays its learned personalities S
    times as strongly; `note` adds what this command does with them (recorded, baked in, ...)."""
    parser.add_argument("--personality-strength", default=default, metavar="S",
                        help=f"{who} play their learned personalities S times as strongly: each NPC's logits move S "
                             "times as far from a neutral villager's (every trait 0.5) as the network puts them, so "
                             "above 1 the timid flee sooner and the sociable talk more, and 0 plays everyone as the "
                             f"neutral villager of its role; 0 to 10 (npc_brains.personality){note} (default: 1, as "
                             "trained)")
    parser.add_argument("--personality-traits", default=None, metavar="T,...",
                        help="with --personality-strength: the traits it strengthens, e.g. sociability,diligence "
                             "for the everyday personality alone, the others pulling as trained (default: all five)")


def personality_strength_flag(text: str | None, flag: str = "--personality-strength") -> float | None:
    """A personality strength flag's value (None when not given); UserError, one line naming `flag`, otherwise."""
    if text is None:
        return None
    from npc_brains.personality import check_personality

    try:
        return check_personality(text, flag)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def personality_traits_flag(text: str | None, strength: float | None,
                            flag: str = "--personality-traits") -> list[str] | None:
    """The traits flag's names (None when not given or 'all'); UserError, one line naming `flag`, for a bad list or
    a list without a strength."""
    if text is None:
        return None
    if strength is None:
        raise UserError(f"{flag}: it sets which traits --personality-strength strengthens; expected "
                        "--personality-strength with it")
    from npc_brains.personality import TRAIT_COLUMNS, check_traits

    try:
        traits = check_traits(text, flag)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return None if traits == TRAIT_COLUMNS else list(traits)


def personality_flag(policy: Any, value: Any, flag: str = "--personality-strength", *, seed: int | None = 0,
                     traits: Any = None, traits_flag: str = "--personality-traits") -> Any:
    """`policy` played at personality strength `value` on `traits` (npc_brains.personality; itself at 1);
    UserError, one line naming the flag, for a bad value or traits, or a policy without a learned personality (the
    rules, random actions)."""
    from npc_brains.personality import check_traits, with_personality_strength

    try:
        traits = check_traits(traits, traits_flag)
        return with_personality_strength(policy, value, seed=seed, name=flag, traits=traits)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def version() -> str:
    """This checkout's version (its pyproject.toml, which an editable install's metadata may lag behind), else
    the installed distribution's."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        from npc_brains.config import toml_module

        try:
            project = toml_module().loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (ValueError, OSError):
            project = {}
        if project.get("name") == DISTRIBUTION and isinstance(project.get("version"), str):
            return project["version"]
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="village",
        description="Village NPC engine: a tick-based village whose NPCs learn their social reactions.",
        epilog="Run `village <command> --help` for a command's options.",
    )
    parser.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] in ("-V", "--version"):
        print(f"village {version()}")
        return 0
    name = argv[0]
    if name not in SUBCOMMANDS:
        parser.print_usage(sys.stderr)
        print(f"village: error: unknown command {name!r}; choose from {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        return 2
    module_name, help_text = SUBCOMMANDS[name]
    if name in SINGLE_THREADED:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("village.cmd_"):
            print(f"village {name}: not available in this build", file=sys.stderr)
            return 2
        raise
    sub_parser = OneLineParser(prog=f"village {name}", description=help_text)
    module.add_arguments(sub_parser)
    args = sub_parser.parse_args(argv[1:])
    from worlds import WorldError

    try:
        return int(module.run(args) or 0)
    except (UserError, WorldError) as exc:
        print(f"village {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"village {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
