"""The bridge service: every op of bridge/protocol.py, with no transport in sight.

A door (ZeroMQ in bridge/server.py, WebSocket in bridge/ws.py) hands `handle()` one received body with an
opaque `peer` (where the reply goes) and a hashable `client` (who sent it: for batching, and the scope of
the retried-create cache, so that one client's create is never answered with another's session); the service
decodes, validates, runs the op and gives the encoded reply to `transmit(peer, payload)`, a callable the
door provides. `act` and `session.step` wait in one Batcher to share a policy forward; the door's loop calls
`flush()` when `should_flush()` says so. One thread calls all of this (no locks on the hot path).

Reloads load and probe the new policy in a helper thread; `poll_reload()` swaps it in between two batches,
so no request is dropped or sees a half-loaded policy.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bridge import protocol as P
from bridge.batcher import Batcher, Item
from bridge.policies import BASELINE_NAMES, POLICY_NAMES, PolicyLoadError, layout, load_policy, policy_tuning, probe
from bridge.sessions import Session, SessionStore
from engine.constants import REACTION_NAMES
from npc_brains.personality import TRAIT_COLUMNS, PersonalityStrength, check_personality, guidable
from npc_brains.policy_api import Policy
from npc_brains.runtime import check_temperature, set_temperature
from worlds import WorldError

log = logging.getLogger("bridge.server")

CREATE_REPLAY = 64


class ConfigError(Exception):
    """The server cannot start with this configuration (a one-line reason)."""


class BackendLoadError(PolicyLoadError):
    """The policy loaded, but the configured backend cannot run it (an ONNX export that failed)."""


@dataclass(frozen=True)
class ServerConfig:
    bind: str | None = "tcp://127.0.0.1:5555"  # the ZeroMQ door; None: no ZeroMQ door
    policy: str = "default"  # what `reload` without a policy field loads again
    slots: int = 4
    seed: int = 0
    state_dir: Path | None = None
    batch_delay_us: int = 1000  # the longest a request waits for others to share its forward
    max_batch_rows: int = 4096
    session_ttl_s: float = 900.0
    limits: P.Limits = field(default_factory=P.Limits)
    curve_secret: Path | None = None  # the server's NAME.key_secret: turns CurveZMQ on
    curve_allow: Path | None = None  # directory of the allowed clients' public .key files
    insecure: bool = False  # allow a non-loopback bind without CurveZMQ (or a WebSocket bind without a token)
    policy_root: Path | None = None  # reload may load checkpoints under this directory only
    blas_threads: int | None = 1  # numpy's OpenBLAS threads while serving (bridge/blas.py); None: leave as is
    gc_freeze: bool = True  # move the start-up objects out of the collector's sight before serving
    spin_us: int = 0  # after a request, poll this long for the next before sleeping in recv (0 = never)
    ws_bind: str | None = None  # HOST:PORT of the WebSocket door; None: no WebSocket door
    ws_token: str | None = None  # the bearer token WebSocket clients must present (required off loopback)
    ws_origins: tuple[str, ...] | None = None  # browser Origin allow-list; None: any (non-browser clients send none)
    ws_rate: float = 2000.0  # requests per second per connection (a token bucket), 0: unlimited
    ws_burst: int = 200  # the bucket's size
    ws_inflight: int = 64  # unanswered requests per connection
    ws_max_connections: int = 256
    backend: str = "numpy"  # how the policy's forward runs: numpy/torch as loaded, or onnx (onnxruntime)
    temperature: float = 1.0  # sampling temperature of requests and sessions that name none (1: as trained)
    personality_strength: float = 1.0  # personality strength of requests and sessions that name none (1: trained)
    personality_traits: tuple[str, ...] | None = None  # the traits every strength acts on; None: all five


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("village-npc")
    except Exception:  # not installed (running from a checkout)
        return "0+unknown"


class LatencyLog:
    """Per-op latencies (microseconds), the most recent `size` of each."""

    def __init__(self, size: int = 20000):
        self.size = size
        self.by_op: dict[str, deque[float]] = {}

    def add(self, op: str, micros: float) -> None:
        q = self.by_op.get(op)
        if q is None:
            q = self.by_op[op] = deque(maxlen=self.size)
        q.append(micros)

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for op, q in self.by_op.items():
            a = np.fromiter(q, np.float64, len(q))
            p50, p90, p99 = np.percentile(a, [50, 90, 99])
            out[op] = {"n": len(a), "p50": round(float(p50), 1), "p90": round(float(p90), 1),
                       "p99": round(float(p99), 1), "max": round(float(a.max()), 1)}
        return out


class GcPauses:
    """The cyclic garbage collector's pauses in the serving process, per generation (for `stats`).

    A full collection walks every tracked object; with torch and the policy loaded that is some 200,000
    objects and tens of milliseconds, far beyond a 1 ms latency budget. `gc.freeze()` at start-up moves them
    to a permanent generation the collector never walks again, so the pauses left are those of the young
    objects the requests themselves create."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.total_us = [0.0, 0.0, 0.0]
        self.max_us = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        g = min(int(info.get("generation", 0)), 2)
        us = (time.perf_counter() - self._t0) * 1e6
        self.count[g] += 1
        self.total_us[g] += us
        self.max_us[g] = max(self.max_us[g], us)

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def remove(self) -> None:
        while self in gc.callbacks:
            gc.callbacks.remove(self)

    def summary(self) -> dict[str, Any]:
        return {"frozen": gc.get_freeze_count(),
                **{f"gen{g}": {"collections": self.count[g], "total_ms": round(self.total_us[g] / 1e3, 3),
                               "max_us": round(self.max_us[g], 1)} for g in range(3)}}


def _no_transport(peer: Any, payload: bytes) -> None:
    raise RuntimeError("BridgeService.transmit was not set: a door must say where replies go")


class BridgeService:
    """The ops, the sessions, the batcher and the policy. `transmit(peer, payload)` is the door's."""

    def __init__(self, config: ServerConfig, policy: Policy | None = None, *,
                 loader: Callable[[str], Policy] | None = None,
                 transmit: Callable[[Any, bytes], None] = _no_transport):
        self.config = config
        self.limits = config.limits
        self.transmit = transmit
        self.describe_peer: Callable[[Any], str | None] = lambda peer: None  # for the logs; the door's
        self.loader = loader or self._load
        self.obs_names, self.action_names = layout(config.slots)
        self.obs_dim, self.n_actions = len(self.obs_names), len(self.action_names)
        if policy is None:
            try:
                policy = self.loader(config.policy)
                probe(policy, config.slots)
            except BackendLoadError as exc:  # names --backend itself
                raise ConfigError(str(exc)) from None
            except PolicyLoadError as exc:
                raise ConfigError(f"--policy: {exc}") from None
        try:
            self._temper(policy)
            policy = self._personalise(policy)
        except PolicyLoadError as exc:
            raise ConfigError(str(exc)) from None
        self.policy: Policy = policy
        self.store = SessionStore(self.limits, config.slots, config.session_ttl_s, config.state_dir)
        self.store.tuning = policy_tuning(policy)  # its sessions' minds run in the world it learned
        self.policy_root = Path(config.policy_root or Path.cwd()).resolve()
        self.batcher = Batcher(config.batch_delay_us / 1e6, config.max_batch_rows)
        self.gc_pauses = GcPauses()
        self._reload: dict[str, Any] | None = None  # the reload in progress
        # the last creates' replies, per client: a retried create gets its session again, while another client
        # that happens to send the same id and body (ids counted from 1, a restarted game) gets one of its own
        self._create_replies: OrderedDict[tuple[Any, str], bytes] = OrderedDict()
        self._act_reply = P.ActReplyEncoder()
        self._parse_act_fast = P.parse_act_fast  # an attribute, so a test can compare with the generic path
        self._all_valid = np.ones((self.limits.max_rows, self.n_actions), bool)  # act's mask when none is sent
        self._all_valid.flags.writeable = False
        self.started = time.time()
        self.requests: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.latency = LatencyLog()
        self.reloads = 0
        self.door_stats: dict[str, Callable[[], dict[str, Any]]] = {}  # door name -> its counters, for stats
        self._handlers: dict[str, Callable[[P.Request, Any, Any, bytes, int], dict[str, Any] | None]] = {
            "ping": self._op_ping, "hello": self._op_hello, "stats": self._op_stats,
            "session.create": self._op_session_create, "session.event": self._op_session_event,
            "session.state": self._op_session_state, "session.close": self._op_session_close,
            "reload": self._op_reload, "act": self._op_act, "session.step": self._op_session_step,
        }
        missing = set(P.OPS) - set(self._handlers)
        if missing:  # the protocol module and the service must agree
            raise RuntimeError(f"ops without a handler: {sorted(missing)}")

    def _load(self, spec: str) -> Policy:
        if self.config.backend != "onnx":
            return load_policy(spec, slots=self.config.slots, seed=self.config.seed)
        from npc_brains.export import ExportError, onnx_policy

        try:  # a trained policy exported in memory, or an exported .onnx file as it is
            return onnx_policy(spec if spec not in BASELINE_NAMES else load_policy(spec, slots=self.config.slots),
                               seed=self.config.seed)
        except ExportError as exc:
            raise BackendLoadError(f"--backend onnx: {exc}") from None

    def _temper(self, policy: Policy) -> None:
        """Set the server's sampling temperature on a policy about to serve (PolicyLoadError if it has none)."""
        if self.config.temperature == 1.0:
            return
        try:
            set_temperature(policy, self.config.temperature, "--temperature")
        except ValueError as exc:
            raise PolicyLoadError(str(exc)) from None

    def _personalise(self, policy: Policy) -> Policy:
        """The policy as served: wrapped so that requests may name a personality strength, at the server's (at 1
        it plays as the policy itself). One without a learned personality (the rules, random actions) is served as
        it is, at strength 1 only (PolicyLoadError otherwise)."""
        if isinstance(policy, PersonalityStrength):  # handed over already wrapped: at the server's strength
            policy.strength = self.config.personality_strength
            return policy
        try:
            guidable(policy, "--personality-strength")
        except ValueError as exc:
            if self.config.personality_strength != 1.0:
                raise PolicyLoadError(str(exc)) from None
            return policy
        return PersonalityStrength(policy, self.config.personality_strength, seed=self.config.seed,
                                   traits=self.config.personality_traits)

    def request_strength(self, fields: dict[str, Any]) -> float | None:
        """A request's `personality_strength` field, checked: None when it names none."""
        value = fields.get("personality_strength")
        if value is None:
            return None
        try:
            s = check_personality(value)
        except ValueError as exc:
            raise P.ProtocolError("bad_request", str(exc)) from None
        if not isinstance(self.policy, PersonalityStrength):
            raise P.ProtocolError("bad_request", f"personality_strength: the served policy {self.policy_name} has "
                                  "no learned personality to play more or less strongly")
        return s

    def request_temperature(self, fields: dict[str, Any]) -> float | None:
        """A request's `temperature` field, checked: None when it names none."""
        value = fields.get("temperature")
        if value is None:
            return None
        if fields.get("deterministic", False):
            raise P.ProtocolError("bad_request", "temperature: deterministic takes the most likely action and "
                                  "samples nothing; give one of the two")
        try:
            t = check_temperature(value)
        except ValueError as exc:
            raise P.ProtocolError("bad_request", str(exc)) from None
        if not hasattr(self.policy, "temperature"):
            raise P.ProtocolError("bad_request", f"temperature: the served policy {self.policy_name} has no learned "
                                  "probabilities to sharpen")
        return t

    @property
    def policy_name(self) -> str:
        return str(getattr(self.policy, "name", type(self.policy).__name__))

    def restore(self) -> int:
        """Load the sessions saved under the state directory; returns how many."""
        restored, problems = self.store.restore_all()
        for problem in problems:
            log.warning("session_not_restored", extra={"problem": problem})
        return restored

    # ------------------------------------------------------------------------------------------ replies
    def send(self, peer: Any, payload: bytes, op: str, t0: int) -> None:
        self.transmit(peer, payload)
        self.latency.add(op, (time.perf_counter_ns() - t0) / 1e3)

    def reply(self, peer: Any, request_id: Any, result: dict[str, Any], op: str, t0: int) -> bytes:
        payload = P.pack(P.ok_reply(request_id, **result))
        self.send(peer, payload, op, t0)
        return payload

    def error(self, peer: Any, request_id: Any, code: str, message: str, op: str, t0: int) -> bytes:
        self.errors[code] = self.errors.get(code, 0) + 1
        log.warning("request_error", extra={"id": request_id, "op": op, "code": code, "error": message,
                                            "client": self.describe_peer(peer)})
        payload = P.pack(P.error_reply(request_id, code, message))
        self.send(peer, payload, op, t0)
        return payload

    # ------------------------------------------------------------------------------------------ requests
    def handle(self, peer: Any, client: Any, body: bytes, t0: int) -> None:
        """Serve one received body: a reply now, or an item in the batch (replied to by flush())."""
        op, request_id = "?", None
        try:
            message = P.unpack(body, self.limits)
            if type(message) is dict and message.get("op") == "act":
                q = self._parse_act_fast(message, self.limits, self.obs_dim, self.n_actions, self._all_valid)
                if q is not None:
                    self.requests["act"] = self.requests.get("act", 0) + 1
                    self._enqueue(Item(peer, client, "act", q.id, t0, q.obs, q.mask, q.deterministic, q.with_probs))
                    return
            req = P.validate_request(message, self.limits)
            op, request_id = req.op, req.id
            self.requests[op] = self.requests.get(op, 0) + 1
            result = self._handlers[op](req, peer, client, body, t0)
            if result is not None:
                self.reply(peer, request_id, result, op, t0)
        except P.ProtocolError as exc:
            rid = exc.request_id if exc.request_id is not None else request_id
            self.error(peer, rid, exc.code, exc.message, op, t0)
        except WorldError as exc:
            self.error(peer, request_id, "invalid_world", str(exc), op, t0)
        except Exception as exc:  # a bug or a foreign failure: answer, log, keep serving
            log.exception("internal_error", extra={"id": request_id, "op": op})
            self.error(peer, request_id, "internal", f"{type(exc).__name__}: {exc}"[:300], op, t0)

    # ------------------------------------------------------------------------------------------ quick ops
    def _op_ping(self, req: P.Request, *_: Any) -> dict[str, Any]:
        return {"time": time.time()}

    def _op_hello(self, req: P.Request, peer: Any, *_: Any) -> dict[str, Any]:
        if "client" in req.fields:
            log.info("hello", extra={"id": req.id, "client_name": req.fields["client"][:200],
                                     "client": self.describe_peer(peer)})
        return {
            "protocol": P.PROTOCOL_VERSION, "protocol_minor": P.PROTOCOL_MINOR,
            "package_version": _package_version(), "policy": self.policy_name, "slots": self.config.slots,
            "obs_dim": self.obs_dim, "n_actions": self.n_actions, "observation_layout": self.obs_names,
            "action_names": self.action_names, "reaction_names": list(REACTION_NAMES),
            "event_types": list(P.EVENT_TYPES), "ops": list(P.OPS), "limits": self.limits.as_dict(),
            "temperature": float(getattr(self.policy, "temperature", 1.0)),
            "personality_strength": float(getattr(self.policy, "strength", 1.0)),
            "personality_traits": list(getattr(self.policy, "trait_names", self.config.personality_traits or
                                               TRAIT_COLUMNS)),
        }

    def _op_stats(self, req: P.Request | None, *_: Any) -> dict[str, Any]:
        out = {
            "uptime_s": round(time.time() - self.started, 3), "policy": self.policy_name,
            "requests": dict(self.requests), "errors": dict(self.errors), "latency_us": self.latency.summary(),
            "batches": self.batcher.summary(), "sessions": len(self.store), "reloads": self.reloads,
            "gc": self.gc_pauses.summary(),
        }
        if self.door_stats:
            out["doors"] = {name: fn() for name, fn in self.door_stats.items()}
        return out

    # ------------------------------------------------------------------------------------------ retried requests
    def _replayed(self, cached: Callable[[str], bytes | None], req: P.Request, peer: Any, body: bytes, t0: int
                  ) -> str | None:
        """Answer a retried request (the same op, id and body) with the reply it was given the first time.

        Returns None when it was answered so; otherwise the key its reply is to be remembered under."""
        key = Session.replay_key(req.op, req.id, body)
        payload = cached(key)
        if payload is None:
            return key
        self.send(peer, payload, req.op, t0)
        return None

    def _reply_remembered(self, session: Session, key: str, peer: Any, request_id: Any, result: dict[str, Any],
                          op: str, t0: int) -> None:
        """Answer a session's request and keep the reply (saved with the session) for its retries."""
        payload = P.pack(P.ok_reply(request_id, **result))
        session.remember(key, payload)
        self.store.save(session)
        self.send(peer, payload, op, t0)

    # ------------------------------------------------------------------------------------------ sessions
    def _op_session_create(self, req: P.Request, peer: Any, client: Any, body: bytes, t0: int) -> None:
        # this client's retried create gets the same session, not a second one
        key = self._replayed(lambda k: self._create_replies.get((client, k)), req, peer, body, t0)
        if key is None:
            return None
        self.request_temperature(req.fields)  # checked before a session is made of it
        self.request_strength(req.fields)
        session = self.store.create(req.fields)
        self.store.save(session)
        log.info("session_created", extra={"id": req.id, "session": session.id, "npcs": session.N,
                                           "entities": session.E})
        result = {"session": session.id, "npcs": session.names[:session.N], "actors": session.names[session.N:],
                  "tick": int(session.sim.state.tick[0])}
        self._create_replies[(client, key)] = self.reply(peer, req.id, result, req.op, t0)
        while len(self._create_replies) > CREATE_REPLAY:
            self._create_replies.popitem(last=False)
        return None

    def _session(self, req: P.Request) -> Session:
        sid = req.fields["session"]
        if sid in self.batcher.sessions:  # keep a session's requests in the order they came
            self.flush()
        return self.store.get(sid)

    def _op_session_event(self, req: P.Request, peer: Any, client: Any, body: bytes, t0: int) -> None:
        session = self._session(req)
        key = self._replayed(session.cached, req, peer, body, t0)
        if key is not None:
            self._reply_remembered(session, key, peer, req.id, session.queue_event(req.fields), req.op, t0)
        return None

    def _op_session_state(self, req: P.Request, *_: Any) -> dict[str, Any]:
        return self._session(req).state_view(req.fields.get("npc"))

    def _op_session_close(self, req: P.Request, *_: Any) -> dict[str, Any]:
        self._session(req)
        self.store.close(req.fields["session"])
        log.info("session_closed", extra={"id": req.id, "session": req.fields["session"]})
        return {"closed": True}

    # ------------------------------------------------------------------------------------------ reload
    def _op_reload(self, req: P.Request, peer: Any, client: Any, body: bytes, t0: int) -> None:
        if self._reload is not None:
            raise P.ProtocolError("busy", "another reload is in progress; retry when it has finished")
        spec = req.fields.get("policy", self.config.policy)
        if spec not in (*POLICY_NAMES, self.config.policy):
            path = Path(spec).resolve()
            if not path.is_relative_to(self.policy_root):
                raise P.ProtocolError("forbidden", f"policy: {spec!r} is outside the server's policy root "
                                      f"{self.policy_root}; only paths under it can be loaded remotely")
        job: dict[str, Any] = {"peer": peer, "id": req.id, "t0": t0, "spec": spec,
                               "done": threading.Event(), "policy": None, "error": None, "ms": 0.0}

        def load() -> None:
            start = time.perf_counter()
            try:
                policy = self.loader(spec)
                probe(policy, self.config.slots)
                self._temper(policy)
                job["policy"] = self._personalise(policy)
            except PolicyLoadError as exc:
                job["error"] = str(exc)
            except Exception as exc:  # foreign code: report, never crash the server
                job["error"] = f"{type(exc).__name__}: {exc}"
            job["ms"] = (time.perf_counter() - start) * 1e3
            job["done"].set()

        self._reload = job
        threading.Thread(target=load, name="bridge-reload", daemon=True).start()
        log.info("reload_started", extra={"id": req.id, "policy_spec": spec})
        return None

    @property
    def reloading(self) -> bool:
        return self._reload is not None

    def poll_reload(self) -> None:
        """Swap in a policy whose reload has finished loading (between two batches)."""
        job = self._reload
        if job is None or not job["done"].is_set():
            return
        self._reload = None
        if job["error"] is not None:
            self.error(job["peer"], job["id"], "reload_failed", job["error"], "reload", job["t0"])
            return
        if self.batcher:  # the batch collected so far was meant for the old policy
            self.flush()
        self.policy = job["policy"]
        self.store.tuning = policy_tuning(self.policy)  # sessions created from now on (open ones keep theirs)
        self.reloads += 1
        if self.config.gc_freeze:  # the new policy's objects join the start-up ones (the old are freed by refcount)
            gc.freeze()
        log.info("reloaded", extra={"id": job["id"], "policy": self.policy_name, "load_ms": round(job["ms"], 2)})
        self.reply(job["peer"], job["id"], {"policy": self.policy_name, "load_ms": round(job["ms"], 3)},
                   "reload", job["t0"])

    # ------------------------------------------------------------------------------------------ batching
    def _op_act(self, req: P.Request, peer: Any, client: Any, body: bytes, t0: int) -> None:
        f = req.fields
        obs = P.decode_array(f["obs"], "obs", ("float32",), max_elements=self.limits.max_rows * self.obs_dim)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise P.ProtocolError("invalid_array", f"obs: expected shape [R, {self.obs_dim}], got {list(obs.shape)}")
        rows = obs.shape[0]
        if rows < 1 or rows > self.limits.max_rows:
            raise P.ProtocolError("limit_exceeded" if rows else "invalid_array",
                                  f"obs: expected 1..{self.limits.max_rows} rows, got {rows}")
        if not math.isfinite(obs.sum(dtype=np.float64)):  # one reduction: NaN and inf both poison the sum
            raise P.ProtocolError("invalid_array", "obs: contains NaN or infinity")
        if "mask" in f:
            mask = P.decode_array(f["mask"], "mask", ("bool", "uint8"),
                                  max_elements=self.limits.max_rows * self.n_actions)
            if mask.shape != (rows, self.n_actions):
                raise P.ProtocolError("invalid_array", f"mask: expected shape [{rows}, {self.n_actions}], got "
                                      f"{list(mask.shape)}")
            mask = mask.astype(bool, copy=False)
            if not mask.any(1).all():
                empty = int(np.flatnonzero(~mask.any(1))[0])
                raise P.ProtocolError("invalid_array", f"mask: row {empty} allows no action; allow at least "
                                      "action 0 (idle)")
        else:
            mask = self._all_valid[:rows]
        temperature, strength = self.request_temperature(f), self.request_strength(f)
        self._enqueue(Item(peer, client, req.op, req.id, t0, obs, mask, bool(f.get("deterministic", False)),
                           bool(f.get("with_probs", False)), temperature=temperature, personality_strength=strength))
        return None

    def _op_session_step(self, req: P.Request, peer: Any, client: Any, body: bytes, t0: int) -> None:
        session = self._session(req)
        key = self._replayed(session.cached, req, peer, body, t0)
        if key is None:
            return None
        obs, mask = session.prepare(req.fields)
        self._enqueue(Item(peer, client, req.op, req.id, t0, obs, mask, session.deterministic, session=session,
                           cache_key=key, temperature=session.temperature,
                           personality_strength=session.personality_strength))
        return None

    def _enqueue(self, item: Item) -> None:
        if self.batcher.would_overflow(item.obs.shape[0]):
            self.flush()
        if self.batcher.add(item):
            self.flush()

    def should_flush(self) -> bool:
        return bool(self.batcher) and self.batcher.should_flush()

    def flush(self) -> None:
        """Run the batch through the policy and answer every request in it."""
        items = self.batcher.take()
        if not items:
            return
        results = Batcher.forward(self.policy, items, log)
        for k, item in enumerate(items):
            out = results[k]
            op, rid = item.op, item.rid
            try:
                if isinstance(out, Exception):
                    raise out
                actions, probs = out
                if item.session is None:
                    if item.with_probs and probs is not None:
                        result: dict[str, Any] = {"actions": P.encode_array(actions.astype(np.int32, copy=False)),
                                                  "policy": self.policy_name,
                                                  "probs": P.encode_array(np.asarray(probs, np.float32))}
                        self.reply(item.peer, rid, result, op, item.t0)
                    else:
                        self.send(item.peer, self._act_reply.encode(rid, actions, self.policy_name), op, item.t0)
                else:
                    self._reply_remembered(item.session, item.cache_key or "", item.peer, rid,
                                           item.session.finish(actions), op, item.t0)
            except Exception as exc:
                if item.session is not None:
                    item.session.abort()
                log.exception("internal_error", extra={"id": rid, "op": op})
                self.error(item.peer, rid, "internal", f"{type(exc).__name__}: {exc}"[:300], op, item.t0)

    # ------------------------------------------------------------------------------------------ upkeep
    def housekeeping(self, now: float) -> None:
        self.batcher.forget_idle(now)
        for sid in self.store.expire():
            log.info("session_expired", extra={"session": sid})
