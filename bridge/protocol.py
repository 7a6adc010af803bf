"""The bridge's wire protocol: the single source of truth for versions, ops, fields, limits and error codes.

The server, the Python clients and the tests import this module; docs/protocol.md documents it and
tests/bridge/test_protocol_doc.py checks the two agree. Nothing here touches sockets: it is the
envelope, the schema, the array encoding and the (strict) validation of a decoded request.

Wire format (fixed): every body is one msgpack map.
  request  {"v": PROTOCOL_VERSION, "id": int|str, "op": str, ...fields}
  reply    {"v": PROTOCOL_VERSION, "id": <echoed>, "ok": true, ...result}
           {"v": PROTOCOL_VERSION, "id": <echoed or null>, "ok": false, "error": {"code": str, "message": str}}
  arrays   {"dtype": "float32"|..., "shape": [...], "data": <bin, little-endian, C order>}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import msgpack
import numpy as np

PROTOCOL_VERSION = 1  # the major version: "v" in every message; bumped on any incompatible change
PROTOCOL_MINOR = 3  # additive changes (new ops, new optional fields); reported by hello

# ---------------------------------------------------------------------------------------------- errors

ERROR_CODES: dict[str, str] = {
    "decode_error": "the body is not one msgpack value within the limits (the reply's id is null)",
    "too_large": "the frame is larger than limits.max_message_bytes (the reply's id is null)",
    "bad_envelope": "the ZeroMQ frames are not [routing..., empty delimiter, one body frame]",
    "bad_request": "the body is not a map, or a field is missing, unknown or of the wrong type or value",
    "unsupported_version": "'v' is not the server's protocol major version",
    "unknown_op": "'op' is not one of the ops",
    "invalid_array": "an array's dtype, shape or data length is wrong for its field",
    "not_found": "no such session (closed, expired, or never created)",
    "limit_exceeded": "a bound was hit: sessions, NPCs, actors, rows, queued events or a connection's unanswered "
                      "requests",
    "rate_limited": "the connection sends faster than the WebSocket door's per-connection rate; slow down",
    "invalid_world": "the world (TOML text or NPC list) does not validate; the message names the field",
    "forbidden": "the request is not allowed by the server's configuration",
    "reload_failed": "the new policy could not be loaded or failed its probe; the old one stays",
    "busy": "a one-at-a-time operation (a reload) is already running, or the server's queue is full; retry",
    "internal": "an unexpected server error; the request was not applied",
}


class ProtocolError(Exception):
    """A request that cannot be served; becomes an error reply with `code` and `message`."""

    def __init__(self, code: str, message: str, request_id: Any = None):
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


# ---------------------------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class Limits:
    """Bounds the server enforces (reported by hello). Sizes in bytes; counts are per request/session."""

    max_message_bytes: int = 8 * 1024 * 1024  # larger frames get a too_large reply without decoding
    hard_message_factor: int = 4  # ZMQ_MAXMSGSIZE = factor * max: a peer sending more is disconnected
    max_rows: int = 4096  # rows in one act request
    max_sessions: int = 256
    max_npcs: int = 64  # NPCs per session
    max_actors: int = 16  # non-NPC actors per session
    max_queued_events: int = 64  # session.event calls queued before the next session.step
    max_world_bytes: int = 256 * 1024  # the TOML text of session.create
    max_str_len: int = 256 * 1024  # any msgpack str
    max_container_len: int = 65536  # any msgpack array or map
    max_id_len: int = 128  # a string request id

    @property
    def hard_message_bytes(self) -> int:
        return self.max_message_bytes * self.hard_message_factor

    def as_dict(self) -> dict[str, int]:
        out = asdict(self)
        out["hard_message_bytes"] = self.hard_message_bytes
        return out


# ---------------------------------------------------------------------------------------------- schema

# Field types (the schema's little language, also used in docs/protocol.md):
#   int, float (int or float), bool, str, id (int or str), name (NPC/actor name str or entity index int),
#   position ([x, y] numbers), array (see ARRAY_DTYPES), map, list[str], list[map], list[name], any
FIELD_TYPES: tuple[str, ...] = ("int", "float", "bool", "str", "id", "name", "position", "array", "map",
                                "list[str]", "list[map]", "list[name]", "any")
ARRAY_DTYPES: tuple[str, ...] = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                 "uint64", "float16", "float32", "float64")
MAX_ARRAY_NDIM = 4


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    required: bool = False
    doc: str = ""
    dtypes: tuple[str, ...] = ()  # for arrays: accepted dtypes (empty: any of ARRAY_DTYPES)
    choices: tuple[str, ...] = ()  # for str: accepted values

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name!r}: unknown type {self.type!r}")


@dataclass(frozen=True)
class OpSpec:
    name: str
    doc: str
    request: tuple[FieldSpec, ...] = ()
    reply: tuple[FieldSpec, ...] = ()
    batched: bool = False  # goes through the dynamic batcher (one policy forward for many requests)
    fields: dict[str, FieldSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", {f.name: f for f in self.request})


def F(name: str, type_: str, required: bool = False, doc: str = "", **kw: Any) -> FieldSpec:  # noqa: N802
    return FieldSpec(name, type_, required, doc, **kw)


ENVELOPE_FIELDS: tuple[FieldSpec, ...] = (
    F("v", "int", True, "protocol major version (PROTOCOL_VERSION)"),
    F("id", "id", True, "request id, echoed in the reply (int64 or a string of at most limits.max_id_len)"),
    F("op", "str", True, "the operation"),
)
REPLY_ENVELOPE: tuple[FieldSpec, ...] = (
    F("v", "int", True, "the server's protocol major version"),
    F("id", "id", True, "the request's id (null when the request could not be decoded)"),
    F("ok", "bool", True, "true: the result fields follow; false: see error"),
    F("error", "map", False, "on failure only: {code: str, message: str}"),
)

EVENT_TYPES: tuple[str, ...] = ("death", "attack", "gift", "talk")
SESSION = F("session", "str", True, "session id from session.create")

OPS: dict[str, OpSpec] = {
    op.name: op
    for op in (
        OpSpec(
            "ping", "Liveness check; answers at once, with the server's clock.",
            request=(),
            reply=(F("time", "float", True, "server time, seconds since the Unix epoch"),),
        ),
        OpSpec(
            "hello", "Versions, the observation layout, action and reaction names, the limits.",
            request=(F("client", "str", False, "free-form client name and version, for the logs"),),
            reply=(
                F("protocol", "int", True, "protocol major version"),
                F("protocol_minor", "int", True, "protocol minor version"),
                F("package_version", "str", True, "version of the village-npc package"),
                F("policy", "str", True, "name of the policy being served"),
                F("slots", "int", True, "K, the number of observation slots"),
                F("obs_dim", "int", True, "observation width"),
                F("n_actions", "int", True, "number of flat actions"),
                F("observation_layout", "list[str]", True, "name of every observation feature, in order"),
                F("action_names", "list[str]", True, "name of every flat action ('mourn@slot2'), in order"),
                F("reaction_names", "list[str]", True, "reaction labels, index = label"),
                F("event_types", "list[str]", True, "types accepted by session.event"),
                F("ops", "list[str]", True, "the ops this server serves"),
                F("limits", "map", True, "the bounds in force (see Limits)"),
                F("temperature", "float", True, "the sampling temperature of requests that name none "
                  "(village serve --temperature; 1: as trained)"),
                F("personality_strength", "float", True, "the personality strength of requests that name none "
                  "(village serve --personality-strength; 1: as trained)"),
                F("personality_traits", "list[str]", True, "the traits every personality strength acts on "
                  "(village serve --personality-traits; all five by default)"),
            ),
        ),
        OpSpec(
            "act", "Stateless batched policy query: observations and masks in, actions out.",
            request=(
                F("obs", "array", True, "(R, obs_dim) observations", dtypes=("float32",)),
                F("mask", "array", False, "(R, n_actions) valid actions (default: all valid)",
                  dtypes=("bool", "uint8")),
                F("deterministic", "bool", False, "take the most likely action (default false)"),
                F("temperature", "float", False, "sample from softmax(logits / T), T from 0.01 to 100; lower "
                  "follows the policy's preferences more closely (default: the server's temperature)"),
                F("personality_strength", "float", False, "play each NPC's learned personality S times as "
                  "strongly, S from 0 to 10: its logits move S times as far from a neutral villager's (every trait "
                  "0.5) as the network puts them (default: the server's strength)"),
                F("with_probs", "bool", False, "also return the action probabilities (at that temperature) "
                  "(default false)"),
            ),
            reply=(
                F("actions", "array", True, "(R,) int32 flat action indices"),
                F("probs", "array", False, "(R, n_actions) float32, when with_probs"),
                F("policy", "str", True, "name of the policy that answered"),
            ),
            batched=True,
        ),
        OpSpec(
            "session.create", "Start running the NPC minds of an external world (give world or npcs).",
            request=(
                F("world", "str", False, "a world file's TOML text (docs/world-format.md)"),
                F("npcs", "list[map]", False, "instead of world: [{name, role?, traits?, health?, x?, y?}]"),
                F("relationships", "list[map]", False, "with npcs: [{a, b, kind, affinity}]"),
                F("actors", "list[map]", False, "with npcs: [{name, kind (player or raider), x, y, health?}]"),
                F("width", "float", False, "with npcs: map width (default: fits the positions)"),
                F("height", "float", False, "with npcs: map height (default: fits the positions)"),
                F("sight_radius", "float", False, "with npcs: how far NPCs see (default 10)"),
                F("seed", "int", False, "seed of the session's simulation (default 0)"),
                F("deterministic", "bool", False, "most likely actions instead of sampled (default false)"),
                F("temperature", "float", False, "its NPCs sample from softmax(logits / T), T from 0.01 to 100; "
                  "lower follows the policy's preferences more closely (default: the server's temperature; not "
                  "with deterministic)"),
                F("personality_strength", "float", False, "its NPCs play their learned personalities S times as "
                  "strongly, S from 0 to 10 (default: the server's strength)"),
            ),
            reply=(
                F("session", "str", True, "the session id"),
                F("npcs", "list[str]", True, "NPC names; entity index = position"),
                F("actors", "list[str]", True, "actor names; entity index = len(npcs) + position"),
                F("tick", "int", True, "the session's tick (0)"),
            ),
        ),
        OpSpec(
            "session.event", "Queue something that happened in the game; applied at the next session.step.",
            request=(
                SESSION,
                F("type", "str", True, "what happened", choices=EVENT_TYPES),
                F("actor", "name", False, "who did it (a death's killer; omit or null: unknown)"),
                F("target", "name", True, "to whom (a death's victim)"),
                F("position", "position", False, "where it happened (default: the target's position)"),
                F("witnesses", "list[name]", False,
                  "NPCs who saw it (default: those within sight, as in the engine)"),
            ),
            reply=(
                F("event", "int", True, "the event's number in this session (reactions' cause)"),
                F("queued", "int", True, "events waiting for the next session.step"),
            ),
        ),
        OpSpec(
            "session.step", "Advance the NPC minds one tick on the game's bodies; returns every NPC's choice.",
            request=(
                SESSION,
                F("pos", "array", False, "(E, 2) entity positions, NPCs then actors (default: the "
                  "simulation's own)", dtypes=("float32", "float64")),
                F("health", "array", False, "(E,) entity health", dtypes=("float32", "float64")),
                F("alive", "array", False, "(E,) alive flags; a newly dead NPC with no death event dies "
                  "of an unknown cause", dtypes=("bool", "uint8")),
                F("present", "array", False, "(M,) actors on the map", dtypes=("bool", "uint8")),
            ),
            reply=(
                F("tick", "int", True, "the session's tick after the step"),
                F("reactions", "list[map]", True,
                  "per NPC: {npc, action, target, reaction, intensity, cause, since, duration, dest, bark?}"),
                F("events", "list[map]", True, "engine events of this tick: {event, type, actor, target}"),
            ),
            batched=True,
        ),
        OpSpec(
            "session.state", "The minds of a session: needs, emotions, knowledge, activity.",
            request=(SESSION, F("npc", "name", False, "only this NPC (default: all)")),
            reply=(
                F("tick", "int", True, "the session's tick"),
                F("npcs", "list[map]", True, "per NPC: body, needs, emotions, knowledge, activity"),
            ),
        ),
        OpSpec(
            "session.close", "Forget a session (and its saved state).",
            request=(SESSION,),
            reply=(F("closed", "bool", True, "true"),),
        ),
        OpSpec(
            "reload", "Hot-swap the policy; requests in flight are served by the old one, none is dropped.",
            request=(F("policy", "str", False, "scripted, random, default or a checkpoint path under the "
                       "server's policy root (default: the policy the server was started with)"),),
            reply=(
                F("policy", "str", True, "name of the policy now served"),
                F("load_ms", "float", True, "time to load and probe it"),
            ),
        ),
        OpSpec(
            "stats", "Counters and latency percentiles since start.",
            request=(),
            reply=(
                F("uptime_s", "float", True, "seconds since start"),
                F("policy", "str", True, "name of the policy being served"),
                F("requests", "map", True, "op -> count"),
                F("errors", "map", True, "error code -> count"),
                F("latency_us", "map", True, "op -> {n, p50, p90, p99, max} (receive to reply, microseconds)"),
                F("batches", "map", True, "{count, rows_mean, requests_mean, max_rows}"),
                F("sessions", "int", True, "open sessions"),
                F("reloads", "int", True, "successful reloads"),
                F("gc", "map", True, "{frozen, gen0, gen1, gen2}: objects frozen at start-up; per generation "
                  "{collections, total_ms, max_us} of the garbage collector's pauses while serving"),
                F("doors", "map", False, "with a WebSocket door: {ws: {open, connections, refused_token, "
                  "refused_origin, refused_full, rate_limited, inflight_limited, text_frames, binary_frames}}"),
            ),
        ),
    )
}


# ---------------------------------------------------------------------------------------------- msgpack


def pack(message: Mapping[str, Any]) -> bytes:
    """Encode one message (bin for bytes, str for text)."""
    return msgpack.packb(message, use_bin_type=True)


def unpack(frame: bytes, limits: Limits = Limits()) -> Any:  # noqa: B008 - Limits is frozen
    """Decode one frame with size limits; any failure raises ProtocolError("decode_error")."""
    if len(frame) > limits.max_message_bytes:
        raise ProtocolError("too_large", f"frame of {len(frame)} bytes exceeds max_message_bytes "
                            f"{limits.max_message_bytes}")
    try:
        return msgpack.unpackb(
            frame, raw=False, use_list=True, strict_map_key=True,
            max_str_len=limits.max_str_len, max_bin_len=limits.max_message_bytes,
            max_array_len=limits.max_container_len, max_map_len=limits.max_container_len, max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises many types (ValueError, StackError, UnicodeDecodeError, ...)
        raise ProtocolError("decode_error", f"not one msgpack value within the limits: "
                            f"{type(exc).__name__}: {str(exc)[:200]}") from None


def request(op: str, request_id: int | str, **fields: Any) -> dict[str, Any]:
    """A request map (numpy arrays in `fields` are encoded)."""
    msg: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": request_id, "op": op}
    for key, value in fields.items():
        if value is not None:
            msg[key] = encode_array(value) if isinstance(value, np.ndarray) else value
    return msg


def ok_reply(request_id: Any, **result: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": request_id, "ok": True, **result}


def error_reply(request_id: Any, code: str, message: str) -> dict[str, Any]:
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r}")
    return {"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "error": {"code": code, "message": message}}


# ---------------------------------------------------------------------------------------------- arrays


_LITTLE: dict[str, np.dtype] = {name: np.dtype(name).newbyteorder("<") for name in ARRAY_DTYPES}
_NAME_OF: dict[np.dtype, str] = {np.dtype(name): name for name in ARRAY_DTYPES}
_NATIVE_LITTLE = np.little_endian


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """{"dtype", "shape", "data"}: little-endian, C order."""
    array = np.asarray(array)
    dtype = array.dtype
    name = _NAME_OF.get(dtype) or _NAME_OF.get(dtype.newbyteorder("="))
    if name is None:
        raise ValueError(f"dtype {dtype} cannot travel; use one of {', '.join(ARRAY_DTYPES)}")
    if not (dtype.byteorder == "<" or dtype.byteorder == "|" or (dtype.byteorder == "=" and _NATIVE_LITTLE)):
        array = array.astype(_LITTLE[name])
    return {"dtype": name, "shape": list(array.shape), "data": array.tobytes()}


def decode_array(value: Any, where: str, dtypes: tuple[str, ...] = (), max_elements: int | None = None
                 ) -> np.ndarray:
    """An array map -> a read-only numpy view of its data; raises ProtocolError("invalid_array")."""
    if type(value) is not dict:
        raise ProtocolError("invalid_array", f"{where}: expected an array map {{dtype, shape, data}}, got "
                            f"{describe(value)}")
    if len(value) != 3 or "dtype" not in value or "shape" not in value or "data" not in value:
        extra = sorted(set(value) - {"dtype", "shape", "data"})
        raise ProtocolError("invalid_array", f"{where}: expected exactly the keys dtype, shape, data"
                            + (f"; unknown keys {extra}" if extra else ""))
    dtype, shape, data = value["dtype"], value["shape"], value["data"]
    accepted = dtypes or ARRAY_DTYPES
    if type(dtype) is not str or dtype not in accepted:
        raise ProtocolError("invalid_array", f"{where}.dtype: expected one of {', '.join(accepted)}, got "
                            f"{describe(dtype)}")
    count = 1
    if type(shape) is not list or len(shape) > MAX_ARRAY_NDIM or not all(
            type(n) is int and 0 <= n < 2**31 for n in shape):
        raise ProtocolError("invalid_array", f"{where}.shape: expected a list of at most {MAX_ARRAY_NDIM} "
                            f"non-negative integers, got {describe(shape)}")
    for n in shape:
        count *= n
    if type(data) is not bytes:
        raise ProtocolError("invalid_array", f"{where}.data: expected bin (bytes), got {describe(data)}")
    if max_elements is not None and count > max_elements:
        raise ProtocolError("limit_exceeded", f"{where}: {count} elements exceed the limit of {max_elements}")
    np_dtype = _LITTLE[dtype]
    if count * np_dtype.itemsize != len(data):
        raise ProtocolError("invalid_array", f"{where}.data: shape {shape} of {dtype} needs "
                            f"{count * np_dtype.itemsize} bytes, got {len(data)}")
    return np.frombuffer(data, dtype=np_dtype).reshape(shape)


# ---------------------------------------------------------------------------------------------- validation


def describe(value: Any) -> str:
    """How a received value reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**12 else "a large integer"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, bytes):
        return f"bin of {len(value)} bytes"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def valid_id(value: Any, limits: Limits = Limits()) -> bool:  # noqa: B008 - Limits is frozen
    if _is_int(value):
        return -(2**63) <= value < 2**63
    return isinstance(value, str) and len(value) <= limits.max_id_len


def check_field(spec: FieldSpec, value: Any, where: str) -> Any:
    """Check one decoded field against its spec; returns it (arrays are decoded later, by the op)."""
    t = spec.type
    ok = True
    if t == "int":
        ok = _is_int(value) and -(2**63) <= value < 2**63
    elif t == "float":
        ok = (_is_int(value) and abs(value) < 2**53) or (isinstance(value, float) and math.isfinite(value))
    elif t == "bool":
        ok = isinstance(value, bool)
    elif t == "str":
        ok = isinstance(value, str)
        if ok and spec.choices and value not in spec.choices:
            raise ProtocolError("bad_request", f"{where}: expected one of {', '.join(spec.choices)}, got "
                                f"{describe(value)}")
    elif t == "id":
        ok = valid_id(value)
    elif t == "name":
        ok = isinstance(value, str) or (_is_int(value) and 0 <= value < 2**31)
    elif t == "position":
        ok = (isinstance(value, list) and len(value) == 2
              and all(check_number(v) for v in value))
    elif t in ("array", "map"):
        ok = isinstance(value, dict)
    elif t == "list[str]":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif t == "list[map]":
        ok = isinstance(value, list) and all(isinstance(v, dict) for v in value)
    elif t == "list[name]":
        ok = isinstance(value, list) and all(
            isinstance(v, str) or (_is_int(v) and 0 <= v < 2**31) for v in value)
    if not ok:
        raise ProtocolError("bad_request", f"{where}: expected {TYPE_TEXT[t]}, got {describe(value)}")
    return value


def check_number(value: Any) -> bool:
    return (_is_int(value) and abs(value) < 2**53) or (isinstance(value, float) and math.isfinite(value))


TYPE_TEXT: dict[str, str] = {
    "int": "an integer", "float": "a finite number", "bool": "a boolean", "str": "a string",
    "id": "an integer or a short string", "name": "a name (string) or an entity index (integer >= 0)",
    "position": "[x, y] finite numbers", "array": "an array map {dtype, shape, data}", "map": "a map",
    "list[str]": "an array of strings", "list[map]": "an array of maps",
    "list[name]": "an array of names or entity indices", "any": "a value",
}


@dataclass
class Request:
    """A validated request: envelope plus the op's fields (arrays still encoded)."""

    id: int | str
    op: str
    fields: dict[str, Any]

    @property
    def spec(self) -> OpSpec:
        return OPS[self.op]


def validate_request(message: Any, limits: Limits = Limits()) -> Request:  # noqa: B008 - Limits is frozen
    """Envelope and schema checks of a decoded body. Raises ProtocolError (with the id when it is valid)."""
    if not isinstance(message, dict):
        raise ProtocolError("bad_request", f"expected the body to be a msgpack map, got {describe(message)}")
    raw_id = message.get("id")
    request_id = raw_id if valid_id(raw_id, limits) else None
    if "id" not in message:
        raise ProtocolError("bad_request", "id: missing required field; expected an integer or a short string")
    if request_id is None:
        raise ProtocolError("bad_request", f"id: expected an integer (int64) or a string of at most "
                            f"{limits.max_id_len} characters, got {describe(raw_id)}")
    version = message.get("v")
    if not _is_int(version):
        raise ProtocolError("bad_request", f"v: expected the protocol version, an integer ({PROTOCOL_VERSION}), "
                            f"got {describe(version)}", request_id)
    if version != PROTOCOL_VERSION:
        raise ProtocolError("unsupported_version", f"v: this server speaks protocol {PROTOCOL_VERSION}, got "
                            f"{version}", request_id)
    op = message.get("op")
    if not isinstance(op, str):
        raise ProtocolError("bad_request", f"op: expected a string, got {describe(op)}", request_id)
    spec = OPS.get(op)
    if spec is None:
        raise ProtocolError("unknown_op", f"op: {describe(op)} is not one of {', '.join(OPS)}", request_id)
    fields: dict[str, Any] = {}
    for key, value in message.items():
        if key in ("v", "id", "op"):
            continue
        fs = spec.fields.get(key)
        if fs is None:
            allowed = ", ".join(spec.fields) or "none"
            raise ProtocolError("bad_request", f"{key}: unknown field for op {op!r}; allowed fields: {allowed}",
                                request_id)
        if value is None and not fs.required:
            continue  # an explicit null is the same as leaving an optional field out
        try:
            fields[key] = check_field(fs, value, key)
        except ProtocolError as exc:
            exc.request_id = request_id
            raise
    for fs in spec.request:
        if fs.required and fs.name not in fields:
            raise ProtocolError("bad_request", f"{fs.name}: missing required field for op {op!r}; expected "
                                f"{TYPE_TEXT[fs.type]}", request_id)
    return Request(request_id, op, fields)


# ---------------------------------------------------------------------------------------------- the act fast path

_F32 = np.dtype("<f4")
_I32 = np.dtype("<i4")
_MASK_DTYPES = {"bool": np.dtype(bool), "uint8": np.dtype("u1")}
_ACT_KEYS = frozenset(("v", "id", "op", "obs", "mask", "deterministic", "with_probs"))
_isfinite, _all_true = np.isfinite, np.logical_and.reduce


@dataclass(slots=True)
class ActQuery:
    """A checked `act` request, its arrays read-only views of the received bytes."""

    id: int | str
    obs: np.ndarray
    mask: np.ndarray
    deterministic: bool
    with_probs: bool


def parse_act_fast(m: dict[str, Any], limits: Limits, obs_dim: int, n_actions: int, all_valid: np.ndarray
                   ) -> ActQuery | None:
    """The usual well-formed `act`, checked and decoded inline; None at the first thing it does not expect.

    The same checks as validate_request + the service's generic act handler, without the schema walk. A None
    means only "take the generic path": that path validates the same message again and names the error, so
    replies, error codes and counters are exactly the generic path's (tests/bridge/test_fast_path.py).
    `all_valid` is a read-only (max_rows, n_actions) array of True: the mask when none is sent."""
    v, rid = m.get("v"), m.get("id")
    if type(v) is not int or v != PROTOCOL_VERSION or not m.keys() <= _ACT_KEYS:
        return None
    if type(rid) is str:
        if len(rid) > limits.max_id_len:
            return None
    elif type(rid) is not int or not -(2**63) <= rid < 2**63:
        return None
    det, with_probs = m.get("deterministic"), m.get("with_probs")
    if det is None:
        det = False
    elif type(det) is not bool:
        return None
    if with_probs is None:
        with_probs = False
    elif type(with_probs) is not bool:
        return None
    a = m.get("obs")
    if type(a) is not dict or len(a) != 3 or a.get("dtype") != "float32":
        return None
    shape, data = a.get("shape"), a.get("data")
    if type(shape) is not list or len(shape) != 2 or type(data) is not bytes:
        return None
    rows, dim = shape
    if (type(rows) is not int or type(dim) is not int or dim != obs_dim
            or not 0 < rows <= limits.max_rows or len(data) != rows * dim * 4):
        return None
    obs = np.frombuffer(data, _F32).reshape(rows, dim)
    if not _all_true(_isfinite(obs), None):  # NaN or infinity: the generic path names it
        return None
    a = m.get("mask")
    if a is None:
        mask = all_valid[:rows]
    else:
        if type(a) is not dict or len(a) != 3:
            return None
        dtype, shape, data = a.get("dtype"), a.get("shape"), a.get("data")
        if dtype != "bool" and dtype != "uint8":
            return None
        if type(shape) is not list or len(shape) != 2 or type(data) is not bytes or len(data) != rows * n_actions:
            return None
        r, n = shape
        if type(r) is not int or type(n) is not int or r != rows or n != n_actions:
            return None
        mask = np.frombuffer(data, _MASK_DTYPES[dtype]).reshape(rows, n)
        if dtype == "uint8":
            mask = mask.astype(bool)
        if b"\x00" in data and not mask.any(1).all():  # no zero byte: every action of every row is allowed
            return None
    return ActQuery(rid, obs, mask, det, with_probs)


class ActReplyEncoder:
    """pack(ok_reply(id, actions=encode_array(actions as int32), policy=name)), byte for byte, from pre-encoded
    parts: only the id, the row count and the data are encoded per reply (a test checks it equals msgpack's
    own encoding). Not thread-safe: one per serving loop."""

    def __init__(self) -> None:
        pk = msgpack.Packer(use_bin_type=True).pack
        self._pack = pk
        # {"v", "id", "ok": true, "actions": {"dtype", "shape": [R], "data"}, "policy"}: a 5-map, a 3-map, a 1-array
        self._head = b"\x85" + pk("v") + pk(PROTOCOL_VERSION) + pk("id")
        self._mid = (pk("ok") + pk(True) + pk("actions") + b"\x83" + pk("dtype") + pk("int32") + pk("shape")
                     + b"\x91")
        self._data_key = pk("data")
        self._tails: dict[str, bytes] = {}  # policy name -> its encoded end

    def encode(self, request_id: Any, actions: np.ndarray, policy: str) -> bytes:
        tail = self._tails.get(policy)
        pk = self._pack
        if tail is None:
            if len(self._tails) > 16:  # reloads: keep it bounded
                self._tails.clear()
            tail = self._tails[policy] = pk("policy") + pk(policy)
        a = actions.astype(_I32, copy=False)
        return b"".join((self._head, pk(request_id), self._mid, pk(a.shape[0]), self._data_key, pk(a.tobytes()),
                         tail))


def wants_ipv6(endpoint: str) -> bool:
    """Whether a ZeroMQ endpoint names an IPv6 address (tcp://[::1]:5555): ZeroMQ sockets then need the IPV6
    option, without which binding or connecting fails with "No such device"."""
    return endpoint.startswith(("tcp://[", "ws://[", "wss://["))
