"""Session and script files: round trips and one-line errors naming the field."""

from __future__ import annotations

import pytest

from sandbox.session import CommandRecord, Session, SessionError, load_session, save_session


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_session_round_trip(village, tmp_path, suffix):
    session = Session(
        commands=[CommandRecord(3, "move", "player", None, 12.123456789, 30.5),
                  CommandRecord(9, "kill", "player", "Alda"),
                  CommandRecord(12, "temperature", value=0.25)],
        seed=7, policy="default", temperature=0.4, personality_strength=2.5,
        personality_traits=["sociability", "diligence"], scenario="none", slots=4, ticks=20,
        digest="abc",
        world_ref="village-v1",
        world=village,
    )
    path = tmp_path / f"s{suffix}"
    save_session(session, path)
    loaded = load_session(path)
    assert loaded == session  # floats are written exactly: a replay sends the same numbers
    assert loaded.commands[2].value == 0.25
    # a temperature record is written with its own keys only (no actor the engine would never see)
    assert session.commands[2].as_dict() == {"tick": 12, "op": "temperature", "value": 0.25}


def test_script_needs_only_commands(tmp_path):
    path = tmp_path / "script.toml"
    path.write_text('[[commands]]\ntick = 4\nop = "kill"\ntarget = "Bren"\n')
    script = load_session(path)
    assert script.commands == [CommandRecord(4, "kill", "player", "Bren")]
    assert script.world is None and script.seed is None


@pytest.mark.parametrize(("text", "field"), [
    ('[[commands]]\ntick = 4\nop = "dance"\n', "commands[0].op"),
    ('[[commands]]\ntick = -1\nop = "stop"\n', "commands[0].tick"),
    ('[[commands]]\ntick = 2\nop = "kill"\n', "commands[0].target"),
    ('[[commands]]\ntick = 2\nop = "talk"\n', "commands[0].target: op 'talk' needs a target name"),
    ('[[commands]]\ntick = 2\nop = "move"\nx = "far"\n', "commands[0].x"),
    ('[[commands]]\ntick = 2\nop = "temperature"\n', "commands[0].value: missing"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = 0\n',
     "commands[0].value: expected a number from 0.01 to 100"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = 1000\n',
     "commands[0].value: expected a number from 0.01 to 100"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = nan\n', "commands[0].value: expected a number"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = "hot"\n', "commands[0].value: expected a number"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = true\n', "commands[0].value: expected a number"),
    ('[[commands]]\ntick = 2\nop = "temperature"\nvalue = 0.5\ntarget = "Alda"\n',
     "commands[0].target: op 'temperature' takes only tick and value"),
    ('[[commands]]\ntick = 2\nop = "stop"\nvalue = 0.5\n', "commands[0].value: only op 'temperature'"),
    ('seed = "seven"\n', "seed"),
    ('temperature = 0\n', "temperature: expected a number from 0.01 to 100"),
    ('temperature = true\n', "temperature: expected a number"),
    ('personality_strength = 11\n', "personality_strength: expected a number from 0 to 10"),
    ('personality_strength = "strong"\n', "personality_strength: expected a number from 0 to 10"),
    ('personality_traits = "sociability"\n', "personality_traits: expected an array of trait names"),
    ('personality_traits = ["wit"]\n', "personality_traits: expected 'all' or distinct trait names"),
    ('colour = 3\n', "colour"),
    ('[[commands]]\ntick = 5\nop = "stop"\n[[commands]]\ntick = 2\nop = "stop"\n', "increasing"),
    ('[world]\nid = 3\n', "world"),
    ('this is not toml', "TOML"),
])
def test_bad_files_name_the_field(tmp_path, text, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SessionError, match=field.replace("[", r"\[").replace("]", r"\]")) as info:
        load_session(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_the_sandbox_runs_a_trained_policy_under_its_training_tuning(village, random_policy):
    from npc_brains import policy_tuning
    from sandbox.model import SandboxModel

    assert policy_tuning(random_policy) is None  # baselines and plain policies: the engine's defaults
    random_policy.config = {"tuning": {"mourn_ticks": 4}}
    tuning = policy_tuning(random_policy)
    assert tuning is not None and tuning.mourn_ticks == 4
    model = SandboxModel(village, policy=random_policy)
    assert model.sim.t.mourn_ticks == 4


def test_a_session_replays_at_its_temperature(village):
    """The temperature is part of what a run is: recorded, replayed, and a run at another T is another run."""
    from sandbox.model import SandboxModel

    def run(temperature: float | None) -> SandboxModel:
        model = SandboxModel(village, policy="default", seed=3, temperature=temperature)
        model.step(40)
        return model

    sharp = run(0.3)
    recorded = sharp.session()
    assert recorded.temperature == 0.3
    again = SandboxModel(village, policy="default", seed=0)
    again.start_replay(recorded)
    again.step(40)
    assert again.temperature == 0.3 and again.session().digest == recorded.digest
    assert run(None).session().digest != recorded.digest
    assert run(None).policy.temperature == 1.0  # the shared bundled policy is back at 1 for a run without T


def test_a_session_replays_at_its_personality_strength(village):
    """The personality strength is part of what a run is: recorded, replayed, shown, and another strength is
    another run; the live temperature keys still reach a strengthened policy."""
    from sandbox.model import SandboxModel

    def run(strength: float | None) -> SandboxModel:
        model = SandboxModel(village, policy="default", seed=3, personality_strength=strength)
        model.step(40)
        return model

    strong = run(3.0)
    recorded = strong.session()
    assert recorded.personality_strength == 3.0 and strong.policy.strength == 3.0
    again = SandboxModel(village, policy="default", seed=0)
    again.start_replay(recorded)
    again.step(40)
    assert again.personality_strength == 3.0 and again.session().digest == recorded.digest
    assert run(None).session().digest != recorded.digest
    strong.shift_temperature(-1)
    assert strong.policy.temperature == 0.5
