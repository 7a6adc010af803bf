"""Sandbox tests run headless: SDL's dummy video driver is set before anything imports pygame."""

from __future__ import annotations

import os

os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ["SDL_AUDIODRIVER"] = "dummy"
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from engine.policy_api import PolicyOutput  # noqa: E402


class RandomValidPolicy:
    """A tiny seeded policy for tests: uniform over each row's valid actions."""

    name = "test-random"

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, obs, mask, *, deterministic=False, with_probs=False, with_values=False) -> PolicyOutput:
        noise = np.where(mask, self.rng.random(mask.shape), -1.0)
        return PolicyOutput(np.argmax(noise, axis=1).astype(np.int64))


@pytest.fixture
def random_policy() -> RandomValidPolicy:
    return RandomValidPolicy()


@pytest.fixture
def village():
    from worlds import load_world

    return load_world("village-v1")


@pytest.fixture
def make_app(village):
    """A headless app on village-v1 (no scripted events), closed after the test."""
    from sandbox.app import SandboxApp
    from sandbox.model import SandboxModel

    apps = []

    def make(policy="scripted", seed: int = 0, world=None, size=(1024, 700), temperature=None,
             personality_strength=None, personality_traits=None):
        model = SandboxModel(world or village, policy=policy, seed=seed, scenario="none", temperature=temperature,
                             personality_strength=personality_strength, personality_traits=personality_traits)
        app = SandboxApp(model, size=size, headless=True)
        app.draw()  # lays out the map so screen <-> world conversions are valid
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.fixture
def replay_rules_dial(village):
    """Replay a dial's record (`op` = `value` at tick 4) and a kill of Alda (tick 6) on the scripted rules, 12 ticks:
    returns (the replayed model, the feed's notes that mention `word`, the same run with the kill and no record, the
    run with neither). A dial the rules lack is a note, and the replay goes on."""
    from sandbox.model import SandboxModel
    from sandbox.session import session_from_dict

    def run(session=None) -> SandboxModel:
        model = SandboxModel(village, policy="scripted", seed=2, scenario="none")
        if session is not None:
            model.start_replay(session)
        model.step(12)
        return model

    def replay(op: str, value: float, word: str):
        script = session_from_dict({"commands": [{"tick": 4, "op": op, "value": value},
                                                 {"tick": 6, "op": "kill", "target": "Alda"}]})
        replayed = run(script)
        notes = [ln.text for ln in replayed.feed.lines if word in ln.text]
        with_kill = SandboxModel(village, policy="scripted", seed=2, scenario="none")
        with_kill.step(6)
        with_kill.command("kill", "Alda")
        with_kill.step(6)
        return replayed, notes, with_kill, run()

    return replay
