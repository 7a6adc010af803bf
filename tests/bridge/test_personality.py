"""The personality strength over the bridge: the server's (`village serve --personality-strength`, reported by
hello), a request's (`act.personality_strength`) and a session's (`session.create.personality_strength`), each
checked in one line; at strength 1 the network is served as it is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bridge_helpers import make_server

from bridge.batcher import Batcher, Item
from bridge.client import BridgeClient, BridgeError
from bridge.server import BridgeServer, ServerConfig
from bridge.service import ConfigError
from engine.observe import observation_layout
from npc_brains import load_policy
from npc_brains.personality import PersonalityStrength
from npc_brains.policy_api import PolicyOutput


class RecordingPolicy:
    """Valid actions, with a village observation layout (so the server may strengthen its personalities), and
    each call's (deterministic, rows)."""

    name = "recording"
    observation_layout = observation_layout(4)

    def __init__(self) -> None:
        self.temperature = 1.0
        self.strength = None  # what a batch group sets on a policy that has one
        self.calls: list[tuple[bool, int]] = []

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        self.calls.append((deterministic, len(obs)))
        actions = np.argmax(mask, axis=1).astype(np.int64)
        probs = np.where(mask, 1.0, 0.0).astype(np.float32)
        return PolicyOutput(actions, probs / probs.sum(1, keepdims=True) if with_probs else None)


def serve(strength: float = 1.0, policy: Any = None) -> BridgeServer:
    policy = policy if policy is not None else load_policy("default", slots=4, seed=0)
    srv = BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy="default", personality_strength=strength), policy)
    srv.run_in_thread()
    return srv


@pytest.fixture
def served() -> Any:
    srv = serve(2.0)
    with BridgeClient(srv.endpoint, timeout=10.0, retries=1) as client:
        yield client
    srv.stop()


def rows(info: dict[str, Any], n: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    obs = rng.random((n, info["obs_dim"]), dtype=np.float32)
    mask = rng.random((n, info["n_actions"])) < 0.6
    mask[:, 0] = True
    return obs, mask


def local_probs(obs: np.ndarray, mask: np.ndarray, strength: float) -> np.ndarray:
    return PersonalityStrength(load_policy("default", slots=4, seed=0), strength).guided_probs(obs, mask)


def test_requests_play_at_the_servers_strength_or_their_own(served):
    info = served.hello()
    assert info["personality_strength"] == 2.0 and info["protocol_minor"] == 3
    assert info["personality_traits"] == ["bravery", "aggression", "empathy", "sociability", "diligence"]
    obs, mask = rows(info)
    _, probs = served.act(obs, mask, with_probs=True)
    assert np.abs(probs - local_probs(obs, mask, 2.0)).max() < 1e-5
    _, probs = served.act(obs, mask, with_probs=True, personality_strength=3.5)
    assert np.abs(probs - local_probs(obs, mask, 3.5)).max() < 1e-5
    actions, _ = served.act(obs, mask, deterministic=True, personality_strength=0.0)
    assert np.array_equal(actions, local_probs(obs, mask, 0.0).argmax(1))  # with deterministic too
    _, probs = served.act(obs, mask, with_probs=True)  # the next request is back at the server's
    assert np.abs(probs - local_probs(obs, mask, 2.0)).max() < 1e-5


def test_at_strength_one_the_network_is_served_as_it_is():
    srv = serve(1.0)
    try:
        with BridgeClient(srv.endpoint, timeout=10.0, retries=1) as client:
            info = client.hello()
            assert info["personality_strength"] == 1.0
            obs, mask = rows(info)
            _, probs = client.act(obs, mask, with_probs=True)
            plain = load_policy("default", slots=4, seed=0).act(obs, mask, deterministic=True, with_probs=True)
            assert np.abs(probs - plain.probs).max() < 1e-6
            _, probs = client.act(obs, mask, with_probs=True, personality_strength=2.0)
            assert np.abs(probs - local_probs(obs, mask, 2.0)).max() < 1e-5
    finally:
        srv.stop()


@pytest.mark.parametrize("value", [-1, 10.5, "strong", True])
def test_a_bad_strength_is_a_bad_request(served, value):
    obs = np.zeros((2, served.hello()["obs_dim"]), np.float32)
    for op, extra in (("act", {"obs": obs}), ("session.create", {"npcs": [{"name": f"n{k}"} for k in range(6)]})):
        with pytest.raises(BridgeError) as err:
            served.request(op, **extra, personality_strength=value)
        message = err.value.message
        assert err.value.code == "bad_request" and "personality_strength" in message and "\n" not in message
    assert served.stats()["sessions"] == 0  # nothing was made of the refused creates


def test_rules_have_no_personality_to_strengthen():
    srv = make_server()  # the scripted rules
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0, retries=1) as client:
            assert client.hello()["personality_strength"] == 1.0
            with pytest.raises(BridgeError, match="the served policy scripted has no learned personality"):
                client.act(np.zeros((1, client.hello()["obs_dim"]), np.float32), personality_strength=2.0)
    finally:
        srv.stop()
    with pytest.raises(ConfigError, match="--personality-strength: scripted has no learned personality"):
        make_server(personality_strength=2.0)


def test_a_sessions_npcs_play_at_its_strength_and_others_at_the_servers():
    """A strength other than 1 asks the network about twice the rows (each NPC and its neutral villager)."""
    policy = RecordingPolicy()
    srv = make_server(policy, personality_strength=1.0)
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0, retries=1) as client:
            npcs = [{"name": f"n{k}"} for k in range(6)]
            strong = client.session_create(npcs=npcs, personality_strength=3.0)["session"]
            plain = client.session_create(npcs=npcs)["session"]
            client.session_step(strong)
            client.session_step(plain)
            client.act(np.zeros((2, client.hello()["obs_dim"]), np.float32), personality_strength=0.5)
    finally:
        srv.stop()
    assert policy.calls == [(True, 12), (False, 6), (True, 4)]


def test_one_batch_forwards_once_per_strength_and_restores_the_policys():
    policy = RecordingPolicy()
    policy.strength = 1.0
    obs, mask = np.zeros((3, 4), np.float32), np.ones((3, 5), bool)
    seen: list[tuple[float, float]] = []
    act = policy.act

    def spy(*args: Any, **kwargs: Any) -> PolicyOutput:
        seen.append((policy.strength, policy.temperature))
        return act(*args, **kwargs)

    policy.act = spy  # type: ignore[method-assign]

    def item(s: float | None, t: float | None = None) -> Item:
        return Item(None, None, "act", 1, 0, obs, mask, False, temperature=t, personality_strength=s)

    items = [item(None), item(2.0), item(2.0, 0.5), item(2.0), item(None)]
    assert sorted(Batcher.forward(policy, items, log=None)) == [0, 1, 2, 3, 4]
    assert seen == [(1.0, 1.0), (2.0, 1.0), (2.0, 0.5)] and [n for _, n in policy.calls] == [6, 6, 3]
    assert policy.strength == 1.0 and policy.temperature == 1.0


def test_a_restarted_server_keeps_each_sessions_strength(tmp_path):
    from bridge.protocol import Limits
    from bridge.sessions import SessionStore

    store = SessionStore(Limits(), slots=4, ttl_s=60.0, state_dir=tmp_path)
    session = store.create({"npcs": [{"name": f"n{k}"} for k in range(6)], "personality_strength": 2.5})
    store.save(session)
    again = SessionStore(Limits(), slots=4, ttl_s=60.0, state_dir=tmp_path)
    assert again.restore_all() == (1, [])
    assert next(iter(again)).personality_strength == 2.5


def test_a_reload_keeps_the_servers_strength_and_refuses_the_rules(served):
    assert served.reload("default")["policy"] == "default"
    assert served.hello()["personality_strength"] == 2.0
    with pytest.raises(BridgeError) as err:
        served.reload("scripted")
    assert err.value.code == "reload_failed" and "--personality-strength: scripted has no learned personality" in \
        err.value.message
    assert served.hello()["policy"] == "default" and served.hello()["personality_strength"] == 2.0


def test_the_server_strengthens_the_traits_it_was_given():
    """`village serve --personality-traits sociability,diligence`: hello names them, and every strength, the
    server's and a request's, acts on them alone."""
    policy = load_policy("default", slots=4, seed=0)
    srv = BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy="default", personality_strength=3.0,
                                    personality_traits=("sociability", "diligence")), policy)
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=10.0, retries=1) as client:
            info = client.hello()
            assert info["personality_traits"] == ["sociability", "diligence"]
            obs, mask = rows(info)
            for strength in (None, 2.0):
                _, probs = client.act(obs, mask, with_probs=True, personality_strength=strength)
                local = PersonalityStrength(load_policy("default", slots=4, seed=0), strength or 3.0,
                                            traits="sociability,diligence").guided_probs(obs, mask)
                assert np.abs(probs - local).max() < 1e-5
                assert np.abs(probs - local_probs(obs, mask, strength or 3.0)).max() > 1e-3  # not all five
    finally:
        srv.stop()
