"""The wheel that `pip install village-npc` installs carries the trained policies and the sprites: built with
`pip wheel . --no-deps`, installed into a fresh venv (its dependencies borrowed from the running environment,
the package itself only from the wheel) and run from a folder outside the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = "Scripts/python.exe" if os.name == "nt" else "bin/python"


def _run(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(SDL_VIDEODRIVER="dummy", PYGAME_HIDE_SUPPORT_PROMPT="1")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, a working folder outside the source tree)."""
    if shutil.which("git") is None:
        pytest.skip("no git: the source tree to build from is what git tracks")
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (the [dev] extra)")
    base = tmp_path_factory.mktemp("wheel")
    source, wheels, venv, work = base / "src", base / "dist", base / "venv", base / "work"
    # build from a copy of what git tracks (and new files not ignored), so the build leaves nothing in the tree
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w",
                  str(wheels)], cwd=source, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("village_npc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "npc_brains/data/policies/default.pt" in names and "npc_brains/data/policies/mappo.pt" in names
    assert sum(n.startswith("sandbox/data/sprites/") and n.endswith(".png") for n in names) >= 20
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=base, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / VENV_PYTHON
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base,
                     timeout=60).stdout.strip())
    # the dependencies (torch, numpy, pygame, ...) from the running environment: a path line, so the
    # editable install of the source tree that may live there (a .pth hook of its own) is not activated
    (site / "borrowed-dependencies.pth").write_text(
        "\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])) + "\n")
    install = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "-q", str(wheel)], cwd=base, timeout=300)
    assert install.returncode == 0, install.stderr[-2000:]
    work.mkdir()
    where = _run([str(python), "-c", "import npc_brains, sandbox; print(npc_brains.__file__); print(sandbox.__file__)"],
                 cwd=work, timeout=60)
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(site), f"imported from {line}, not from the wheel's install in {site}"
    return python.parent, work


def test_demo_from_the_wheel_runs_the_bundled_policy(installed):
    bin_dir, work = installed
    done = _run([str(bin_dir / "village"), "demo"], cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("policy default (the bundled Dr. MAS policy)"), lines[0]
    reactions = [line for line in lines if line.startswith("tick") and ("[revenge]" in line or "[mourning]" in line)]
    assert reactions, done.stdout  # learned reactions, not the scripted rule (which the header would name)


def test_eval_and_play_from_the_wheel_find_their_package_data(installed):
    bin_dir, work = installed
    done = _run([str(bin_dir / "village"), "eval", "--policy", "default", "--seeds", "1", "--quiet", "--scenarios",
                 "kill-loner", "--worlds", "village-v1", "--compare", "mappo"], cwd=work, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "policy default vs mappo" in done.stdout and "mappo skipped" not in done.stdout
    shot = work / "frame.png"
    play = _run([str(bin_dir / "village"), "play", "--headless", "--ticks", "2", "--screenshot", str(shot)],
                cwd=work, timeout=300)
    assert play.returncode == 0, play.stderr
    assert "(policy default" in play.stdout and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sprites = _run([str(bin_dir / "python"), "-c",
                    "import os; os.environ['SDL_VIDEODRIVER'] = 'dummy'\n"
                    "from sandbox.sprites import SPRITE_DIR, SpriteBank\n"
                    "from sandbox.pixelart import sprite_pixels\n"
                    "bank = SpriteBank()\n"
                    "for name in sprite_pixels(): bank.base(name)\n"
                    "print(SPRITE_DIR, bank.from_files, len(sprite_pixels()))"], cwd=work, timeout=120)
    assert sprites.returncode == 0, sprites.stderr
    folder, from_files, total = sprites.stdout.split()
    assert "site-packages" in folder and int(from_files) == int(total)  # every sprite read from the wheel's PNGs


@pytest.mark.slow
def test_the_full_eval_command_from_the_wheel(installed):
    """`village eval --policy default --seeds 1` as written: every scenario, world and comparison."""
    bin_dir, work = installed
    done = _run([str(bin_dir / "village"), "eval", "--policy", "default", "--seeds", "1", "--quiet"], cwd=work,
                timeout=900)
    assert done.returncode == 0, done.stderr
    assert "policy default vs mappo, scripted, random_init, random" in done.stdout
