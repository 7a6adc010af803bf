"""The live sampling temperature (`[` / `]`): applied at a tick boundary, logged as a session record, replayed
exactly, reset by a restart, and a no-op with a note for policies that do not sample."""

from __future__ import annotations

import json

import pygame
import pytest

from sandbox.model import SandboxModel, ladder_step
from sandbox.session import CommandRecord, SessionError, load_session, save_session
from village.cli import main

CHANGE_AT = 10  # the tick of the mid-run change
TICKS = 40  # long enough after tick 30's killing (village-v1's scenario) for sampling to show


def key(k: int, mod: int = 0) -> pygame.event.Event:
    return pygame.event.Event(pygame.KEYDOWN, key=k, mod=mod, unicode="", scancode=0)


def post(app, *events: pygame.event.Event) -> None:
    for event in events:
        pygame.event.post(event)
    app.frame(0.0)  # handles the keys; zero time, so no tick runs


def _recorded_run(village) -> SandboxModel:
    """A run of the bundled (sampling) policy started at T = 0.5, sharpened to 0.1 at tick CHANGE_AT."""
    model = SandboxModel(village, policy="default", seed=3, temperature=0.5)
    model.step(CHANGE_AT)
    assert model.shift_temperature(-1) and model.shift_temperature(-1)  # 0.5 -> 0.25 -> 0.1, one record
    model.step(TICKS - CHANGE_AT)
    return model


def _replay(village, session, monkeypatch) -> tuple[SandboxModel, list[tuple[int, float]]]:
    """Replay `session`, noting the policy's temperature each time it acts."""
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(session)
    seen: list[tuple[int, float]] = []
    act = replay.policy.act

    def spy(obs, mask, **kwargs):
        seen.append((replay.tick, replay.policy.temperature))
        return act(obs, mask, **kwargs)

    monkeypatch.setattr(replay.policy, "act", spy)
    replay.step(session.ticks)
    return replay, seen


@pytest.mark.parametrize(("current", "direction", "expected"), [
    (None, 1, 2.0), (None, -1, 0.5),  # not set: 1, as trained
    (1.0, 1, 2.0), (0.5, -1, 0.25), (0.25, -1, 0.1),
    (2.0, 1, 2.0), (0.1, -1, 0.1),  # the ends clamp
    (0.3, 1, 0.5), (0.3, -1, 0.25),  # a --temperature off the ladder steps to the nearest rung
    (5.0, -1, 2.0), (5.0, 1, 5.0), (0.05, 1, 0.1), (0.05, -1, 0.05),
])
def test_ladder_steps_and_clamps(current, direction, expected):
    assert ladder_step(current, direction) == expected


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_mid_run_change_is_saved_and_replays_to_the_same_digest(village, tmp_path, monkeypatch, suffix):
    model = _recorded_run(village)
    path = tmp_path / f"session{suffix}"
    save_session(model.session(), path)
    session = load_session(path)
    # the session starts at the run's starting T; the change is a timed record
    assert session.temperature == 0.5
    assert session.commands == [CommandRecord(CHANGE_AT, "temperature", value=0.1)]

    replay, seen = _replay(village, session, monkeypatch)
    assert replay.digest() == session.digest == model.digest()
    assert replay.commands == model.commands and replay.temperature == 0.1
    # the policy sampled at 0.5 up to the recorded tick and at 0.1 from it on, before acting that tick
    assert [t for _, t in seen] == [0.5] * CHANGE_AT + [0.1] * (TICKS - CHANGE_AT)
    assert [tick for tick, _ in seen] == list(range(TICKS))

    # control: without the record the policy samples at 0.5 throughout and the village ends elsewhere
    session.commands = []
    other, seen = _replay(village, session, monkeypatch)
    assert {t for _, t in seen} == {0.5}
    assert other.digest() != model.digest()


def test_village_play_replays_a_recorded_change(village, tmp_path, capsys):
    path = tmp_path / "session.toml"
    save_session(_recorded_run(village).session(), path)
    assert 'op = "temperature"' in path.read_text(encoding="utf-8")
    assert main(["play", "--headless", "--replay", str(path), "--size", "800x500"]) == 0
    out = capsys.readouterr().out
    assert "matches the recording" in out and "at temperature 0.1" in out  # the summary gives the T it ended at


def test_a_replay_ignores_the_keys(village):
    model = _recorded_run(village)
    replay = SandboxModel(village, policy="default", seed=0)
    replay.start_replay(model.session())
    assert not replay.shift_temperature(1)
    assert replay.temperature == 0.5 and replay.commands == []
    assert "replaying: player input is ignored" in replay.feed.lines[-1].text


def test_keys_step_the_ladder_and_clamp_at_the_ends(make_app, monkeypatch):
    app = make_app(policy="default")
    model = app.model
    assert model.temperature is None and model.policy.temperature == 1.0
    post(app, key(pygame.K_RIGHTBRACKET))
    assert model.temperature == model.policy.temperature == 2.0
    post(app, key(pygame.K_RIGHTBRACKET))  # the top: no change, a note, nothing logged twice
    assert model.policy.temperature == 2.0 and "highest" in model.feed.lines[-1].text
    assert model.commands == [CommandRecord(0, "temperature", value=2.0)]
    walked = []
    for _ in range(5):
        post(app, key(pygame.K_LEFTBRACKET))
        walked.append(model.policy.temperature)
    assert walked == [1.0, 0.5, 0.25, 0.1, 0.1]
    assert "lowest" in model.feed.lines[-1].text
    # presses before one tick are one record: only the last can matter to the policy
    assert model.commands == [CommandRecord(0, "temperature", value=0.1)]
    post(app, key(pygame.K_PERIOD))  # one tick
    post(app, key(pygame.K_RIGHTBRACKET))
    assert model.commands[-1] == CommandRecord(1, "temperature", value=0.25)
    shown: list[str] = []
    text = app.renderer.text
    monkeypatch.setattr(app.renderer, "text", lambda s, *a, **k: shown.append(s) or text(s, *a, **k))
    app.draw()
    assert any("policy default at T=0.25" in s for s in shown)  # the top bar


def test_a_restart_or_an_edit_goes_back_to_the_starting_temperature(make_app):
    app = make_app(policy="default", temperature=0.5)  # as `village play --temperature 0.5`
    model = app.model
    assert model.policy.temperature == 0.5
    post(app, key(pygame.K_RIGHTBRACKET))
    model.step(3)
    assert model.policy.temperature == 1.0
    post(app, key(pygame.K_r, mod=pygame.KMOD_CTRL))
    assert model.tick == 0 and model.commands == []
    assert model.temperature == model.policy.temperature == 0.5
    assert any("temperature back to 0.5" in ln.text for ln in model.feed.lines)
    post(app, key(pygame.K_LEFTBRACKET))
    model.set_trait("Alda", "bravery", 0.9)  # an edit restarts too
    assert model.temperature == model.policy.temperature == 0.5 and model.session().temperature == 0.5


def test_a_policy_without_probabilities_ignores_the_keys_with_a_note(make_app):
    app = make_app(policy="scripted")
    model = app.model
    post(app, key(pygame.K_RIGHTBRACKET), key(pygame.K_LEFTBRACKET))
    assert model.temperature is None and model.commands == []
    assert not hasattr(model.policy, "temperature")
    assert "no learned probabilities" in model.feed.lines[-1].text


def test_a_replayed_temperature_record_for_the_scripted_rules_is_a_note(replay_rules_dial):
    replayed, notes, plain_with_kill, plain = replay_rules_dial("temperature", 0.25, "temperature")
    assert notes == ["script: temperature: policy scripted has no learned probabilities to sharpen (the scripted "
                     "rules and random actions ignore T); the run is unchanged"]
    assert [c.op for c in replayed.commands] == ["kill"]  # the replay goes on past the note
    assert replayed.digest() == plain_with_kill.digest() != plain.digest()


def test_a_bad_value_in_json_names_the_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"commands": [{"tick": 0, "op": "stop"}, {"tick": 3, "op": "temperature",
                                                                         "value": -1}]}))
    with pytest.raises(SessionError, match=r"bad\.json: commands\[1\]\.value: expected a number from 0\.01 to 100"):
        load_session(path)
