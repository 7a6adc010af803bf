"""Every op through a live server and the Python client: results, and the error codes of bad requests."""

from __future__ import annotations

import time

import numpy as np
import pytest
from bridge_helpers import OBS_DIM, FirstValidPolicy, make_server

from bridge import protocol as P
from bridge.client import BridgeClient, BridgeError
from engine.constants import REACTION_NAMES
from engine.observe import observation_layout
from engine.vec_env import flat_action_names


def test_ping_returns_server_time(client):
    before = time.time()
    assert client.ping() >= before - 1.0


def test_hello_reports_versions_layout_and_limits(client):
    info = client.hello()
    assert info["protocol"] == P.PROTOCOL_VERSION
    assert info["protocol_minor"] == P.PROTOCOL_MINOR
    assert info["observation_layout"] == observation_layout(4)
    assert info["action_names"] == flat_action_names(4)
    assert info["obs_dim"] == len(info["observation_layout"]) and info["n_actions"] == len(info["action_names"])
    assert info["reaction_names"] == list(REACTION_NAMES)
    assert info["ops"] == list(P.OPS)
    assert info["limits"]["max_rows"] == P.Limits().max_rows
    assert info["policy"] == "scripted"
    assert set(info) >= {f.name for f in P.OPS["hello"].reply if f.required}


def test_act_returns_valid_actions_and_probs(client):
    info = client.hello()
    rng = np.random.default_rng(0)
    obs = rng.random((16, info["obs_dim"]), dtype=np.float32)
    mask = rng.random((16, info["n_actions"])) < 0.3
    mask[:, 0] = True
    actions, probs = client.act(obs, mask, with_probs=True)
    assert actions.dtype == np.int32 and actions.shape == (16,)
    assert mask[np.arange(16), actions].all()
    assert probs.shape == (16, info["n_actions"]) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)


def test_act_without_mask_allows_everything(server):
    server.policy = FirstValidPolicy()
    with BridgeClient(server.endpoint, timeout=5.0) as c:
        actions, probs = c.act(np.zeros((3, server.obs_dim), np.float32))
    assert actions.tolist() == [0, 0, 0] and probs is None


@pytest.mark.parametrize(
    ("fields", "code", "needle"),
    [
        ({"obs": np.zeros((2, 5), np.float32)}, "invalid_array", "obs: expected shape"),
        ({"obs": np.zeros((2, OBS_DIM), np.float64)}, "invalid_array", "obs.dtype"),
        ({"obs": np.full((1, OBS_DIM), np.nan, np.float32)}, "invalid_array", "NaN"),
        ({"obs": np.zeros((1, OBS_DIM), np.float32), "mask": np.zeros((1, 29), bool)}, "invalid_array",
         "row 0 allows no action"),
        ({"obs": np.zeros((2, OBS_DIM), np.float32), "mask": np.ones((3, 29), bool)}, "invalid_array", "mask"),
        ({"obs": np.zeros((4097, OBS_DIM), np.float32)}, "limit_exceeded", "obs"),
        ({"obs": np.zeros((1, OBS_DIM), np.float32), "deterministic": "yes"}, "bad_request", "deterministic"),
        ({"obs": np.zeros((1, OBS_DIM), np.float32), "bogus": 1}, "bad_request", "bogus: unknown field"),
        ({}, "bad_request", "obs: missing"),
    ],
)
def test_act_rejects_bad_requests_with_codes(client, fields, code, needle):
    with pytest.raises(BridgeError) as err:
        client.request("act", **fields)
    assert err.value.code == code
    assert needle in err.value.message
    assert client.ping() > 0  # and the server carries on


def test_act_rejects_array_with_wrong_data_length(client):
    bad = {"dtype": "float32", "shape": [1, OBS_DIM], "data": b"\0" * 10}
    with pytest.raises(BridgeError) as err:
        client.request("act", obs=bad)
    assert err.value.code == "invalid_array" and "bytes" in err.value.message


def test_session_lifecycle_with_a_death(client, world_text):
    created = client.session_create(world=world_text, seed=3)
    sid = created["session"]
    assert created["npcs"][0] == "Alda" and created["actors"] == ["player", "raider1", "raider2"]
    assert created["tick"] == 0
    queued = client.session_event(sid, "death", actor="player", target="Alda", witnesses=["Bren", "Kara"])
    assert queued == {"event": 1, "queued": 1}
    step = client.session_step(sid)
    assert step["tick"] == 1
    assert [e["type"] for e in step["events"]] == ["death"]
    assert step["events"][0] == {**step["events"][0], "event": 1, "actor": "player", "target": "Alda",
                                 "external": True}
    by_npc = {r["npc"]: r for r in step["reactions"]}
    assert set(by_npc) == set(created["npcs"])
    assert by_npc["Alda"]["alive"] is False
    for r in step["reactions"]:
        assert r["reaction"] in REACTION_NAMES and r["intensity"] >= 0
        assert set(r) >= {"npc", "action", "target", "reaction", "intensity", "cause", "dest"}
    state = client.session_state(sid, npc="Bren")
    bren = state["npcs"][0]
    assert bren["knows_death"][0]["subject"] == "Alda" and bren["knows_death"][0]["culprit"] == "player"
    assert bren["grief"] > 0 and bren["anger"].get("player", 0) > 0
    everyone = client.session_state(sid)
    assert len(everyone["npcs"]) == 12 and everyone["tick"] == 1
    assert client.session_close(sid) == {"closed": True}
    with pytest.raises(BridgeError) as err:
        client.session_step(sid)
    assert err.value.code == "not_found"


def test_reactions_follow_a_death_and_name_its_cause(client, world_text):
    sid = client.session_create(world=world_text, seed=0)["session"]
    number = client.session_event(sid, "death", actor="player", target="Alda")["event"]
    seen = []
    for _ in range(12):
        seen += [r for r in client.session_step(sid)["reactions"] if r["reaction"] != "none"]
    kinds = {r["reaction"] for r in seen}
    assert kinds & {"mourning", "revenge", "fear"}, kinds
    mourners = [r for r in seen if r["reaction"] == "mourning"]
    assert mourners and all(r["target"] == "Alda" and r["cause"] == number for r in mourners)
    assert any("bark" in r for r in seen)


def test_session_from_npc_list(client):
    npcs = [{"name": n, "role": "farmer", "traits": {"empathy": 0.9}, "x": 10.0 + 3 * k, "y": 10.0}
            for k, n in enumerate(["Ann", "Ben", "Cat", "Dan"])]
    created = client.session_create(
        npcs=npcs, relationships=[{"a": "Ann", "b": "Ben", "kind": "spouse", "affinity": 0.9}],
        actors=[{"name": "hero", "kind": "player", "x": 12.0, "y": 12.0}], width=40, height=40)
    sid = created["session"]
    assert created["npcs"] == ["Ann", "Ben", "Cat", "Dan"] and created["actors"] == ["hero"]
    client.session_event(sid, "death", actor="hero", target="Ann")
    pos = np.array([[10, 10], [13, 10], [16, 10], [19, 10], [11, 10]], np.float32)
    step = client.session_step(sid, pos=pos, health=np.ones(5, np.float32), alive=np.ones(5, bool))
    assert step["events"][0]["type"] == "death"
    ben = client.session_state(sid, npc="Ben")["npcs"][0]
    assert ben["grief"] > 0.5 and ben["knows_death"][0]["culprit"] == "hero"


@pytest.mark.parametrize(
    ("fields", "code", "needle"),
    [
        ({}, "bad_request", "give exactly one"),
        ({"world": "not toml ["}, "invalid_world", "TOML"),
        ({"npcs": []}, "bad_request", "at least one NPC"),
        ({"npcs": [{"name": "A", "wings": 2}]}, "bad_request", "npcs[0].wings"),
        ({"npcs": [{"name": "A", "traits": {"bravery": 3}}, {"name": "B"}, {"name": "C"}, {"name": "D"},
                   {"name": "E"}]}, "invalid_world", "npcs[0].traits.bravery"),
        ({"npcs": [{"name": "A"}, {"name": "B"}]}, "invalid_world", "at least 5"),
        ({"npcs": [{"name": f"n{k}"} for k in range(65)]}, "limit_exceeded", "65 NPCs"),
        ({"npcs": [{"name": "A"}], "world": "x"}, "bad_request", "exactly one"),
    ],
)
def test_session_create_errors(client, fields, code, needle):
    with pytest.raises(BridgeError) as err:
        client.request("session.create", **fields)
    assert err.value.code == code, err.value.message
    assert needle in err.value.message


def test_session_event_errors(client, world_text):
    sid = client.session_create(world=world_text)["session"]
    cases = [
        ({"type": "explode", "target": "Alda"}, "bad_request", "type: expected one of"),
        ({"type": "death", "target": "Nobody"}, "bad_request", "'Nobody' is not"),
        ({"type": "death", "target": 99}, "bad_request", "out of range"),
        ({"type": "gift", "target": "Alda"}, "bad_request", "needs an actor"),
        ({"type": "talk", "actor": "Alda", "target": "player"}, "bad_request", "NPC target"),
        ({"type": "gift", "actor": "player", "target": "Bren", "witnesses": ["Alda"]}, "bad_request",
         "witnesses"),
        ({"type": "death", "actor": "player", "target": "Alda", "witnesses": ["player"]}, "bad_request",
         "is an actor"),
    ]
    for fields, code, needle in cases:
        with pytest.raises(BridgeError) as err:
            client.request("session.event", session=sid, **fields)
        assert err.value.code == code and needle in err.value.message, (fields, err.value)
    client.session_event(sid, "death", actor="player", target="Alda")
    with pytest.raises(BridgeError) as err:
        client.session_event(sid, "death", actor="player", target="Alda")
    assert "already dead" in err.value.message


def test_session_event_queue_is_bounded(server, world_text):
    server.store.limits = server.limits = P.Limits(max_queued_events=3)
    with BridgeClient(server.endpoint, timeout=5.0) as c:
        sid = c.session_create(world=world_text)["session"]
        server.store.sessions[sid].limits = server.limits
        for _ in range(3):
            c.session_event(sid, "gift", actor="player", target="Bren")
        with pytest.raises(BridgeError) as err:
            c.session_event(sid, "gift", actor="player", target="Bren")
        assert err.value.code == "limit_exceeded"
        c.session_step(sid)  # the queue drains at the step
        c.session_event(sid, "gift", actor="player", target="Bren")


def test_session_step_rejects_bad_body_arrays(client, world_text):
    sid = client.session_create(world=world_text)["session"]
    with pytest.raises(BridgeError) as err:
        client.session_step(sid, pos=np.zeros((3, 2), np.float32))
    assert err.value.code == "invalid_array" and "expected shape [15, 2]" in err.value.message
    with pytest.raises(BridgeError) as err:
        client.session_step(sid, health=np.full(15, np.inf, np.float32))
    assert err.value.code == "invalid_array"
    assert client.session_step(sid)["tick"] == 1  # the session is unharmed


def test_sessions_are_bounded(world_text):
    srv = make_server(limits=P.Limits(max_sessions=2))
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0) as c:
            first = c.session_create(world=world_text)["session"]
            c.session_create(world=world_text)
            with pytest.raises(BridgeError) as err:
                c.session_create(world=world_text)
            assert err.value.code == "limit_exceeded"
            c.session_close(first)
            c.session_create(world=world_text)
    finally:
        srv.stop()


def test_idle_sessions_expire(world_text):
    srv = make_server(session_ttl_s=0.2)
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0) as c:
            sid = c.session_create(world=world_text)["session"]
            assert c.stats()["sessions"] == 1
            # expiry is judged on wall-clock idleness; pretend the session was last used long ago
            srv.store.sessions[sid].last_used -= 10
            deadline = time.monotonic() + 10
            while c.stats()["sessions"] and time.monotonic() < deadline:
                c.ping()
            assert c.stats()["sessions"] == 0
            with pytest.raises(BridgeError) as err:
                c.session_state(sid)
            assert err.value.code == "not_found"
    finally:
        srv.stop()


def test_reload_swaps_policy_and_failures_keep_the_old_one(client, tmp_path):
    assert client.hello()["policy"] == "scripted"
    result = client.reload("random")
    assert result["policy"] == "random" and result["load_ms"] >= 0
    assert client.hello()["policy"] == "random"
    assert client.stats()["reloads"] == 1
    with pytest.raises(BridgeError) as err:
        client.reload("/etc/passwd")
    assert err.value.code == "forbidden"
    with pytest.raises(BridgeError) as err:
        client.reload("missing-checkpoint.pt")
    assert err.value.code == "reload_failed"
    assert client.hello()["policy"] == "random"
    assert client.reload()["policy"] == "scripted"  # no field: the policy the server started with


def test_reload_takes_the_bundled_names(client):
    assert client.reload("mappo")["policy"] == "mappo"  # a name, not a path outside the policy root
    assert client.hello()["policy"] == "mappo"


def test_stats_counts_requests_errors_and_latency(client):
    client.ping()
    client.act(np.zeros((2, OBS_DIM), np.float32))
    with pytest.raises(BridgeError):
        client.request("nope")
    stats = client.stats()
    assert stats["requests"]["ping"] >= 1 and stats["requests"]["act"] >= 1
    assert stats["errors"]["unknown_op"] == 1
    lat = stats["latency_us"]["act"]
    assert lat["n"] >= 1 and 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    assert stats["batches"]["count"] >= 1 and stats["policy"] == "scripted"
    assert set(stats) >= {f.name for f in P.OPS["stats"].reply if f.required}


def test_every_op_is_tested():
    tested = {"ping", "hello", "act", "session.create", "session.event", "session.step", "session.state",
              "session.close", "reload", "stats"}
    assert tested == set(P.OPS)


def test_stats_reports_the_garbage_collector(client):
    """The start-up objects are frozen out of the collector's sight, and its pauses are counted per generation."""
    import gc

    client.ping()  # the loop is serving, so its callback is installed
    gc.collect(0)  # the server's callback counts collections in its process (here: this one)
    g = client.stats()["gc"]
    assert g["frozen"] > 0
    assert g["gen0"]["collections"] >= 1 and g["gen0"]["max_us"] > 0
    assert set(g) == {"frozen", "gen0", "gen1", "gen2"}


def test_gc_pauses_counts_by_generation():
    from bridge.server import GcPauses

    pauses = GcPauses()
    pauses("start", {"generation": 1})
    pauses("stop", {"generation": 1})
    pauses("start", {"generation": 2})
    pauses("stop", {"generation": 2})
    s = pauses.summary()
    assert [s[f"gen{k}"]["collections"] for k in range(3)] == [0, 1, 1]
    assert s["gen1"]["max_us"] >= 0 and s["gen0"]["total_ms"] == 0


def test_a_spinning_server_answers_like_a_sleeping_one():
    """spin_us polls for the next request before sleeping; the replies are the same."""
    srv = make_server(spin_us=2000)
    srv.run_in_thread()
    try:
        with BridgeClient(srv.endpoint, timeout=5.0, retries=1) as c:
            obs = np.zeros((3, OBS_DIM), np.float32)
            for _ in range(20):  # back to back: each request lands while the loop spins
                actions, _ = c.act(obs, deterministic=True)
                assert actions.shape == (3,)
            assert c.stats()["requests"]["act"] == 20
    finally:
        srv.stop()
