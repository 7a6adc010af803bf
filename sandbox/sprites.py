"""Sprite loading: the PNGs shipped as package data under sandbox/data/sprites/ (written by
assets/make_sprites.py), or the same art drawn in memory from sandbox/pixelart.py where a PNG is missing."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pygame

from sandbox import pixelart

SPRITE_DIR = Path(str(resources.files("sandbox") / "data" / "sprites"))


class SpriteBank:
    """Sprites by name ("npc_farmer", "player", "loc_well", "emo_grief", ...), scaled copies cached."""

    def __init__(self, folder: Path = SPRITE_DIR):
        self.folder = folder
        self._art = pixelart.sprite_pixels()
        self._base: dict[str, pygame.Surface] = {}
        self._scaled: dict[tuple[str, int, int], pygame.Surface] = {}
        self.from_files = 0

    def base(self, name: str) -> pygame.Surface:
        surface = self._base.get(name)
        if surface is None:
            path = self.folder / f"{name}.png"
            if path.is_file():
                surface = pygame.image.load(str(path))
                self.from_files += 1
            elif name in self._art:
                surface = pixelart.to_surface(self._art[name])
            else:
                raise KeyError(f"no sprite named {name!r}")
            if pygame.display.get_surface() is not None:
                surface = surface.convert_alpha()
            self._base[name] = surface
        return surface

    def scaled(self, name: str, width: int, height: int | None = None) -> pygame.Surface:
        """Nearest-neighbour scaled (crisp pixels), cached by size."""
        height = width if height is None else height
        key = (name, width, height)
        surface = self._scaled.get(key)
        if surface is None:
            surface = pygame.transform.scale(self.base(name), (max(1, width), max(1, height)))
            self._scaled[key] = surface
        return surface

    def has(self, name: str) -> bool:
        return name in self._art or (self.folder / f"{name}.png").is_file()
