"""Malformed, mutated, oversized and mis-enveloped frames all get an error reply; the server keeps serving."""

from __future__ import annotations

import os

import msgpack
import numpy as np
import pytest
import zmq
from bridge_helpers import OBS_DIM, decode_reply, make_server, raw_roundtrip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge import protocol as P
from bridge.client import BridgeClient

FRAMES_PER_EXAMPLE = 10
FUZZ_FRAMES = int(os.environ.get("BRIDGE_FUZZ_FRAMES", "10000"))


def test_undecodable_body_gets_decode_error_with_null_id(server):
    reply = decode_reply(raw_roundtrip(server.endpoint, [b"", b"\xc1 not msgpack"]))
    assert reply["ok"] is False and reply["id"] is None and reply["error"]["code"] == "decode_error"


def test_non_map_body_gets_bad_request_with_null_id(server):
    reply = decode_reply(raw_roundtrip(server.endpoint, [b"", msgpack.packb([1, 2, 3])]))
    assert reply["id"] is None and reply["error"]["code"] == "bad_request"


def test_envelope_errors(server):
    # a DEALER that forgot the empty delimiter still hears why
    reply = decode_reply(raw_roundtrip(server.endpoint, [P.pack(P.request("ping", 1))]))
    assert reply["error"]["code"] == "bad_envelope"
    reply = decode_reply(raw_roundtrip(server.endpoint, [b"", P.pack(P.request("ping", 1)), b"extra"]))
    assert reply["error"]["code"] == "bad_envelope"


@pytest.mark.parametrize(
    ("message", "code", "rid"),
    [
        ({"v": 1, "op": "ping"}, "bad_request", None),
        ({"v": 1, "id": [1], "op": "ping"}, "bad_request", None),
        ({"v": 1, "id": "x" * 200, "op": "ping"}, "bad_request", None),
        ({"v": 99, "id": 5, "op": "ping"}, "unsupported_version", 5),
        ({"v": "1", "id": 5, "op": "ping"}, "bad_request", 5),
        ({"v": 1, "id": 5, "op": "fly"}, "unknown_op", 5),
        ({"v": 1, "id": 5, "op": 7}, "bad_request", 5),
        ({"v": 1, "id": "a", "op": "ping", "extra": True}, "bad_request", "a"),
        ({"v": 1, "id": 2**64 - 1, "op": "ping"}, "bad_request", None),
    ],
)
def test_envelope_validation(server, message, code, rid):
    body = msgpack.packb(message, use_bin_type=True)
    reply = decode_reply(raw_roundtrip(server.endpoint, [b"", body]))
    assert reply["error"]["code"] == code and reply["id"] == rid


def test_oversized_frames():
    limits = P.Limits(max_message_bytes=64 * 1024, hard_message_factor=4)
    srv = make_server(limits=limits)
    srv.run_in_thread()
    try:
        # above the soft limit: answered with too_large, never decoded
        reply = decode_reply(raw_roundtrip(srv.endpoint, [b"", b"\x00" * (64 * 1024 + 1)]))
        assert reply["error"]["code"] == "too_large" and reply["id"] is None
        # above ZMQ_MAXMSGSIZE: libzmq drops that peer without a reply; nobody else notices
        assert raw_roundtrip(srv.endpoint, [b"", b"\x00" * (300 * 1024)], timeout_ms=1500) is None
        with BridgeClient(srv.endpoint, timeout=5.0) as c:
            assert c.ping() > 0
        assert srv._thread is not None and srv._thread.is_alive()
    finally:
        srv.stop()


def test_deeply_nested_body_is_a_decode_error(server):
    body = b"\x91" * 100_000 + b"\xc0"
    reply = decode_reply(raw_roundtrip(server.endpoint, [b"", body]))
    assert reply["error"]["code"] == "decode_error"


# ---------------------------------------------------------------------------------------------- fuzz

VALID = [
    P.pack(P.request("ping", 1)),
    P.pack(P.request("hello", "h", client="fuzz")),
    P.pack(P.request("act", 3, obs=np.zeros((2, OBS_DIM), np.float32), mask=np.ones((2, 29), bool))),
    P.pack(P.request("session.step", 4, session="0123456789abcdef")),
    P.pack(P.request("session.event", 5, session="x", type="death", target="Alda", position=[1.0, 2.0])),
    P.pack(P.request("stats", 6)),
]

msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=20)
    | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)
ops = st.sampled_from([*P.OPS, "", "nope"])


@st.composite
def envelopes(draw) -> bytes:
    """A well-formed envelope around random fields: the schema validation's turn."""
    message = {"v": draw(st.sampled_from([1, 1, 1, 0, 2])), "id": draw(st.integers(0, 2**40) | st.text(max_size=8)),
               "op": draw(ops)}
    message.update(draw(st.dictionaries(st.sampled_from(["obs", "mask", "session", "type", "target", "world",
                                                         "npcs", "policy", "pos", "x"]), msgpack_values, max_size=4)))
    return msgpack.packb(message, use_bin_type=True)


@st.composite
def mutated(draw) -> bytes:
    """A valid request with bytes flipped, cut, inserted or deleted."""
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            data = data[:at]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[at]
    return bytes(data)


frames = st.one_of(
    st.binary(max_size=200),
    mutated(),
    envelopes(),
    msgpack_values.map(lambda v: msgpack.packb(v, use_bin_type=True)),
)


def test_fuzz_random_and_mutated_frames(server):
    """FUZZ_FRAMES frames (default 10,000), each answered by exactly one reply; then a valid request works."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    sent = {"frames": 0}

    @settings(max_examples=max(1, FUZZ_FRAMES // FRAMES_PER_EXAMPLE), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(frames, min_size=FRAMES_PER_EXAMPLE, max_size=FRAMES_PER_EXAMPLE))
    def run(batch: list[bytes]) -> None:
        for body in batch:
            sock.send_multipart([b"", body])
        for _ in batch:
            assert sock.poll(10_000, zmq.POLLIN), "the server stopped answering"
            reply = decode_reply(sock.recv_multipart())
            assert isinstance(reply["ok"], bool)
            if not reply["ok"]:
                assert reply["error"]["code"] in P.ERROR_CODES
        sent["frames"] += len(batch)

    try:
        run()
    finally:
        sock.close(0)
    assert sent["frames"] >= FUZZ_FRAMES
    assert server._thread is not None and server._thread.is_alive()
    with BridgeClient(server.endpoint, timeout=5.0) as c:
        assert c.hello()["protocol"] == P.PROTOCOL_VERSION
        actions, _ = c.act(np.zeros((4, OBS_DIM), np.float32))
        assert actions.shape == (4,)
