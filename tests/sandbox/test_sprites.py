"""The committed sprite PNGs are what assets/make_sprites.py draws, and the sandbox finds them all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sandbox.pixelart import EMOTIONS, sprite_pixels
from worlds import LOCATION_KINDS, ROLES

MAKE_SPRITES = Path(__file__).resolve().parents[2] / "assets" / "make_sprites.py"


def _make_sprites():
    spec = importlib.util.spec_from_file_location("make_sprites", MAKE_SPRITES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_pngs_match_the_code(capsys):
    assert _make_sprites().main(["--check"]) == 0, capsys.readouterr().err


def test_check_notices_a_changed_png(tmp_path, capsys):
    module = _make_sprites()
    assert module.main(["--out", str(tmp_path)]) == 0
    import pygame

    path = tmp_path / "npc_farmer.png"
    image = pygame.image.load(str(path))
    image.set_at((8, 8), (255, 0, 255, 255))
    pygame.image.save(image, str(path))
    assert module.main(["--check", "--out", str(tmp_path)]) == 1
    assert "npc_farmer" in capsys.readouterr().err


def test_every_role_location_and_emotion_has_a_sprite():
    names = set(sprite_pixels())
    assert {f"npc_{r}" for r in ROLES} <= names
    assert {f"loc_{k}" for k in LOCATION_KINDS} <= names
    assert {f"emo_{e}" for e in ("grief", "anger", "fear", "joy")} == {f"emo_{e}" for e in EMOTIONS}
    assert {"player", "raider", "grave"} <= names
