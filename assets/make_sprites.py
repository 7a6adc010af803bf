"""Draw the sandbox's pixel-art sprites in code and write them as PNGs under sandbox/data/sprites/.

    python assets/make_sprites.py            # (re)write every PNG
    python assets/make_sprites.py --check    # exit 1 if a committed PNG differs from the code

The art itself lives in sandbox/pixelart.py (16x16 grids + palettes), so the sandbox can also draw a
sprite in memory when its PNG is missing. The PNGs are package data of `sandbox` (pyproject.toml): the wheel
carries them. No display is needed: pygame only encodes the PNGs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPRITE_DIR = ROOT / "sandbox" / "data" / "sprites"
sys.path.insert(0, str(ROOT))  # run as a script from a checkout


def _same_pixels(path: Path, pixels: list) -> bool:
    import pygame

    from sandbox.pixelart import SIZE

    image = pygame.image.load(str(path))
    if image.get_size() != (SIZE, SIZE):
        return False
    for y, row in enumerate(pixels):
        for x, color in enumerate(row):
            got = tuple(image.get_at((x, y)))
            if color is None:
                if got[3] != 0:
                    return False
            elif got != color:
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SPRITE_DIR, help="output folder (default: sandbox/data/sprites)")
    parser.add_argument("--check", action="store_true", help="compare the PNGs with the code, write nothing")
    args = parser.parse_args(argv)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    from sandbox.pixelart import sprite_pixels, to_surface

    sprites = sprite_pixels()
    if args.check:
        stale = [name for name, pixels in sprites.items()
                 if not (args.out / f"{name}.png").is_file() or not _same_pixels(args.out / f"{name}.png", pixels)]
        if stale:
            print(f"out of date: {', '.join(stale)} (run python assets/make_sprites.py)", file=sys.stderr)
            return 1
        print(f"{len(sprites)} sprites up to date in {args.out}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, pixels in sprites.items():
        pygame.image.save(to_surface(pixels), str(args.out / f"{name}.png"))
    print(f"wrote {len(sprites)} sprites to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
