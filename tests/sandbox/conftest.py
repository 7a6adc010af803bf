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
