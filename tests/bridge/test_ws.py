"""The WebSocket door: the same ops as the ZeroMQ door in binary (msgpack) and text (JSON) frames, its
guards (token, origins, size, rate, in-flight bound, connection limit), close codes, fuzzing, and sessions
restored after a restart for both doors."""

from __future__ import annotations

import json
import os
import sys
import time

import msgpack
import numpy as np
import pytest

pytest.importorskip("websockets", reason="the WebSocket door needs the websockets package ([ws] extra)")

from bridge_helpers import ServerProcess, make_server, serve_args  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_robustness import frames as fuzz_frames  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from bridge import protocol as P  # noqa: E402
from bridge.client import BridgeClient, BridgeError  # noqa: E402
from bridge.service import ConfigError  # noqa: E402
from bridge.ws_client import WsBridgeClient  # noqa: E402

TOKEN = "s3cret-token-0123456789"
FUZZ_FRAMES = int(os.environ.get("BRIDGE_FUZZ_FRAMES", "10000")) // 5


@pytest.fixture
def both():
    srv = make_server(ws_bind="127.0.0.1:0")
    srv.run_in_thread()
    yield srv
    srv.stop()


def _rpc(ws, message: dict) -> dict:
    ws.send(P.pack(message))
    return P.unpack(ws.recv(timeout=10))


def test_binary_replies_are_the_zeromq_replies(both, world_text):
    obs = np.random.default_rng(0).random((16, both.obs_dim), dtype=np.float32)
    mask = np.ones((16, both.n_actions), bool)
    body = P.pack(P.request("act", 41, obs=obs, mask=mask, deterministic=True))
    with BridgeClient(both.endpoint) as z, connect(both.ws_endpoint) as ws:
        zmq_reply = z.send_raw(body, 41)
        ws.send(body)
        ws_reply = P.unpack(ws.recv(timeout=10))
    assert ws_reply == zmq_reply and ws_reply["ok"]


def test_json_frames_speak_the_same_schema(both, world_text):
    with connect(both.ws_endpoint) as ws:
        ws.send(json.dumps({"v": 1, "id": "j1", "op": "hello", "client": "console"}))
        hello = json.loads(ws.recv(timeout=10))
        assert hello["ok"] and hello["id"] == "j1" and hello["obs_dim"] == both.obs_dim
        obs = {"dtype": "float32", "shape": [2, both.obs_dim], "data": [0.0] * (2 * both.obs_dim)}
        ws.send(json.dumps({"v": 1, "id": 2, "op": "act", "obs": obs, "deterministic": True}))
        act = json.loads(ws.recv(timeout=10))
        assert act["actions"]["dtype"] == "int32" and act["actions"]["shape"] == [2]
        assert all(isinstance(a, int) for a in act["actions"]["data"])
        ws.send("{not json")
        bad = json.loads(ws.recv(timeout=10))
        assert bad == {"v": 1, "id": None, "ok": False, "error": bad["error"]}
        assert bad["error"]["code"] == "decode_error"
        ws.send(json.dumps({"v": 1, "id": 3, "op": "act", "obs": {"dtype": "float32", "shape": [1, 3],
                                                                   "data": [1, 2, 3]}}))
        wrong = json.loads(ws.recv(timeout=10))
        assert wrong["id"] == 3 and wrong["error"]["code"] == "invalid_array" and "obs" in wrong["error"]["message"]


@pytest.mark.parametrize("use_json", [False, True])
def test_a_session_with_reactions_over_either_frame_kind(both, world_text, use_json):
    with WsBridgeClient(both.ws_endpoint, json=use_json) as c:
        sid = c.session_create(world=world_text, seed=2, deterministic=True)["session"]
        c.session_event(sid, "death", actor="player", target="Alda", witnesses=["Bren"])
        seen = set()
        for _ in range(4):
            seen |= {r["reaction"] for r in c.session_step(sid)["reactions"]}
        assert seen - {"none", "idle"}, seen
        with pytest.raises(BridgeError) as err:
            c.session_step("no-such-session")
        assert err.value.code == "not_found"


def test_many_requests_in_flight_on_one_connection_come_back_by_id(both):
    obs = np.zeros((3, both.obs_dim), np.float32)
    with connect(both.ws_endpoint) as ws:
        for k in range(40):
            ws.send(P.pack(P.request("act", k, obs=obs) if k % 2 else P.request("ping", k)))
        ids = sorted(P.unpack(ws.recv(timeout=10))["id"] for _ in range(40))
    assert ids == list(range(40))


def test_token_is_required_and_checked():
    srv = make_server(ws_bind="127.0.0.1:0", ws_token=TOKEN)
    srv.run_in_thread()
    try:
        url = srv.ws_endpoint
        for headers, path in ((None, ""), ({"Authorization": "Bearer wrong-token-0123456789"}, ""),
                              (None, "/?token=nope")):
            with pytest.raises(InvalidStatus) as err:
                connect(url + path, additional_headers=headers)
            assert err.value.response.status_code == 401
        with WsBridgeClient(url, token=TOKEN) as c:
            assert c.ping() > 0
        with connect(f"{url}/?token={TOKEN}") as ws:
            assert _rpc(ws, P.request("ping", 1))["ok"]
        assert srv.service._op_stats(None)["doors"]["ws"]["refused_token"] == 3
    finally:
        srv.stop()


def test_origin_allow_list():
    srv = make_server(ws_bind="127.0.0.1:0", ws_origins=("https://game.example",))
    srv.run_in_thread()
    try:
        with pytest.raises(InvalidStatus) as err:
            connect(srv.ws_endpoint, origin="https://evil.example")
        assert err.value.response.status_code == 403
        for origin in ("https://game.example", None):  # an allowed page, and a client with no Origin at all
            with connect(srv.ws_endpoint, origin=origin) as ws:
                assert _rpc(ws, P.request("ping", 1))["ok"]
    finally:
        srv.stop()


@pytest.mark.parametrize(("bind", "token", "insecure", "message"), [
    ("0.0.0.0:0", None, False, "--ws-token"),
    ("127.0.0.1:0", "short", False, "at least 16"),
    ("localhost", None, False, "HOST:PORT"),
])
def test_unsafe_or_bad_ws_settings_refuse_to_start(bind, token, insecure, message):
    srv = make_server(ws_bind=bind, ws_token=token, insecure=insecure)
    with pytest.raises(ConfigError, match=message):
        srv.start()


def test_a_non_loopback_bind_with_a_token_starts():
    srv = make_server(bind=None, ws_bind="0.0.0.0:0", ws_token=TOKEN)
    srv.run_in_thread()
    try:
        port = srv.ws_endpoint.rsplit(":", 1)[1]
        with WsBridgeClient(f"ws://127.0.0.1:{port}", token=TOKEN) as c:
            assert c.hello()["protocol"] == P.PROTOCOL_VERSION
    finally:
        srv.stop()


def test_size_limits_soft_reply_and_hard_close():
    limits = P.Limits(max_message_bytes=64 * 1024, hard_message_factor=4)
    srv = make_server(ws_bind="127.0.0.1:0", limits=limits)
    srv.run_in_thread()
    try:
        with connect(srv.ws_endpoint, max_size=None) as ws:
            ws.send(b"\x00" * (64 * 1024 + 1))
            reply = P.unpack(ws.recv(timeout=10))
            assert reply["error"]["code"] == "too_large" and reply["id"] is None
            ws.send(b"\x00" * (300 * 1024))
            with pytest.raises(ConnectionClosed) as err:
                ws.recv(timeout=10)
            assert err.value.rcvd is not None and err.value.rcvd.code == 1009
        with connect(srv.ws_endpoint) as ws:  # everyone else is still served
            assert _rpc(ws, P.request("ping", 2))["ok"]
    finally:
        srv.stop()


def test_rate_and_inflight_limits_answer_and_keep_serving():
    srv = make_server(ws_bind="127.0.0.1:0", ws_rate=2.0, ws_burst=3)
    srv.run_in_thread()
    try:
        with connect(srv.ws_endpoint) as ws:
            for k in range(10):
                ws.send(P.pack(P.request("ping", k)))
            replies = [P.unpack(ws.recv(timeout=10)) for _ in range(10)]
            limited = [r for r in replies if not r["ok"]]
            assert len(limited) >= 6 and {r["error"]["code"] for r in limited} == {"rate_limited"}
            assert sorted(r["id"] for r in replies) == list(range(10))  # refused ones keep their ids
            time.sleep(0.6)  # the bucket refills (2 tokens a second)
            assert _rpc(ws, P.request("ping", 99))["ok"]
    finally:
        srv.stop()
    srv = make_server(ws_bind="127.0.0.1:0", ws_inflight=2, ws_rate=0, batch_delay_us=300_000)
    srv.run_in_thread()
    try:
        with connect(srv.ws_endpoint) as ws, connect(srv.ws_endpoint) as other:
            obs = np.zeros((1, srv.obs_dim), np.float32)
            # Only a batched request makes a client active; with a second active client each batch waits
            # 300 ms for it, so the six requests below are still unanswered when the third one arrives.
            assert _rpc(other, P.request("act", 0, obs=obs))["ok"]
            for k in range(6):
                ws.send(P.pack(P.request("act", k, obs=obs)))
            replies = [P.unpack(ws.recv(timeout=10)) for _ in range(6)]
            codes = [r["error"]["code"] for r in replies if not r["ok"]]
            assert codes and set(codes) == {"limit_exceeded"} and sum(r["ok"] for r in replies) >= 2
    finally:
        srv.stop()


def test_connection_limit_answers_503():
    srv = make_server(ws_bind="127.0.0.1:0", ws_max_connections=1)
    srv.run_in_thread()
    try:
        with connect(srv.ws_endpoint) as ws:
            assert _rpc(ws, P.request("ping", 1))["ok"]
            with pytest.raises(InvalidStatus) as err:
                connect(srv.ws_endpoint)
            assert err.value.response.status_code == 503
    finally:
        srv.stop()


def test_server_stop_closes_with_going_away():
    srv = make_server(ws_bind="127.0.0.1:0")
    srv.run_in_thread()
    ws = connect(srv.ws_endpoint).__enter__()  # the server closes it
    assert _rpc(ws, P.request("ping", 1))["ok"]
    srv.stop()
    with pytest.raises(ConnectionClosed) as err:
        ws.recv(timeout=10)
    assert err.value.rcvd is not None and err.value.rcvd.code == 1001


def test_fuzz_binary_and_text_frames(both):
    """Random, mutated and schema-fuzzed frames over both frame kinds: one reply each, then service as usual."""
    ws = connect(both.ws_endpoint).__enter__()  # closed below
    sent = {"frames": 0}
    texts = st.one_of(st.text(max_size=80), fuzz_frames.map(lambda b: json.dumps(
        msgpack.unpackb(b, raw=False, strict_map_key=False), default=repr) if _decodes(b) else b.hex()))

    @settings(max_examples=max(1, FUZZ_FRAMES // 10), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(fuzz_frames | texts, min_size=10, max_size=10))
    def run(batch: list[bytes | str]) -> None:
        for frame in batch:
            ws.send(frame)
        kinds = []
        for _ in batch:  # the door's own refusals (bad JSON) may overtake replies still in the service
            raw = ws.recv(timeout=10)
            kinds.append(type(raw))
            reply = json.loads(raw) if isinstance(raw, str) else P.unpack(raw)
            assert isinstance(reply["ok"], bool)
            if not reply["ok"]:
                assert reply["error"]["code"] in P.ERROR_CODES
        assert sorted(map(str, kinds)) == sorted(str(type(f)) for f in batch)  # text in, text out
        sent["frames"] += len(batch)

    try:
        run()
    finally:
        ws.close()
    assert sent["frames"] >= FUZZ_FRAMES
    with WsBridgeClient(both.ws_endpoint) as c:
        assert c.act(np.zeros((4, both.obs_dim), np.float32))[0].shape == (4,)


def _decodes(body: bytes) -> bool:
    try:
        msgpack.unpackb(body, raw=False, strict_map_key=False)
        return True
    except Exception:
        return False


def test_restart_restores_sessions_for_both_doors(tmp_path, world_text):
    state, log = tmp_path / "state", tmp_path / "server.log"
    log.touch()
    args = serve_args("--policy", "scripted", "--bind", "tcp://127.0.0.1:0", "--ws", "127.0.0.1:0",
                      "--state-dir", str(state))
    first = ServerProcess(args, log)
    try:
        ws_url = _ws_endpoint(log)
        with WsBridgeClient(ws_url) as c:
            sid = c.session_create(world=world_text, seed=3)["session"]
            c.session_event(sid, "death", actor="player", target="Alda", witnesses=["Bren"])
            assert c.session_step(sid)["tick"] == 1
    finally:
        first.stop()
    second = ServerProcess(args, log)
    try:
        ws_url = _ws_endpoint(log)
        with WsBridgeClient(ws_url) as c:
            assert c.session_step(sid)["tick"] == 2
        with BridgeClient(second.endpoint, timeout=5.0) as z:
            assert z.session_step(sid)["tick"] == 3
            bren = z.session_state(sid, npc="Bren")["npcs"][0]
            assert bren["knows_death"][0]["subject"] == "Alda"
    finally:
        second.stop()


def _ws_endpoint(log_path) -> str:
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return [e for e in lines if e.get("event") == "listening"][-1]["ws"]


def test_cli_refuses_bad_ws_flags():
    import subprocess

    from bridge_helpers import ROOT, python_env

    for extra, needle in ((["--ws", "0.0.0.0:0"], "--ws-token"), (["--bind", "none"], "--ws HOST:PORT"),
                          (["--ws", "127.0.0.1:0", "--ws-rate", "-1"], "--ws-rate")):
        out = subprocess.run([sys.executable, "-m", "village", "serve", "--policy", "scripted", *extra],
                             capture_output=True, text=True, cwd=ROOT, env=python_env(), timeout=60)
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr
