"""The live personality strength (`{` / `}`): applied at a tick boundary, logged as a session record, replayed
exactly (the same wrapper, the same RNG states), reset by a restart, and a no-op with a note for policies without a
learned personality; the temperature keys still reach the policy once it is wrapped."""

from __future__ import annotations

import dataclasses
import json

import pygame
import pytest

from npc_brains.personality import PersonalityStrength
from sandbox.model import PERSONALITY_LADDER, SandboxModel, ladder_step
from sandbox.session import CommandRecord, SessionError, load_session, save_session, session_from_dict
from village.cli import main

# (tick, strength) changes of the recorded run: the wrapper samples with its own RNG at 3, with the policy's at 1
# (the wrapper kept), and with its own again at 0.5, its RNG going on from where tick 20 left it
CHANGES = ((10, 3.0), (20, 1.0), (30, 0.5))
TICKS = 45  # past tick 30's killing (village-v1's scenario)
OP = "personality_strength"


def key(k: int, mod: int = 0, unicode: str = "") -> pygame.event.Event:
    return pygame.event.Event(pygame.KEYDOWN, key=k, mod=mod, unicode=unicode, scancode=0)


RIGHT_BRACE = key(pygame.K_RIGHTBRACKET, pygame.KMOD_SHIFT, "}")
LEFT_BRACE = key(pygame.K_LEFTBRACKET, pygame.KMOD_SHIFT, "{")


def post(app, *events: pygame.event.Event) -> None:
    for event in events:
        pygame.event.post(event)
    app.frame(0.0)  # handles the keys; zero time, so no tick runs


def press_to(model: SandboxModel, target: float) -> None:
    """Step the strength along the ladder to `target`, one press per rung, as a player would."""
    while (model.personality_strength or 1.0) != target:
        assert model.shift_personality_strength(1 if target > (model.personality_strength or 1.0) else -1)


def _recorded_run(village) -> SandboxModel:
    """A run of the bundled policy started at strength 1 (none given), changed at the ticks of CHANGES."""
    model = SandboxModel(village, policy="default", seed=3)
    for tick, strength in CHANGES:
        model.step(tick - model.tick)
        press_to(model, strength)
    model.step(TICKS - model.tick)
    return model


def _replay(village, session) -> tuple[SandboxModel, list[float]]:
    """Replay `session` a tick at a time, noting the strength the policy acts at in each tick."""
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(session)
    seen = []
    for _ in range(session.ticks):
        replay.step(1)  # a record for this tick applies before the policy acts, and none after it within the tick
        seen.append(getattr(replay.policy, "strength", 1.0))
    return replay, seen


def _rng_states(model: SandboxModel) -> tuple[dict, dict]:
    """The wrapper's and the trained policy's sampling RNG states."""
    return model.policy.rng.bit_generator.state, model.policy.inner.rng.bit_generator.state


@pytest.mark.parametrize(("current", "direction", "expected"), [
    (None, 1, 1.5), (None, -1, 0.5),  # not set: 1, as trained
    (1.0, 1, 1.5), (1.5, -1, 1.0), (2.0, 1, 3.0), (0.5, -1, 0.0),
    (3.0, 1, 3.0), (0.0, -1, 0.0),  # the ends clamp
    (0.7, 1, 1.0), (0.7, -1, 0.5), (2.5, 1, 3.0),  # a --personality-strength off the ladder: the nearest rung
    (10.0, -1, 3.0), (10.0, 1, 10.0),
])
def test_ladder_steps_and_clamps(current, direction, expected):
    assert ladder_step(current, direction, PERSONALITY_LADDER) == expected


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_mid_run_change_is_saved_and_replays_to_the_same_digest(village, tmp_path, suffix):
    model = _recorded_run(village)
    path = tmp_path / f"session{suffix}"
    save_session(model.session(), path)
    session = load_session(path)
    # the session starts at the run's starting strength (none); each change is one timed record, the last press
    assert session.personality_strength is None
    assert session.commands == [CommandRecord(tick, OP, value=s) for tick, s in CHANGES]

    replay, seen = _replay(village, session)
    assert replay.digest() == session.digest == model.digest()
    assert replay.commands == model.commands and replay.personality_strength == 0.5
    # the policy acted at 1 up to the first record and at each recorded strength from its tick on
    assert seen == [1.0] * 10 + [3.0] * 10 + [1.0] * 10 + [0.5] * 15
    # the same objects in the same states: one wrapper for the run, seeded from the run's seed, both RNGs alike
    assert isinstance(replay.policy, PersonalityStrength) and isinstance(model.policy, PersonalityStrength)
    assert _rng_states(replay) == _rng_states(model)
    replay.replaying = False
    replay.step(15)
    model.step(15)
    assert replay.digest() == model.digest()  # and they go on alike

    # controls: without the records, or without the last, the village ends elsewhere
    for commands in ([], session.commands[:-1]):
        other, _ = _replay(village, dataclasses.replace(session, commands=commands))
        assert other.digest() != session.digest


def test_village_play_replays_a_recorded_change(village, tmp_path, capsys):
    path = tmp_path / "session.toml"
    save_session(_recorded_run(village).session(), path)
    assert 'op = "personality_strength"' in path.read_text(encoding="utf-8")
    assert main(["play", "--headless", "--replay", str(path), "--size", "800x500"]) == 0
    out = capsys.readouterr().out
    # the summary gives the strength it ended at
    assert "matches the recording" in out and "at personality strength 0.5" in out


def test_a_run_started_at_a_strength_steps_from_it_and_replays(village):
    model = SandboxModel(village, policy="default", seed=5, personality_strength=2.5)  # off the ladder
    wrapper = model.policy
    model.step(8)
    assert model.shift_personality_strength(-1)
    assert model.policy is wrapper and wrapper.strength == 2.0  # the run's wrapper, not a new one
    model.step(20)
    session = model.session()
    assert session.personality_strength == 2.5 and session.commands == [CommandRecord(8, OP, value=2.0)]
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(session)
    replay.step(session.ticks)
    assert replay.digest() == model.digest() and _rng_states(replay) == _rng_states(model)


def test_a_first_change_wraps_the_policy_on_the_runs_traits(village):
    traits = ["sociability", "diligence"]
    model = SandboxModel(village, policy="default", seed=1, personality_strength=1.0, personality_traits=traits)
    assert not isinstance(model.policy, PersonalityStrength)  # at 1 the policy itself plays
    assert model.shift_personality_strength(1)
    assert isinstance(model.policy, PersonalityStrength)
    assert model.policy.trait_names == tuple(traits) and model.policy.strength == 1.5
    assert model.session().personality_traits == traits


def test_keys_step_the_ladder_and_clamp_at_the_ends(make_app, monkeypatch):
    app = make_app(policy="default")
    model = app.model
    inner = model.policy
    assert model.personality_strength is None and not isinstance(inner, PersonalityStrength)
    post(app, RIGHT_BRACE)
    assert model.personality_strength == model.policy.strength == 1.5 and model.policy.inner is inner
    # Shift+] where the platform types nothing (an empty unicode) is `}` too
    post(app, key(pygame.K_RIGHTBRACKET, pygame.KMOD_SHIFT), RIGHT_BRACE)
    assert model.policy.strength == 3.0
    post(app, RIGHT_BRACE)  # the top: no change, a note, nothing logged twice
    assert model.policy.strength == 3.0 and "highest" in model.feed.lines[-1].text
    assert model.commands == [CommandRecord(0, OP, value=3.0)]
    assert model.temperature is None and model.policy.temperature == 1.0  # the braces leave T alone
    walked = []
    for _ in range(6):
        post(app, LEFT_BRACE)
        walked.append(model.policy.strength)
    assert walked == [2.0, 1.5, 1.0, 0.5, 0.0, 0.0]
    assert "lowest" in model.feed.lines[-1].text
    # presses before one tick are one record: only the last can matter to the policy
    assert model.commands == [CommandRecord(0, OP, value=0.0)]
    post(app, key(pygame.K_PERIOD))  # one tick
    post(app, key(pygame.K_RIGHTBRACKET, unicode="]"))  # plain `]`: the temperature only
    assert model.personality_strength == 0.0 and model.temperature == 2.0
    post(app, RIGHT_BRACE)
    assert model.commands[1:] == [CommandRecord(1, "temperature", value=2.0), CommandRecord(1, OP, value=0.5)]
    shown: list[str] = []
    text = app.renderer.text
    monkeypatch.setattr(app.renderer, "text", lambda s, *a, **k: shown.append(s) or text(s, *a, **k))
    app.draw()
    assert any("policy default at T=2 strength 0.5" in s for s in shown)  # the top bar


def test_the_help_lists_the_ladder():
    from sandbox.ui import HELP

    assert dict(HELP)["{ / }"].startswith("personality strength down / up: 0, 0.5, 1, 1.5, 2, 3 ")


def test_temperature_keys_reach_the_wrapped_policy_and_replay(village):
    model = SandboxModel(village, policy="default", seed=4)
    inner = model.policy
    model.step(6)
    assert model.shift_temperature(1)  # T 2 on the policy itself
    assert model.shift_personality_strength(1)  # wrapped: the wrapper takes T 2 over
    assert model.policy.temperature == 2.0
    assert model.shift_temperature(-1) and model.shift_temperature(-1)  # 1 -> 0.5, one record
    assert model.temperature == model.policy.temperature == 0.5 and inner.temperature == 2.0
    model.step(6)
    assert model.shift_temperature(-1) and model.policy.temperature == 0.25
    model.step(30)
    session = model.session()
    assert [(c.tick, c.op, c.value) for c in session.commands] == [
        (6, "temperature", 2.0), (6, OP, 1.5), (6, "temperature", 0.5), (12, "temperature", 0.25)]
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(session)
    replay.step(session.ticks)
    assert replay.digest() == model.digest() and replay.policy.temperature == 0.25
    assert _rng_states(replay) == _rng_states(model)


def test_a_restart_or_an_edit_goes_back_to_the_starting_strength(make_app):
    app = make_app(policy="default", personality_strength=2.0)  # as `village play --personality-strength 2`
    model = app.model
    started = model.policy
    post(app, RIGHT_BRACE)
    model.step(3)
    assert model.policy.strength == 3.0
    post(app, key(pygame.K_r, mod=pygame.KMOD_CTRL))
    assert model.tick == 0 and model.commands == []
    assert model.personality_strength == model.policy.strength == 2.0 and model.policy is not started
    assert any("personality strength back to 2, the run's start" in ln.text for ln in model.feed.lines)
    post(app, LEFT_BRACE)
    model.set_trait("Alda", "bravery", 0.9)  # an edit restarts too
    assert model.personality_strength == model.policy.strength == 2.0
    assert model.session().personality_strength == 2.0

    plain = make_app(policy="default").model  # a run started at 1 plays the policy itself again
    plain.shift_personality_strength(-1)
    plain.rebuild()
    assert plain.personality_strength is None and not isinstance(plain.policy, PersonalityStrength)
    assert any("personality strength back to 1" in ln.text for ln in plain.feed.lines)


def test_a_replay_ignores_the_keys(village):
    model = _recorded_run(village)
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(model.session())
    assert not replay.shift_personality_strength(1)
    assert replay.personality_strength is None and replay.commands == []
    assert "replaying: player input is ignored" in replay.feed.lines[-1].text


@pytest.mark.parametrize("policy", ["scripted", "random"])
def test_a_policy_without_a_learned_personality_ignores_the_keys_with_a_note(make_app, policy):
    app = make_app(policy=policy)
    model = app.model
    post(app, RIGHT_BRACE, LEFT_BRACE)
    assert model.personality_strength is None and model.commands == []
    assert not isinstance(model.policy, PersonalityStrength)
    assert "has no learned personality" in model.feed.lines[-1].text
    assert model.feed.lines[-1].text.endswith("the run is unchanged")


def test_a_replayed_record_for_the_scripted_rules_is_a_note(replay_rules_dial):
    replayed, notes, with_kill, plain = replay_rules_dial(OP, 2, "personality")
    assert notes == ["script: personality_strength: scripted has no learned personality to play more or less "
                     "strongly (expected a trained policy); the run is unchanged"]
    assert [c.op for c in replayed.commands] == ["kill"]  # the replay goes on past the note
    assert replayed.digest() == with_kill.digest() != plain.digest()


@pytest.mark.parametrize(("record", "message"), [
    ({"value": -1}, r"commands\[0\]\.value: expected a number from 0 to 10 \(1 plays the trained policy"),
    ({"value": 11}, r"commands\[0\]\.value: expected a number from 0 to 10"),
    ({"value": "strong"}, r"commands\[0\]\.value: expected a number from 0 to 10"),
    ({"value": True}, r"commands\[0\]\.value: expected a number, got True"),
    ({}, r"commands\[0\]\.value: missing; op 'personality_strength' needs a number from 0 to 10"),
    ({"value": 2, "target": "Alda"}, r"commands\[0\]\.target: op 'personality_strength' takes only tick and value"),
])
def test_a_bad_record_names_the_field(record, message):
    with pytest.raises(SessionError, match=message):
        session_from_dict({"commands": [{"tick": 3, "op": OP, **record}]})


def test_a_bad_value_in_json_names_the_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"commands": [{"tick": 0, "op": "stop"}, {"tick": 2, "op": "temperature", "value": 2},
                                             {"tick": 3, "op": OP, "value": 12.5}]}))
    with pytest.raises(SessionError, match=r"bad\.json: commands\[2\]\.value: expected a number from 0 to 10"):
        load_session(path)


def test_a_record_round_trips_and_a_value_elsewhere_is_refused():
    record = CommandRecord(7, OP, value=1.5)
    assert record.as_dict() == {"tick": 7, "op": OP, "value": 1.5}
    assert session_from_dict({"commands": [record.as_dict()]}).commands == [record]
    with pytest.raises(SessionError, match=r"commands\[0\]\.value: only op 'temperature' or 'personality_strength'"):
        session_from_dict({"commands": [{"tick": 1, "op": "stop", "value": 2}]})
