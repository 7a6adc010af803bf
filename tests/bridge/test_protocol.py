"""bridge/protocol.py on its own: arrays, decoding limits, schema validation."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bridge import protocol as P


@given(hnp.arrays(st.sampled_from([np.dtype(d) for d in P.ARRAY_DTYPES]),
                  hnp.array_shapes(min_dims=0, max_dims=P.MAX_ARRAY_NDIM, max_side=5)))
def test_array_round_trip(array):
    wire = msgpack.unpackb(msgpack.packb(P.encode_array(array), use_bin_type=True), raw=False)
    back = P.decode_array(wire, "x")
    assert back.dtype == array.dtype.newbyteorder("<") and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


def test_arrays_are_little_endian_even_from_big_endian_input():
    big = np.arange(3, dtype=">i4")
    wire = P.encode_array(big)
    assert wire["data"] == np.arange(3, dtype="<i4").tobytes()
    assert wire["dtype"] == "int32"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1, 2], "expected an array map"),
        ({"dtype": "float32", "shape": [2], "data": b"\0" * 8, "x": 1}, "unknown keys"),
        ({"dtype": "complex64", "shape": [1], "data": b"\0" * 8}, "x.dtype"),
        ({"dtype": "float32", "shape": [-1], "data": b""}, "x.shape"),
        ({"dtype": "float32", "shape": [1, 1, 1, 1, 1], "data": b"\0" * 4}, "x.shape"),
        ({"dtype": "float32", "shape": [2], "data": "text"}, "x.data: expected bin"),
        ({"dtype": "float32", "shape": [2], "data": b"\0" * 7}, "needs 8 bytes"),
    ],
)
def test_decode_array_errors(value, message):
    with pytest.raises(P.ProtocolError) as err:
        P.decode_array(value, "x")
    assert err.value.code == "invalid_array" and message in err.value.message


def test_decode_array_element_limit():
    with pytest.raises(P.ProtocolError) as err:
        P.decode_array(P.encode_array(np.zeros(10, np.float32)), "x", max_elements=5)
    assert err.value.code == "limit_exceeded"


def test_unpack_limits():
    limits = P.Limits(max_message_bytes=100, max_str_len=10, max_container_len=3)
    with pytest.raises(P.ProtocolError) as err:
        P.unpack(b"\0" * 101, limits)
    assert err.value.code == "too_large"
    for body in (msgpack.packb("x" * 11), msgpack.packb([1, 2, 3, 4]), msgpack.packb({1: 2}),
                 msgpack.packb(msgpack.ExtType(1, b"x")), b"\x92\x01", msgpack.packb(1) + b"\x01"):
        with pytest.raises(P.ProtocolError) as err:
            P.unpack(body, limits)
        assert err.value.code == "decode_error"


def test_validate_request_accepts_a_good_one_and_drops_nulls():
    req = P.validate_request({"v": 1, "id": "a", "op": "act", "obs": {"dtype": "float32", "shape": [0, 1],
                                                                     "data": b""}, "mask": None})
    assert req.id == "a" and req.op == "act" and set(req.fields) == {"obs"} and req.spec.batched


@pytest.mark.parametrize(
    ("message", "code", "rid"),
    [
        ("ping", "bad_request", None),
        ({"v": 1, "id": True, "op": "ping"}, "bad_request", None),
        ({"v": 2, "id": 1, "op": "ping"}, "unsupported_version", 1),
        ({"v": 1, "id": 1, "op": "act"}, "bad_request", 1),
        ({"v": 1, "id": 1, "op": "session.event", "session": "s", "type": "boom", "target": "a"}, "bad_request", 1),
        ({"v": 1, "id": 1, "op": "session.event", "session": "s", "type": "death", "target": -1}, "bad_request", 1),
        ({"v": 1, "id": 1, "op": "session.event", "session": "s", "type": "death", "target": "a",
          "position": [1.0, float("nan")]}, "bad_request", 1),
        ({"v": 1, "id": 1, "op": "hello", "client": 5}, "bad_request", 1),
    ],
)
def test_validate_request_errors(message, code, rid):
    with pytest.raises(P.ProtocolError) as err:
        P.validate_request(message)
    assert err.value.code == code and err.value.request_id == rid


def test_error_reply_needs_a_known_code():
    assert P.error_reply(None, "internal", "x")["error"] == {"code": "internal", "message": "x"}
    with pytest.raises(ValueError):
        P.error_reply(1, "oops", "x")
