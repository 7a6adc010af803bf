"""The README's screenshot is what its own command renders (the bundled default policy, not the scripted one)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pygame

from village.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_screenshot_comes_from_its_command(tmp_path, capsys):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(village play --headless [^`]*--screenshot docs/img/sandbox.png)`", readme)
    argv = shlex.split(command)[1:]
    assert "--policy" in argv and argv[argv.index("--policy") + 1] == "default"
    shot = tmp_path / "sandbox.png"
    argv[argv.index("--screenshot") + 1] = str(shot)
    assert main(argv) == 0
    assert "policy default" in capsys.readouterr().out
    fresh, kept = pygame.image.load(str(shot)), pygame.image.load(str(ROOT / "docs" / "img" / "sandbox.png"))
    assert fresh.get_size() == kept.get_size()
    assert pygame.image.tobytes(fresh, "RGB") == pygame.image.tobytes(kept, "RGB"), (
        f"docs/img/sandbox.png is out of date: regenerate it with `{command}`")
