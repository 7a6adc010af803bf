"""The bridge server: a ZeroMQ ROUTER socket, msgpack bodies, a dynamic batcher, sessions, hot reload.

One thread owns the socket, the sessions and the policy (no locks on the hot path). Each loop turn:
poll, drain every frame already waiting, answer the quick ops at once, and collect `act` and
`session.step` into a batch that goes through ONE policy forward. A batch is sent when it reaches
`max_batch_rows`, when its oldest request has waited `batch_delay_us`, or as soon as no other recently
active client is missing from it (so a lone client never waits for company that is not coming).

Robustness: frames above the soft size limit get a `too_large` reply without being decoded (ZMQ_MAXMSGSIZE,
a multiple of it, disconnects peers sending even more), msgpack decoding is size-limited, every decoded
request is validated against bridge/protocol.py, and every failure is an error reply with a code, after
which the loop carries on. Reloads load and probe the new policy in a helper thread and swap it in between
two batches, so no request is dropped or sees a half-loaded policy.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgpack
import numpy as np
import zmq

from bridge import protocol as P
from bridge.blas import set_blas_threads
from bridge.policies import BASELINE_NAMES, PolicyLoadError, layout, load_policy, probe
from bridge.sessions import Session, SessionStore
from engine.constants import REACTION_NAMES
from npc_brains.config import policy_tuning
from npc_brains.policy_api import Policy
from worlds import WorldError

log = logging.getLogger("bridge.server")

HOUSEKEEPING_S = 1.0
IDLE_POLL_MS = 50
CREATE_REPLAY = 64

# plain ints: pyzmq's enum flags cost a few microseconds of Python per use on the hot path
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NB = int(zmq.SNDMORE) | _NOBLOCK
_RCVMORE = int(zmq.RCVMORE)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_F32 = np.dtype("<f4")
_I32 = np.dtype("<i4")
_MASK_DTYPES = {"bool": np.dtype(bool), "uint8": np.dtype("u1")}
_ACT_KEYS = frozenset(("v", "id", "op", *P.OPS["act"].fields))
_isfinite, _all_true = np.isfinite, np.logical_and.reduce
_packb = msgpack.Packer(use_bin_type=True).pack  # P.pack's encoding; only the server thread packs with it
# the constant parts of act's reply {"v", "id", "ok": true, "actions": {"dtype", "shape": [R], "data"}, "policy"}
_ACT_HEAD = b"\x85" + _packb("v") + _packb(P.PROTOCOL_VERSION) + _packb("id")
_ACT_MID = (_packb("ok") + _packb(True) + _packb("actions") + b"\x83" + _packb("dtype") + _packb("int32")
            + _packb("shape") + b"\x91")
_DATA_KEY = _packb("data")


class ConfigError(Exception):
    """The server cannot start with this configuration (a one-line reason)."""


@dataclass(frozen=True)
class ServerConfig:
    bind: str = "tcp://127.0.0.1:5555"
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
    insecure: bool = False  # allow a non-loopback bind without CurveZMQ
    policy_root: Path | None = None  # reload may load checkpoints under this directory only
    blas_threads: int | None = 1  # numpy's OpenBLAS threads while serving (bridge/blas.py); None: leave as is
    gc_freeze: bool = True  # move the start-up objects out of the collector's sight before serving
    spin_us: int = 0  # after a request, poll this long for the next before sleeping in recv (0 = never)


def spin_until_readable(sock: zmq.Socket, seconds: float) -> None:
    """Poll `sock` for up to `seconds` (a client that just got its reply usually sends the next request within
    a round trip): the loop stays on the CPU with its caches warm instead of being woken. `--spin-us`."""
    clock = time.perf_counter
    deadline = clock() + seconds
    while clock() < deadline:
        if sock.getsockopt(_EVENTS) & _POLLIN:
            return


def endpoint_is_local(endpoint: str) -> bool:
    """True for loopback TCP, ipc:// and inproc://; False for anything reachable from other machines."""
    scheme, _, rest = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        return False
    host = urlsplit(f"tcp://{rest}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', an interface name or a host name


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("village-npc")
    except Exception:  # not installed (running from a checkout)
        return "0+unknown"


@dataclass(slots=True)
class _Item:
    """A request waiting in the batch."""

    envelope: list[bytes]
    op: str
    rid: Any  # the request id
    t0: int  # perf_counter_ns at receipt
    obs: np.ndarray
    mask: np.ndarray
    deterministic: bool
    with_probs: bool = False
    session: Session | None = None
    cache_key: str | None = None


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


class BridgeServer:
    """`start()` binds and restores sessions; `serve_forever()` runs the loop until `stop()`."""

    def __init__(self, config: ServerConfig, policy: Policy | None = None, *,
                 loader: Callable[[str], Policy] | None = None):
        self.config = config
        self.limits = config.limits
        self.loader = loader or (lambda spec: load_policy(spec, slots=config.slots, seed=config.seed))
        self.obs_names, self.action_names = layout(config.slots)
        self.obs_dim, self.n_actions = len(self.obs_names), len(self.action_names)
        if policy is None:
            try:
                policy = self.loader(config.policy)
                probe(policy, config.slots)
            except PolicyLoadError as exc:
                raise ConfigError(str(exc)) from None
        self.policy: Policy = policy
        self.store = SessionStore(self.limits, config.slots, config.session_ttl_s, config.state_dir)
        self.store.tuning = policy_tuning(policy)  # its sessions' minds run in the world it learned
        self.policy_root = Path(config.policy_root or Path.cwd()).resolve()
        self.endpoint: str | None = None
        self.ctx: zmq.Context | None = None
        self.sock: zmq.Socket | None = None
        self._auth: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._batch: list[_Item] = []
        self._batch_rows = 0
        self._batch_sessions: set[str] = set()
        self._batch_clients: set[bytes] = set()
        self._deadline = 0.0
        self.gc_pauses = GcPauses()
        self._delay_s = config.batch_delay_us / 1e6
        self._active: dict[bytes, float] = {}  # client identity -> last batched request (monotonic s)
        self._active_window = max(0.05, 20 * self._delay_s)
        self._reload: dict[str, Any] | None = None  # the reload in progress
        self._create_replies: OrderedDict[str, bytes] = OrderedDict()
        self._act_tails: dict[str, bytes] = {}  # policy name -> the encoded end of act's reply
        self._all_valid = np.ones((self.limits.max_rows, self.n_actions), bool)  # act's mask when none is sent
        self._all_valid.flags.writeable = False
        self.started = time.time()
        self.requests: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.latency = LatencyLog()
        self.batches = {"count": 0, "rows": 0, "requests": 0, "max_rows": 0}
        self.reloads = 0
        self._last_housekeeping = time.monotonic()
        self._handlers: dict[str, Callable[[P.Request, list[bytes], bytes, int], dict[str, Any] | None]] = {
            "ping": self._op_ping, "hello": self._op_hello, "stats": self._op_stats,
            "session.create": self._op_session_create, "session.event": self._op_session_event,
            "session.state": self._op_session_state, "session.close": self._op_session_close,
            "reload": self._op_reload, "act": self._op_act, "session.step": self._op_session_step,
        }
        missing = set(P.OPS) - set(self._handlers)
        if missing:  # the protocol module and the server must agree
            raise RuntimeError(f"ops without a handler: {sorted(missing)}")

    # ------------------------------------------------------------------------------------------ life
    def start(self) -> str:
        """Bind (refusing an unprotected non-loopback bind), restore saved sessions; returns the endpoint."""
        cfg = self.config
        bind = cfg.bind
        if bind.startswith("tcp://") and bind.endswith(":0"):
            bind = bind[:-2] + ":*"
        local = endpoint_is_local(bind)
        if not local and not cfg.insecure and (cfg.curve_secret is None or cfg.curve_allow is None):
            raise ConfigError(f"refusing to bind {cfg.bind}: it is reachable from other machines; give "
                              "--curve-secret and --curve-allow (CurveZMQ with a client allow-list), bind "
                              "to 127.0.0.1, or pass --insecure")
        if cfg.curve_allow is not None and cfg.curve_secret is None:
            raise ConfigError("--curve-allow needs --curve-secret (the server's key pair)")
        from bridge.keys import KeyFileError, load_keypair

        self.ctx = zmq.Context()
        sock = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.limits.hard_message_bytes)
        if cfg.curve_secret is not None:
            try:
                public, secret = load_keypair(cfg.curve_secret)
            except KeyFileError as exc:
                self._close_ctx(sock)
                raise ConfigError(str(exc)) from None
            if cfg.curve_allow is not None:
                if not Path(cfg.curve_allow).is_dir():
                    self._close_ctx(sock)
                    raise ConfigError(f"--curve-allow {cfg.curve_allow}: not a directory of client .key files")
                from zmq.auth.thread import ThreadAuthenticator

                self._auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("bridge.auth"))
                self._auth.start()
                self._auth.configure_curve(domain="*", location=str(cfg.curve_allow))
            sock.curve_secretkey = secret
            sock.curve_publickey = public
            sock.curve_server = True
        try:
            sock.bind(bind)
        except zmq.ZMQError as exc:
            self._close_ctx(sock)
            raise ConfigError(f"cannot bind {cfg.bind}: {exc}") from None
        self.sock = sock
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        restored, problems = self.store.restore_all()
        for problem in problems:
            log.warning("session_not_restored", extra={"problem": problem})
        log.info("listening", extra={"endpoint": self.endpoint, "policy": self.policy_name,
                                     "curve": cfg.curve_secret is not None, "sessions_restored": restored,
                                     "protocol": P.PROTOCOL_VERSION, "batch_delay_us": cfg.batch_delay_us})
        return self.endpoint

    def _close_ctx(self, sock: zmq.Socket | None = None) -> None:
        if sock is not None:
            sock.close(0)
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None

    def serve_forever(self) -> None:
        """Run until `stop()`; closes the socket on the way out.

        The loop blocks in recv (with a receive timeout) rather than in a poller: one wake-up per request
        and no extra system calls, which is most of a lone client's latency."""
        assert self.sock is not None, "call start() first"
        sock = self.sock
        timeout_ms = -2
        blas_before = None
        if self.config.blas_threads is not None:  # small forwards from one thread: no BLAS worker hand-offs
            blas_before = set_blas_threads(self.config.blas_threads)
        if self.config.gc_freeze:  # see GcPauses: full collections would otherwise walk torch and the policy
            gc.collect()
            gc.freeze()
        self.gc_pauses.install()
        spin_s, busy = self.config.spin_us / 1e6, False
        try:
            while not self._stop.is_set():
                if self._batch:
                    if self._should_flush():
                        self._flush()
                        continue
                    # receive timeouts are whole milliseconds: a batch waits at most the delay rounded up
                    wait_ms = max(1, math.ceil((self._deadline - time.perf_counter()) * 1000))
                else:
                    wait_ms = 2 if self._reload is not None else IDLE_POLL_MS
                if wait_ms != timeout_ms:
                    sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                    timeout_ms = wait_ms
                if spin_s and busy and not self._batch:
                    spin_until_readable(sock, spin_s)
                try:
                    frames = self._recv(0)
                except zmq.Again:
                    frames = None
                busy = frames is not None
                if busy:
                    self._handle(frames, time.perf_counter_ns())
                    self._drain()
                if self._reload is not None and self._reload["done"].is_set():
                    self._finish_reload()
                now = time.monotonic()
                if now - self._last_housekeeping >= HOUSEKEEPING_S:
                    self._housekeeping(now)
            if self._batch:
                self._flush()
        finally:
            if blas_before is not None:
                set_blas_threads(blas_before)
            self.gc_pauses.remove()
            self.sock.close(0)
            self.sock = None
            self._close_ctx()
            log.info("stopped", extra={"sessions": len(self.store)})

    def run_in_thread(self) -> str:
        """start() and serve in a daemon thread (tests, embedding); returns the endpoint."""
        endpoint = self.start()
        self._thread = threading.Thread(target=self.serve_forever, name="bridge-server", daemon=True)
        self._thread.start()
        return endpoint

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to finish (thread-safe); waits for the thread started by run_in_thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def policy_name(self) -> str:
        return str(getattr(self.policy, "name", type(self.policy).__name__))

    # ------------------------------------------------------------------------------------------ frames
    def _recv(self, flags: int) -> list[bytes]:
        """One multipart message (recv_multipart without pyzmq's per-call enum arithmetic)."""
        sock = self.sock
        frames = [sock.recv(flags)]
        while sock.getsockopt(_RCVMORE):
            frames.append(sock.recv(flags))
        return frames

    def _drain(self) -> None:
        sock = self.sock
        for _ in range(1000):  # then let the loop flush and look after the rest
            if not sock.getsockopt(_EVENTS) & _POLLIN:  # cheaper than a recv that raises Again
                return
            try:
                frames = self._recv(_NOBLOCK)
            except zmq.Again:
                return
            self._handle(frames, time.perf_counter_ns())

    def _send(self, envelope: list[bytes], payload: bytes, op: str, t0: int) -> None:
        send = self.sock.send
        try:
            for frame in envelope:
                send(frame, _SNDMORE_NB)
            send(payload, _NOBLOCK)
        except zmq.ZMQError as exc:  # the peer's queue is full or it is gone: its loss, not ours
            log.warning("reply_dropped", extra={"op": op, "reason": str(exc)})
        self.latency.add(op, (time.perf_counter_ns() - t0) / 1e3)

    def _reply(self, envelope: list[bytes], request_id: Any, result: dict[str, Any], op: str, t0: int) -> bytes:
        payload = P.pack(P.ok_reply(request_id, **result))
        self._send(envelope, payload, op, t0)
        return payload

    def _error(self, envelope: list[bytes], request_id: Any, code: str, message: str, op: str, t0: int) -> bytes:
        self.errors[code] = self.errors.get(code, 0) + 1
        log.warning("request_error", extra={"id": request_id, "op": op, "code": code, "error": message,
                                            "client": envelope[0].hex() if envelope else None})
        payload = P.pack(P.error_reply(request_id, code, message))
        self._send(envelope, payload, op, t0)
        return payload

    def _handle(self, frames: list[bytes], t0: int) -> None:
        if len(frames) == 3 and not frames[1]:  # [routing id, delimiter, body]: what REQ and DEALER clients send
            envelope, body = frames[:2], frames[2]
        else:
            delimiter = next((k for k in range(1, len(frames)) if not frames[k]), None)
            if delimiter is None:
                self._error(frames[:1], None, "bad_envelope", "expected [empty delimiter, body] after the routing "
                            "id: use a REQ socket, or a DEALER that sends an empty frame before the body", "?", t0)
                return
            envelope, bodies = frames[:delimiter + 1], frames[delimiter + 1:]
            if len(bodies) != 1:
                self._error(envelope, None, "bad_envelope", f"expected exactly one body frame after the delimiter, "
                            f"got {len(bodies)}", "?", t0)
                return
            body = bodies[0]
        op, request_id = "?", None
        try:
            message = P.unpack(body, self.limits)
            if type(message) is dict and message.get("op") == "act" and self._fast_act(message, envelope, t0):
                return
            req = P.validate_request(message, self.limits)
            op, request_id = req.op, req.id
            self.requests[op] = self.requests.get(op, 0) + 1
            result = self._handlers[op](req, envelope, body, t0)
            if result is not None:
                payload = self._reply(envelope, request_id, result, op, t0)
                if op == "session.create":
                    self._remember_create(req, body, payload)
        except P.ProtocolError as exc:
            rid = exc.request_id if exc.request_id is not None else request_id
            self._error(envelope, rid, exc.code, exc.message, op, t0)
        except WorldError as exc:
            self._error(envelope, request_id, "invalid_world", str(exc), op, t0)
        except Exception as exc:  # a bug or a foreign failure: answer, log, keep serving
            log.exception("internal_error", extra={"id": request_id, "op": op})
            self._error(envelope, request_id, "internal", f"{type(exc).__name__}: {exc}"[:300], op, t0)

    # ------------------------------------------------------------------------------------------ quick ops
    def _op_ping(self, req: P.Request, *_: Any) -> dict[str, Any]:
        return {"time": time.time()}

    def _op_hello(self, req: P.Request, envelope: list[bytes], *_: Any) -> dict[str, Any]:
        if "client" in req.fields:
            log.info("hello", extra={"id": req.id, "client_name": req.fields["client"][:200],
                                     "client": envelope[0].hex()})
        return {
            "protocol": P.PROTOCOL_VERSION, "protocol_minor": P.PROTOCOL_MINOR,
            "package_version": _package_version(), "policy": self.policy_name, "slots": self.config.slots,
            "obs_dim": self.obs_dim, "n_actions": self.n_actions, "observation_layout": self.obs_names,
            "action_names": self.action_names, "reaction_names": list(REACTION_NAMES),
            "event_types": list(P.EVENT_TYPES), "ops": list(P.OPS), "limits": self.limits.as_dict(),
        }

    def _op_stats(self, req: P.Request, *_: Any) -> dict[str, Any]:
        b = self.batches
        return {
            "uptime_s": round(time.time() - self.started, 3), "policy": self.policy_name,
            "requests": dict(self.requests), "errors": dict(self.errors), "latency_us": self.latency.summary(),
            "batches": {"count": b["count"], "rows_mean": round(b["rows"] / max(b["count"], 1), 2),
                        "requests_mean": round(b["requests"] / max(b["count"], 1), 2), "max_rows": b["max_rows"]},
            "sessions": len(self.store), "reloads": self.reloads, "gc": self.gc_pauses.summary(),
        }

    def _remember_create(self, req: P.Request, body: bytes, payload: bytes) -> None:
        self._create_replies[Session.replay_key(req.op, req.id, body)] = payload
        while len(self._create_replies) > CREATE_REPLAY:
            self._create_replies.popitem(last=False)

    def _op_session_create(self, req: P.Request, envelope: list[bytes], body: bytes, t0: int
                           ) -> dict[str, Any] | None:
        cached = self._create_replies.get(Session.replay_key(req.op, req.id, body))
        if cached is not None:  # a retried create: the same session, not a second one
            self._send(envelope, cached, req.op, t0)
            return None
        session = self.store.create(req.fields)
        self.store.save(session)
        log.info("session_created", extra={"id": req.id, "session": session.id, "npcs": session.N,
                                           "entities": session.E})
        return {"session": session.id, "npcs": session.names[:session.N], "actors": session.names[session.N:],
                "tick": int(session.sim.state.tick[0])}

    def _session(self, req: P.Request) -> Session:
        sid = req.fields["session"]
        if sid in self._batch_sessions:  # keep a session's requests in the order they came
            self._flush()
        return self.store.get(sid)

    def _op_session_event(self, req: P.Request, envelope: list[bytes], body: bytes, t0: int
                          ) -> dict[str, Any] | None:
        session = self._session(req)
        key = Session.replay_key(req.op, req.id, body)
        cached = session.cached(key)
        if cached is not None:
            self._send(envelope, cached, req.op, t0)
            return None
        result = session.queue_event(req.fields)
        payload = P.pack(P.ok_reply(req.id, **result))
        session.remember(key, payload)
        self.store.save(session)
        self._send(envelope, payload, req.op, t0)
        return None

    def _op_session_state(self, req: P.Request, *_: Any) -> dict[str, Any]:
        return self._session(req).state_view(req.fields.get("npc"))

    def _op_session_close(self, req: P.Request, *_: Any) -> dict[str, Any]:
        self._session(req)
        self.store.close(req.fields["session"])
        log.info("session_closed", extra={"id": req.id, "session": req.fields["session"]})
        return {"closed": True}

    # ------------------------------------------------------------------------------------------ reload
    def _op_reload(self, req: P.Request, envelope: list[bytes], body: bytes, t0: int) -> None:
        if self._reload is not None:
            raise P.ProtocolError("busy", "another reload is in progress; retry when it has finished")
        spec = req.fields.get("policy", self.config.policy)
        if spec not in (*BASELINE_NAMES, "default", self.config.policy):
            path = Path(spec).resolve()
            if not path.is_relative_to(self.policy_root):
                raise P.ProtocolError("forbidden", f"policy: {spec!r} is outside the server's policy root "
                                      f"{self.policy_root}; only paths under it can be loaded remotely")
        job: dict[str, Any] = {"envelope": envelope, "id": req.id, "t0": t0, "spec": spec,
                               "done": threading.Event(), "policy": None, "error": None, "ms": 0.0}

        def load() -> None:
            start = time.perf_counter()
            try:
                policy = self.loader(spec)
                probe(policy, self.config.slots)
                job["policy"] = policy
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

    def _finish_reload(self) -> None:
        job, self._reload = self._reload, None
        assert job is not None
        if job["error"] is not None:
            self._error(job["envelope"], job["id"], "reload_failed", job["error"], "reload", job["t0"])
            return
        if self._batch:  # the batch collected so far was meant for the old policy
            self._flush()
        self.policy = job["policy"]
        self.store.tuning = policy_tuning(self.policy)  # sessions created from now on (open ones keep theirs)
        self.reloads += 1
        if self.config.gc_freeze:  # the new policy's objects join the start-up ones (the old are freed by refcount)
            gc.freeze()
        log.info("reloaded", extra={"id": job["id"], "policy": self.policy_name, "load_ms": round(job["ms"], 2)})
        self._reply(job["envelope"], job["id"], {"policy": self.policy_name, "load_ms": round(job["ms"], 3)},
                    "reload", job["t0"])

    # ------------------------------------------------------------------------------------------ batching
    def _fast_act(self, m: dict[str, Any], envelope: list[bytes], t0: int) -> bool:
        """The usual well-formed `act`, checked and decoded inline, then queued; True when it was.

        The same checks as validate_request + _op_act, without the generic schema walk, and the arrays are
        read-only views of the received bytes (no copies). At the first thing it does not expect it returns
        False having changed nothing, and the generic path validates the same message and names the error,
        so replies, error codes and counters are exactly the generic path's."""
        v, rid = m.get("v"), m.get("id")
        if type(v) is not int or v != P.PROTOCOL_VERSION or not m.keys() <= _ACT_KEYS:
            return False
        if type(rid) is str:
            if len(rid) > self.limits.max_id_len:
                return False
        elif type(rid) is not int or not -(2**63) <= rid < 2**63:
            return False
        det, with_probs = m.get("deterministic"), m.get("with_probs")
        if det is None:
            det = False
        elif type(det) is not bool:
            return False
        if with_probs is None:
            with_probs = False
        elif type(with_probs) is not bool:
            return False
        a = m.get("obs")
        if type(a) is not dict or len(a) != 3 or a.get("dtype") != "float32":
            return False
        shape, data = a.get("shape"), a.get("data")
        if type(shape) is not list or len(shape) != 2 or type(data) is not bytes:
            return False
        rows, dim = shape
        if (type(rows) is not int or type(dim) is not int or dim != self.obs_dim
                or not 0 < rows <= self.limits.max_rows or len(data) != rows * dim * 4):
            return False
        obs = np.frombuffer(data, _F32).reshape(rows, dim)
        if not _all_true(_isfinite(obs), None):  # NaN or infinity: the generic path names it
            return False
        a = m.get("mask")
        if a is None:
            mask = self._all_valid[:rows]
        else:
            if type(a) is not dict or len(a) != 3:
                return False
            dtype, shape, data = a.get("dtype"), a.get("shape"), a.get("data")
            if dtype != "bool" and dtype != "uint8":
                return False
            if (type(shape) is not list or len(shape) != 2 or type(data) is not bytes
                    or len(data) != rows * self.n_actions):
                return False
            r, n = shape
            if type(r) is not int or type(n) is not int or r != rows or n != self.n_actions:
                return False
            mask = np.frombuffer(data, _MASK_DTYPES[dtype]).reshape(rows, n)
            if dtype == "uint8":
                mask = mask.astype(bool)
            if b"\x00" in data and not mask.any(1).all():  # no zero byte: every action of every row is allowed
                return False
        self.requests["act"] = self.requests.get("act", 0) + 1
        self._enqueue(_Item(envelope, "act", rid, t0, obs, mask, det, with_probs))
        return True

    def _op_act(self, req: P.Request, envelope: list[bytes], body: bytes, t0: int) -> None:
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
        self._enqueue(_Item(envelope, req.op, req.id, t0, obs, mask, bool(f.get("deterministic", False)),
                            bool(f.get("with_probs", False))))
        return None

    def _op_session_step(self, req: P.Request, envelope: list[bytes], body: bytes, t0: int) -> None:
        session = self._session(req)
        key = Session.replay_key(req.op, req.id, body)
        cached = session.cached(key)
        if cached is not None:
            self._send(envelope, cached, req.op, t0)
            return None
        obs, mask = session.prepare(req.fields)
        self._enqueue(_Item(envelope, req.op, req.id, t0, obs, mask, session.deterministic, session=session,
                            cache_key=key))
        return None

    def _enqueue(self, item: _Item) -> None:
        rows = item.obs.shape[0]
        if self._batch and self._batch_rows + rows > self.config.max_batch_rows:
            self._flush()
        if not self._batch:
            self._deadline = time.perf_counter() + self._delay_s
        self._batch.append(item)
        self._batch_rows += rows
        client = item.envelope[0]
        self._batch_clients.add(client)
        self._active[client] = time.monotonic()
        if item.session is not None:
            self._batch_sessions.add(item.session.id)
        if self._batch_rows >= self.config.max_batch_rows:
            self._flush()

    def _should_flush(self) -> bool:
        if len(self._active) <= len(self._batch_clients):  # everyone recently active is in (a lone client)
            return True
        if self._batch_rows >= self.config.max_batch_rows or time.perf_counter() >= self._deadline:
            return True
        now = time.monotonic()
        horizon = now - self._active_window
        return not any(t >= horizon and c not in self._batch_clients for c, t in self._active.items())

    def _flush(self) -> None:
        items, self._batch = self._batch, []
        rows, self._batch_rows = self._batch_rows, 0
        self._batch_sessions.clear()
        self._batch_clients.clear()
        if not items:
            return
        b = self.batches
        b["count"] += 1
        b["rows"] += rows
        b["requests"] += len(items)
        b["max_rows"] = max(b["max_rows"], rows)
        results: dict[int, Any] = {}  # position in items -> (actions, probs) or an exception
        if len(items) == 1:
            self._forward(items, [0], items[0].deterministic, results)
        else:
            for det in (False, True):
                group = [k for k, it in enumerate(items) if it.deterministic == det]
                if group:
                    self._forward(items, group, det, results)
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
                        self._reply(item.envelope, rid, result, op, item.t0)
                    else:
                        self._send(item.envelope, self._act_payload(rid, actions), op, item.t0)
                else:
                    result = item.session.finish(actions)
                    payload = P.pack(P.ok_reply(rid, **result))
                    item.session.remember(item.cache_key or "", payload)
                    self.store.save(item.session)
                    self._send(item.envelope, payload, op, item.t0)
            except Exception as exc:
                if item.session is not None:
                    item.session.abort()
                log.exception("internal_error", extra={"id": rid, "op": op})
                self._error(item.envelope, rid, "internal", f"{type(exc).__name__}: {exc}"[:300], op, item.t0)

    def _forward(self, items: list[_Item], group: list[int], det: bool, results: dict[int, Any]) -> None:
        """One policy forward for the group; if it fails, each request alone (so one bad apple fails alone)."""
        with_probs = any(items[k].with_probs for k in group)
        try:
            if len(group) == 1:
                obs, mask = items[group[0]].obs, items[group[0]].mask
            else:
                obs = np.concatenate([items[k].obs for k in group])
                mask = np.concatenate([items[k].mask for k in group])
            out = self.policy.act(obs, mask, deterministic=det, with_probs=with_probs)
            actions = np.asarray(out.actions)
            if actions.shape != (obs.shape[0],):
                raise ValueError(f"policy returned actions of shape {actions.shape} for {obs.shape[0]} rows")
        except Exception:
            if len(group) > 1:
                for k in group:
                    self._forward(items, [k], det, results)
                return
            results[group[0]] = RuntimeError("the policy failed on this request")
            log.exception("policy_error", extra={"id": items[group[0]].rid})
            return
        start = 0
        for k in group:
            n = items[k].obs.shape[0]
            probs = out.probs[start:start + n] if out.probs is not None else None
            results[k] = (actions[start:start + n], probs)
            start += n

    def _act_payload(self, rid: Any, actions: np.ndarray) -> bytes:
        """P.pack(P.ok_reply(rid, actions=P.encode_array(actions as int32), policy=name)), byte for byte, from
        pre-encoded parts: only the id, the row count and the data are encoded per reply."""
        name = self.policy_name
        tail = self._act_tails.get(name)
        if tail is None:
            if len(self._act_tails) > 16:  # reloads: keep it bounded
                self._act_tails.clear()
            tail = self._act_tails[name] = _packb("policy") + _packb(name)
        a = actions.astype(_I32, copy=False)
        return b"".join((_ACT_HEAD, _packb(rid), _ACT_MID, _packb(a.shape[0]), _DATA_KEY, _packb(a.tobytes()),
                         tail))

    # ------------------------------------------------------------------------------------------ upkeep
    def _housekeeping(self, now: float) -> None:
        self._last_housekeeping = now
        horizon = now - self._active_window
        self._active = {c: t for c, t in self._active.items() if t >= horizon}
        for sid in self.store.expire():
            log.info("session_expired", extra={"session": sid})
