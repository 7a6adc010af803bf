"""`village`: a thin dispatcher. Each subcommand lives in its own module, imported only when it runs,
so `village train` never loads pygame or zmq and `village --help` loads nothing heavy."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Interactive commands run small batches (one village, one request): BLAS threads only add latency there.
# Set before numpy is first imported; an explicit setting by the user wins.
SINGLE_THREADED = ("demo", "play", "serve")

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("village.cmd_demo", "run the default scenario on village-v1 and print the reaction timeline"),
    "new": ("village.cmd_new", "generate a random village world file"),
    "train": ("village.cmd_train", "train NPC brains headless (Dr. MAS, MAPPO, IPPO)"),
    "eval": ("village.cmd_eval", "measure emergent reactions of a policy on the scenario suite"),
    "serve": ("village.cmd_serve", "serve trained policies to game engines over ZeroMQ and WebSocket"),
    "export": ("village.cmd_export", "export a trained policy's actor as ONNX (Unity Sentis, Unreal NNE)"),
    "keys": ("village.cmd_keys", "generate CurveZMQ key pairs for the bridge"),
    "play": ("village.cmd_play", "open the pygame village sandbox"),
}


class UserError(Exception):
    """A mistake by the user (bad flag, bad file): printed as one line, exit code 2."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="village",
        description="Village NPC engine: a tick-based village whose NPCs learn their social reactions.",
        epilog="Run `village <command> --help` for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
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
    sub_parser = argparse.ArgumentParser(prog=f"village {name}", description=help_text)
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
