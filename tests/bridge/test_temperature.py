"""The sampling temperature over the bridge: the server's (`village serve --temperature`, reported by hello), a
request's (`act.temperature`) and a session's (`session.create.temperature`), each checked in one line."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bridge_helpers import make_server

from bridge.batcher import Batcher, Item
from bridge.client import BridgeClient, BridgeError
from bridge.server import BridgeServer, ServerConfig
from bridge.service import ConfigError
from npc_brains import load_policy
from npc_brains.policy_api import PolicyOutput
from npc_brains.runtime import set_temperature


class RecordingPolicy:
    """Valid actions, and the temperature it was asked to sample at on each call."""

    name = "recording"

    def __init__(self) -> None:
        self.temperature = 1.0
        self.calls: list[tuple[bool, float, int]] = []

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        self.calls.append((deterministic, self.temperature, len(obs)))
        actions = np.argmax(mask, axis=1).astype(np.int64)
        return PolicyOutput(actions, np.eye(mask.shape[1], dtype=np.float32)[actions] if with_probs else None)


@pytest.fixture
def served() -> Any:
    policy = load_policy("default", slots=4, seed=0)
    srv = BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy="default", temperature=0.5), policy)
    srv.run_in_thread()
    with BridgeClient(srv.endpoint, timeout=10.0, retries=1) as client:
        yield client
    srv.stop()


def local_probs(obs: np.ndarray, mask: np.ndarray, temperature: float) -> np.ndarray:
    policy = load_policy("default", slots=4, seed=0)
    set_temperature(policy, temperature)
    return policy.act(obs, mask, deterministic=True, with_probs=True).probs


def test_requests_sample_at_the_servers_temperature_or_their_own(served):
    info = served.hello()
    assert info["temperature"] == 0.5
    rng = np.random.default_rng(3)
    obs = rng.random((12, info["obs_dim"]), dtype=np.float32)
    mask = rng.random((12, info["n_actions"])) < 0.6
    mask[:, 0] = True
    _, probs = served.act(obs, mask, with_probs=True)
    assert np.abs(probs - local_probs(obs, mask, 0.5)).max() < 1e-5
    _, probs = served.act(obs, mask, with_probs=True, temperature=0.2)
    assert np.abs(probs - local_probs(obs, mask, 0.2)).max() < 1e-5
    _, probs = served.act(obs, mask, with_probs=True)  # the next request is back at the server's
    assert np.abs(probs - local_probs(obs, mask, 0.5)).max() < 1e-5


@pytest.mark.parametrize(("fields", "needle"), [
    ({"temperature": 0}, "temperature: expected a number from 0.01 to 100"),
    ({"temperature": 1000}, "temperature: expected a number from 0.01 to 100"),
    ({"temperature": 0.5, "deterministic": True}, "temperature: deterministic takes the most likely action"),
])
def test_a_bad_request_temperature_is_a_bad_request(served, fields, needle):
    obs = np.zeros((2, served.hello()["obs_dim"]), np.float32)
    for op, extra in (("act", {"obs": obs}), ("session.create", {"npcs": [{"name": f"n{k}"} for k in range(6)]})):
        with pytest.raises(BridgeError) as err:
            served.request(op, **extra, **fields)
        assert err.value.code == "bad_request" and needle in err.value.message and "\n" not in err.value.message
    assert served.stats()["sessions"] == 0  # nothing was made of the refused creates


def test_rules_have_no_temperature():
    srv = make_server()  # the scripted rules
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0, retries=1) as client:
            assert client.hello()["temperature"] == 1.0
            with pytest.raises(BridgeError, match="the served policy scripted has no learned probabilities"):
                client.act(np.zeros((1, client.hello()["obs_dim"]), np.float32), temperature=0.5)
    finally:
        srv.stop()
    with pytest.raises(ConfigError, match="--temperature: scripted has no learned probabilities"):
        make_server(temperature=0.5)


def test_a_sessions_npcs_sample_at_its_temperature_and_others_at_the_servers():
    policy = RecordingPolicy()
    srv = make_server(policy, temperature=0.8)
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0, retries=1) as client:
            npcs = [{"name": f"n{k}"} for k in range(6)]
            sharp = client.session_create(npcs=npcs, temperature=0.3)["session"]
            plain = client.session_create(npcs=npcs)["session"]
            client.session_step(sharp)
            client.session_step(plain)
            client.act(np.zeros((2, client.hello()["obs_dim"]), np.float32), temperature=2.0)
    finally:
        srv.stop()
    assert [(t, n) for _, t, n in policy.calls] == [(0.3, 6), (0.8, 6), (2.0, 2)]
    assert policy.temperature == 0.8  # each group's temperature is undone after its forward


def test_one_batch_forwards_once_per_play_and_restores_the_policys_temperature():
    policy = RecordingPolicy()
    obs, mask = np.zeros((3, 4), np.float32), np.ones((3, 5), bool)

    def item(det: bool, t: float | None) -> Item:
        return Item(None, None, "act", 1, 0, obs, mask, det, temperature=t)

    items = [item(False, None), item(False, 0.5), item(True, None), item(False, 0.5), item(False, None)]
    results = Batcher.forward(policy, items, log=None)
    assert sorted(results) == [0, 1, 2, 3, 4]
    assert policy.calls == [(False, 1.0, 6), (False, 0.5, 6), (True, 1.0, 3)]
    assert policy.temperature == 1.0


def test_a_restarted_server_keeps_each_sessions_temperature(tmp_path):
    from bridge.protocol import Limits
    from bridge.sessions import SessionStore

    store = SessionStore(Limits(), slots=4, ttl_s=60.0, state_dir=tmp_path)
    session = store.create({"npcs": [{"name": f"n{k}"} for k in range(6)], "temperature": 0.3})
    store.save(session)
    again = SessionStore(Limits(), slots=4, ttl_s=60.0, state_dir=tmp_path)
    assert again.restore_all() == (1, [])
    assert next(iter(again)).temperature == 0.3


def test_a_reload_keeps_the_servers_temperature_and_refuses_the_rules(served):
    assert served.reload("default")["policy"] == "default"
    assert served.hello()["temperature"] == 0.5  # the new policy samples at the server's temperature too
    with pytest.raises(BridgeError) as err:
        served.reload("scripted")
    assert err.value.code == "reload_failed" and "--temperature: scripted has no learned probabilities" in \
        err.value.message
    assert served.hello()["policy"] == "default" and served.hello()["temperature"] == 0.5
