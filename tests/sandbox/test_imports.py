"""Import boundaries: the sandbox never loads zmq, the engine never loads pygame, and nothing
initialises pygame at import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_sandbox_imports_no_zmq_and_does_not_init_pygame():
    out = _run(
        "import sys, pkgutil, importlib, sandbox\n"
        "mods = [m.name for m in pkgutil.iter_modules(sandbox.__path__, 'sandbox.')]\n"
        "for m in mods: importlib.import_module(m)\n"
        "import village.cmd_play\n"
        "import pygame\n"
        "print(len(mods), 'zmq' in sys.modules, pygame.display.get_init(), pygame.font.get_init())\n"
    )
    count, zmq, display, font = out.split()
    assert int(count) >= 8
    assert (zmq, display, font) == ("False", "False", "False")


def test_engine_imports_no_pygame():
    out = _run(
        "import sys, pkgutil, importlib, engine\n"
        "for m in pkgutil.iter_modules(engine.__path__, 'engine.'): importlib.import_module(m.name)\n"
        "print('pygame' in sys.modules)\n"
    )
    assert out == "False"
