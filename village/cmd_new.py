"""`village new --npcs N --seed S -o FILE`: generate a random village and save it as a world file."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from village.cli import UserError

MIN_NPCS, MAX_NPCS = 4, 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--npcs", type=int, default=12, metavar="N",
                        help=f"number of NPCs, {MIN_NPCS}..{MAX_NPCS} (default: 12)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed; same seed, same village (default: 0)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="world file to write (TOML)")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def run(args: argparse.Namespace) -> int:
    from worlds import generate_world, save_world

    if not MIN_NPCS <= args.npcs <= MAX_NPCS:
        raise UserError(f"--npcs: expected an integer in [{MIN_NPCS}, {MAX_NPCS}], got {args.npcs}")
    if args.seed < 0:
        raise UserError(f"--seed: expected an integer >= 0, got {args.seed}")
    out = Path(args.output)
    if out.is_dir():
        raise UserError(f"-o: {args.output} is a directory; expected a file path")
    if out.exists() and not args.force:
        raise UserError(f"-o: {args.output} already exists (use --force to overwrite)")
    spec = generate_world(args.npcs, args.seed)
    save_world(spec, out)
    households = Counter(npc.home for npc in spec.npcs)
    kinds = Counter(rel.kind for rel in spec.relationships)
    relations = ", ".join(f"{kinds[k]} {k}" for k in ("kin", "spouse", "friend", "rival") if kinds[k]) or "none"
    print(f"wrote {out}: {spec.name} ({spec.id}), {len(spec.npcs)} NPCs in {len(households)} households, "
          f"{spec.width:g} x {spec.height:g} map, {len(spec.locations)} locations")
    print(f"relationships: {len(spec.relationships)} ({relations})")
    if spec.actors:
        print("actors: " + ", ".join(f"{a.name} ({a.kind})" for a in spec.actors))
    print(f"try it: village demo --world {out}")
    return 0
