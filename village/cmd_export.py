"""`village export`: a trained policy's actor as ONNX, for engines that run inference themselves (Unity
Sentis, Unreal NNE, onnxruntime) or for `village serve --backend onnx`."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from village.cli import add_personality_arguments

    parser.add_argument("--policy", default="default",
                        help="the trained policy to export: a checkpoint or policy file, or default (the bundled "
                             "trained policy); scripted and random have no network (default: %(default)s)")
    parser.add_argument("--onnx", type=Path, required=True, metavar="OUT.onnx",
                        help="where to write the ONNX model (written atomically: a temporary file renamed into "
                             "place). Inputs obs float32 [batch, obs_dim] and mask bool [batch, n_actions]; "
                             "outputs probs float32 [batch, n_actions] and action int64 [batch]")
    add_personality_arguments(parser, "the exported graph's NPCs", default="1",
                              note="; baked into the graph: twice the rows inside, the same inputs and outputs")
    parser.add_argument("--opset", type=int, default=15,
                        help="ONNX opset of the graph, 13..20; 15 is read by Unity Sentis and Unreal NNE "
                             "(default: %(default)s)")


def float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def run(args: argparse.Namespace) -> int:
    from village.cli import UserError

    if args.policy in ("scripted", "random"):
        raise UserError(f"--policy {args.policy}: a baseline has no network to export; give a checkpoint or default")
    if args.onnx.suffix != ".onnx":
        raise UserError(f"--onnx: expected a file name ending in .onnx, got {str(args.onnx)!r}")
    from npc_brains.export import ExportError, OnnxPolicy, export_onnx

    try:
        if args.personality_traits is not None and float_or_none(args.personality_strength) == 1.0:
            raise UserError("--personality-traits: it sets which traits --personality-strength strengthens; expected "
                            "a strength other than 1 with it")
        out = export_onnx(args.policy, args.onnx, args.opset, personality_strength=args.personality_strength,
                          personality_traits=args.personality_traits)
        model = OnnxPolicy(out)  # read back: what an engine will load
    except ExportError as exc:
        raise UserError(str(exc)) from None
    at = "" if model.baked_personality == 1.0 else f" at personality strength {model.baked_personality:g}"
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB, opset {args.opset}): policy {model.name!r}{at}, "
          f"obs_dim {model.obs_dim}, {model.n_actions} actions; inputs obs, mask; outputs probs, action; "
          "layout and action names in its metadata")
    return 0
