"""`village --version`, bad flags as one line, and `village play` without a display."""

from __future__ import annotations

import sys

import pytest

from village.cli import main, version


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from npc_brains.config import toml_module
    from village.cli import Path

    pyproject = toml_module().loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"village {pyproject['project']['version']}" == f"village {version()}"


@pytest.mark.parametrize(("argv", "needle"), [
    (["play", "--size", "10x10"], "argument --size: expected a width in"),
    (["play", "--size", "big"], "argument --size: expected WIDTHxHEIGHT"),
    (["train", "--steps", "many"], "argument --steps: invalid int value"),
    (["serve", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_a_bad_flag_is_one_line_without_the_usage(argv: list[str], needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"village {argv[0]}: error: ") and needle in err and "usage:" not in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the X11/Wayland check is Linux's")
def test_play_without_a_display_says_to_use_headless(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(var, raising=False)
    assert main(["play"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no display" in err and "--headless" in err


def test_play_on_an_invisible_video_driver_says_to_use_headless(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    assert main(["play", "--size", "800x500"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'dummy' video driver" in err and "--headless" in err


@pytest.mark.parametrize("name", ["train", "eval", "serve", "play", "demo", "new", "keys"])
def test_every_option_has_real_help(name: str) -> None:
    import argparse
    import importlib
    import re

    from village.cli import SUBCOMMANDS

    parser = argparse.ArgumentParser(prog=f"village {name}")
    importlib.import_module(SUBCOMMANDS[name][0]).add_arguments(parser)
    bare = [a.option_strings[-1] if a.option_strings else a.dest for a in parser._actions
            if not re.sub(r"\(?default: [^)]*\)?", "", a.help or "").strip(" .")]
    assert not bare, f"options whose help says only their default: {bare}"
    parser.format_help()  # a bare % in a help string would raise here
