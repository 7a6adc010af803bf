"""The `village` command: help for every subcommand, `village demo` and `village new` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from village.cli import SUBCOMMANDS, main
from worlds import load_world

OWN = ("demo", "new")  # built with this module's tests; the others belong to later work


def call(argv: list[str]) -> int:
    """main(argv), with argparse's SystemExit (for --help and bad flags) turned into a return code."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert call(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_unknown_command_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert call(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


@pytest.mark.parametrize("name", OWN)
def test_own_subcommand_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert call([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: village {name}")
    assert SUBCOMMANDS[name][1] in out


@pytest.mark.parametrize("name", [n for n in SUBCOMMANDS if n not in OWN])
def test_other_subcommands_explain_themselves_or_say_not_available(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = call([name, "--help"])
    captured = capsys.readouterr()
    if code == 0:
        assert f"usage: village {name}" in captured.out
    else:
        assert code == 2
        assert captured.err.strip() == f"village {name}: not available in this build"


# ------------------------------------------------------------------ village demo
def test_demo_prints_the_killing_and_reactions(capsys: pytest.CaptureFixture[str]) -> None:
    victim = load_world("village-v1").events[0].target
    assert call(["demo", "--policy", "scripted", "--ticks", "80"]) == 0
    out = capsys.readouterr().out
    assert "policy scripted" in out
    assert f"player killed {victim}" in out
    assert "witnessed by" in out or "no one saw it" in out
    reactions = [line for line in out.splitlines() if line.startswith("tick") and "] <- " in line]
    assert reactions, out
    assert "Summary (80 ticks" in out and "longest cause chain" in out


def test_demo_is_reproducible_from_its_seed(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for _ in range(2):
        assert call(["demo", "--policy", "random", "--ticks", "60", "--seed", "4"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_demo_plays_at_a_temperature_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo takes the most likely actions; with --temperature it samples at T, the same story for a seed."""
    runs = {}
    for t in (None, "1", "1"):
        assert call(["demo", "--ticks", "80", "--seed", "2", *([] if t is None else ["--temperature", t])]) == 0
        runs.setdefault(t, []).append(capsys.readouterr().out.splitlines())
    assert runs["1"][0][0].endswith("at temperature 1") and runs["1"][0] == runs["1"][1]
    assert runs["1"][0][1:] != runs[None][0][1:]  # sampled as trained, not the most likely actions


def test_demo_plays_at_a_personality_strength_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """--personality-strength S: the header says so, and the most likely actions are those of the stronger
    personalities, not the trained ones."""
    runs = {}
    for s in (None, "3"):
        assert call(["demo", "--ticks", "80", "--seed", "2", *([] if s is None else ["--personality-strength", s])]) \
            == 0
        runs[s] = capsys.readouterr().out.splitlines()
    assert runs["3"][0].endswith("at personality strength 3")
    assert runs["3"][1:] != runs[None][1:]


def test_demo_names_the_bundled_policy_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert call(["demo", "--ticks", "40"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.endswith("policy default (the bundled Dr. MAS policy)"), header


def test_demo_without_the_bundled_policy_is_an_error_not_the_scripted_rule(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import npc_brains.resolve as resolve

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)  # an installation that lost its package data
    assert call(["demo", "--ticks", "10"]) == 2
    captured = capsys.readouterr()
    assert "scripted" not in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "the bundled default policy is missing" in err[0], err


def test_demo_writes_json_and_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    json_path, chart_path = tmp_path / "timeline.json", tmp_path / "chart.png"
    assert call(["demo", "--policy", "scripted", "--ticks", "60", "--json", str(json_path),
                 "--chart", str(chart_path)]) == 0
    capsys.readouterr()
    data = json.loads(json_path.read_text())
    assert data["world"]["id"] == "village-v1" and data["ticks"] == 60
    assert any(e["type"] == "death" and e["actor_name"] == "player" for e in data["events"])
    assert data["lines"] and data["summary"]["deaths"]
    assert chart_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_on_a_world_without_events_uses_a_random_kill(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "w.toml"
    assert call(["new", "--npcs", "8", "--seed", "2", "-o", str(world)]) == 0
    assert call(["demo", "--world", str(world), "--policy", "scripted", "--ticks", "70", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "the player sets out to kill" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["demo", "--ticks", "0"], "--ticks"),
    (["demo", "--world", "no/such/world.toml"], "no such world file"),
    (["demo", "--policy", "no/such/policy.pt"], "--policy"),
    (["demo", "--temperature", "0"], "--temperature: expected a number from 0.01 to 100"),
    (["demo", "--policy", "random", "--temperature", "0.5"], "--temperature: random has no learned probabilities"),
    (["demo", "--personality-strength", "-2"], "--personality-strength: expected a number from 0 to 10"),
    (["demo", "--personality-traits", "empathy"], "--personality-traits: it sets which traits"),
    (["demo", "--policy", "random", "--personality-strength", "2"],
     "--personality-strength: random has no learned personality"),
])
def test_demo_user_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert call(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err


# ------------------------------------------------------------------ village new
def test_new_writes_a_loadable_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gen.toml"
    assert call(["new", "--npcs", "20", "--seed", "5", "-o", str(path)]) == 0
    out = capsys.readouterr().out
    spec = load_world(path)
    assert len(spec.npcs) == 20
    households = len({npc.home for npc in spec.npcs})
    assert f"20 NPCs in {households} households" in out
    assert f"relationships: {len(spec.relationships)} (" in out
    for kind in {r.kind for r in spec.relationships}:
        assert f" {kind}" in out


def test_new_is_deterministic_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    assert call(["new", "--npcs", "12", "--seed", "9", "-o", str(a)]) == 0
    assert call(["new", "--npcs", "12", "--seed", "9", "-o", str(b)]) == 0
    assert a.read_text() == b.read_text()
    capsys.readouterr()
    assert call(["new", "--npcs", "6", "-o", str(a)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert call(["new", "--npcs", "6", "-o", str(a), "--force"]) == 0
    assert len(load_world(a).npcs) == 6


@pytest.mark.parametrize("n", ["3", "501", "-1", "0"])
def test_new_rejects_bad_npc_counts(n: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.toml"
    assert call(["new", "--npcs", n, "-o", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"village new: error: --npcs: expected an integer in [4, 500], got {n}"]
    assert not path.exists()


def test_new_rejects_a_non_integer_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert call(["new", "--npcs", "many", "-o", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "--npcs" in err and "Traceback" not in err
