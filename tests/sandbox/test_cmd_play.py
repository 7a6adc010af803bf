"""`village play` smoke tests: headless runs, screenshots, scripts, replays and one-line user errors."""

from __future__ import annotations

import re

import pygame
import pytest

from village.cli import main


def test_headless_run_writes_a_screenshot(tmp_path, capsys):
    shot = tmp_path / "shot.png"
    code = main(["play", "--headless", "--ticks", "5", "--screenshot", str(shot), "--size", "800x500",
                 "--select", "Kara", "--graph"])
    assert code == 0
    assert pygame.image.load(str(shot)).get_size() == (800, 500)
    assert "ran 5 ticks of village-v1" in capsys.readouterr().out


def test_script_then_replay_from_the_command_line(tmp_path, capsys):
    script = tmp_path / "commands.toml"
    script.write_text('[[commands]]\ntick = 2\nop = "kill"\ntarget = "Jory"\n'
                      '[[commands]]\ntick = 20\nop = "move"\nx = 10.0\ny = 12.5\n')
    session = tmp_path / "session.json"
    code = main(["play", "--headless", "--ticks", "25", "--policy", "random", "--seed", "4", "--scenario", "none",
                 "--script", str(script), "--record", str(session), "--size", "800x500"])
    assert code == 0
    assert re.search(r"\b[1-9]\d* deaths", capsys.readouterr().out)
    assert main(["play", "--headless", "--replay", str(session), "--size", "800x500"]) == 0
    assert "matches the recording" in capsys.readouterr().out


def test_a_run_at_a_personality_strength_says_so_and_replays(tmp_path, capsys):
    session = tmp_path / "strong.toml"
    assert main(["play", "--headless", "--ticks", "30", "--personality-strength", "2.5", "--personality-traits",
                 "diligence,sociability", "--record", str(session), "--size", "800x500"]) == 0
    assert "policy default at personality strength 2.5 on sociability,diligence" in capsys.readouterr().out
    assert main(["play", "--headless", "--replay", str(session), "--size", "800x500"]) == 0
    out = capsys.readouterr().out
    assert "at personality strength 2.5 on sociability,diligence" in out and "matches the recording" in out


@pytest.mark.parametrize(("argv", "expected"), [
    (["--headless", "--policy", "no-such-policy.pt"], "--policy"),
    (["--headless", "--world", "no-such-world"], "no-such-world"),
    (["--headless", "--select", "Nobody"], "--select"),
    (["--headless", "--ticks", "-3"], "--ticks"),
    (["--screenshot", "x.png"], "--screenshot"),  # without --headless
    (["--headless", "--personality-strength", "12"], "--personality-strength: expected a number from 0 to 10"),
    (["--headless", "--personality-traits", "empathy"], "--personality-traits: it sets which traits"),
    (["--headless", "--personality-strength", "2", "--personality-traits", "wit"], "--personality-traits: expected"),
    (["--headless", "--policy", "scripted", "--personality-strength", "2"],
     "--personality-strength: scripted has no learned personality"),
])
def test_user_errors_are_one_line_with_exit_code_2(argv, expected, capsys):
    code = main(["play", "--size", "800x500", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert expected in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_bad_script_names_the_field(tmp_path, capsys):
    script = tmp_path / "bad.toml"
    script.write_text('[[commands]]\ntick = 1\nop = "hug"\n')
    assert main(["play", "--headless", "--script", str(script)]) == 2
    assert "commands[0].op" in capsys.readouterr().err
