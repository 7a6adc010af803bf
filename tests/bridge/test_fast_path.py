"""The service's `act` fast path gives exactly the generic path's replies, errors and counters.

The fast path (bridge.protocol.parse_act_fast) checks and decodes the usual well-formed `act` inline and
hands anything else to the generic validate_request + _op_act path. These tests drive the transport-free
service (its `transmit` records what is sent) once with the fast path and once with it switched off, and
compare the bytes; and they check the hand-written `act` reply bytes equal msgpack's own encoding.
"""

from __future__ import annotations

import time
from typing import Any

import msgpack
import numpy as np
import pytest
from bridge_helpers import OBS_DIM, FirstValidPolicy

from bridge import protocol as P
from bridge.service import BridgeService, ServerConfig

N_ACTIONS = 29


class Recorder:
    """Stands in for a door: the service's `transmit`, recording every (peer, payload)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def __call__(self, peer: Any, payload: bytes) -> None:
        self.sent.append(payload)


def _server(fast: bool) -> BridgeService:
    recorder = Recorder()
    svc = BridgeService(ServerConfig(bind=None, policy="scripted"), FirstValidPolicy(), transmit=recorder)
    svc.sock = recorder  # type: ignore[attr-defined]
    if not fast:
        svc._parse_act_fast = lambda *_: None  # type: ignore[method-assign]
    return svc


def _roundtrip(srv: BridgeService, body: bytes) -> list[bytes]:
    srv.handle("peer", "peer", body, time.perf_counter_ns())
    if srv.batcher:
        srv.flush()
    assert len(srv.sock.sent) == 1
    return [srv.sock.sent.pop()]


def _array(a: np.ndarray, **override: Any) -> dict[str, Any]:
    return {**P.encode_array(a), **override}


OBS = np.linspace(-1, 1, 3 * OBS_DIM, dtype=np.float32).reshape(3, OBS_DIM)
MASK = np.ones((3, N_ACTIONS), bool)
MASK[1, :5] = False
BAD_MASK = MASK.copy()
BAD_MASK[2] = False
NAN_OBS = OBS.copy()
NAN_OBS[1, 7] = np.nan
INF_OBS = OBS.copy()
INF_OBS[0, 0] = -np.inf
BIG_OBS = np.full((3, OBS_DIM), 3e38, np.float32)  # finite, but its float32 sum overflows

MESSAGES: dict[str, dict[str, Any]] = {
    "plain": {"obs": _array(OBS)},
    "mask": {"obs": _array(OBS), "mask": _array(MASK)},
    "uint8 mask": {"obs": _array(OBS), "mask": _array(MASK.astype(np.uint8))},
    "uint8 mask of 2s": {"obs": _array(OBS), "mask": _array(MASK.astype(np.uint8) * 2)},
    "options": {"obs": _array(OBS), "mask": _array(MASK), "deterministic": True, "with_probs": False},
    "with probs": {"obs": _array(OBS), "with_probs": True},
    "null options": {"obs": _array(OBS), "mask": None, "deterministic": None, "with_probs": None},
    "big finite obs": {"obs": _array(BIG_OBS)},
    "row without action": {"obs": _array(OBS), "mask": _array(BAD_MASK)},
    "nan": {"obs": _array(NAN_OBS)},
    "inf": {"obs": _array(INF_OBS)},
    "extra field": {"obs": _array(OBS), "bogus": 1},
    "extra array key": {"obs": _array(OBS, extra=1)},
    "float64 obs": {"obs": _array(OBS.astype(np.float64))},
    "wrong width": {"obs": _array(OBS[:, :-1].copy())},
    "short data": {"obs": _array(OBS, data=OBS.tobytes()[:-4])},
    "bool row count": {"obs": _array(OBS[:1].copy(), shape=[True, OBS_DIM])},
    "zero rows": {"obs": _array(np.zeros((0, OBS_DIM), np.float32))},
    "1-d obs": {"obs": _array(OBS.ravel())},
    "obs not a map": {"obs": [1, 2, 3]},
    "mask rows differ": {"obs": _array(OBS), "mask": _array(MASK[:2].copy())},
    "mask bad dtype": {"obs": _array(OBS), "mask": _array(MASK.astype(np.int32))},
    "mask list dtype": {"obs": _array(OBS), "mask": _array(MASK, dtype=["bool"])},
    "mask bool width": {"obs": _array(OBS[:1].copy()), "mask": _array(MASK[:1].copy(), shape=[True, N_ACTIONS])},
    "deterministic not bool": {"obs": _array(OBS), "deterministic": 1},
    "with_probs not bool": {"obs": _array(OBS), "with_probs": "yes"},
    "missing obs": {},
}


def _body(fields: dict[str, Any], *, request_id: Any = 7, version: Any = P.PROTOCOL_VERSION) -> bytes:
    return msgpack.packb({"v": version, "id": request_id, "op": "act", **fields}, use_bin_type=True)


@pytest.mark.parametrize("name", list(MESSAGES))
def test_fast_path_replies_like_the_generic_path(name):
    fast, generic = _server(True), _server(False)
    body = _body(MESSAGES[name])
    assert _roundtrip(fast, body) == _roundtrip(generic, body)
    assert fast.requests == generic.requests
    assert fast.errors == generic.errors


@pytest.mark.parametrize("envelope", [
    {"request_id": "a-string-id"}, {"request_id": -(2**63)}, {"request_id": "x" * 129},
    {"request_id": None}, {"request_id": 1.5}, {"request_id": True},
    {"version": True}, {"version": 2}, {"version": "1"},
])
def test_fast_path_envelopes_like_the_generic_path(envelope):
    fast, generic = _server(True), _server(False)
    body = _body(MESSAGES["mask"], **envelope)
    assert _roundtrip(fast, body) == _roundtrip(generic, body)
    assert fast.errors == generic.errors


def test_fast_path_takes_the_usual_request():
    srv = _server(True)
    srv._op_act = None  # the generic handler must not be needed
    srv._handlers["act"] = None
    reply = P.unpack(_roundtrip(srv, _body(MESSAGES["mask"]))[-1])
    assert reply["ok"] and P.decode_array(reply["actions"], "actions").tolist() == [0, 5, 0]
    assert srv.requests == {"act": 1}


def test_fast_path_arrays_are_views_of_the_frame():
    srv = _server(True)
    srv.handle("peer", "peer", _body(MESSAGES["mask"]), time.perf_counter_ns())
    item = srv.batcher.items[0]
    assert not item.obs.flags.writeable and not item.obs.flags.owndata  # np.frombuffer, no copy
    assert not item.mask.flags.owndata
    srv.flush()


@pytest.mark.parametrize("request_id", [0, 1, -1, 2**40, -(2**63), "abc-1", "", "é" * 40])
@pytest.mark.parametrize("policy_name", ["first-valid", "scripted", "p" * 40])
@pytest.mark.parametrize("rows", [1, 16, 300])
def test_prebuilt_act_reply_is_the_generic_encoding(request_id, policy_name, rows):
    srv = _server(True)
    srv.policy.name = policy_name  # this instance's name (the class keeps its own)
    actions = np.arange(rows, dtype=np.int64) % N_ACTIONS
    expected = P.pack(P.ok_reply(request_id, actions=P.encode_array(actions.astype(np.int32)), policy=policy_name))
    assert P.ActReplyEncoder().encode(request_id, actions, policy_name) == expected
    assert srv._act_reply.encode(request_id, actions, policy_name) == expected  # its cache of tails too
