"""What the bridge benchmarks share: the timing loop, `village serve` in another process, the bare ZeroMQ echo
(the transport + codec floor), and the door clients and load clients that measure decisions/s.

The echo and the load clients run as spawned processes: their targets live here, at module level, so that
a spawned child can import them.
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import zmq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bridge import protocol as P  # noqa: E402
from bridge.blas import set_blas_threads  # noqa: E402
from bridge.policies import load_policy  # noqa: E402
from bridge.server import ServerConfig, spin_until_readable  # noqa: E402
from bridge.ws import _json_from_reply  # noqa: E402

# the forwards and echoes measured here run with the BLAS threads the bridge serves with (bridge/blas.py)
BLAS_THREADS = ServerConfig().blas_threads
SLOTS = 4


def timed(call: Callable[[], Any], iters: int) -> tuple[float, float]:
    """p50 and p99 (microseconds) of `iters` calls, after iters // 10 warm-up calls that are not counted."""
    warmup, samples, clock = iters // 10, [], time.perf_counter
    for k in range(iters + warmup):
        t0 = clock()
        call()
        if k >= warmup:
            samples.append(clock() - t0)
    a = np.asarray(samples) * 1e6
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


# ---------------------------------------------------------------------------------------------- the bridge


def start_serve(policy: str, *extra: str, root: Path = ROOT) -> tuple[subprocess.Popen, dict[str, Any]]:
    """`village serve --policy POLICY --bind tcp://127.0.0.1:0 EXTRA...` run from the source tree `root`;
    returns the process and its `listening` log entry (endpoints under "zmq" / "ws", the first as "endpoint")."""
    cmd = [sys.executable, "-m", "village", "serve", "--policy", policy, "--bind", "tcp://127.0.0.1:0", *extra]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=root, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("event") == "listening":
            # keep reading its log so the server never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, entry
    raise RuntimeError(f"the bridge of {root} did not start (exit {proc.wait()})")


# ---------------------------------------------------------------------------------------------- the echo floor


def echo_reply(msg: dict[str, Any], step_template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A reply of the shape and size the bridge gives: act's actions (zeros), or a recorded session.step reply."""
    if msg.get("op") == "session.step" and step_template is not None:
        return {**step_template, "id": msg["id"]}
    rows = msg["obs"]["shape"][0]
    return P.ok_reply(msg["id"], actions=P.encode_array(np.zeros(rows, np.int32)), policy="echo")


def zmq_echo_server(endpoint_queue: mp.Queue, policy_spec: str | None = None, spin_us: int = 0,
                    step_template: dict[str, Any] | None = None) -> None:
    """A bare ROUTER: decode the body and answer `echo_reply`; with a policy, act's actions are its actions for
    the request's obs and mask (the echo plus the forward, nothing else). With spin_us, it polls for the next
    request that long before blocking, as `village serve --spin-us` does. `{"op": "quit"}` stops it."""
    policy = load_policy(policy_spec, slots=SLOTS) if policy_spec is not None else None
    if BLAS_THREADS is not None:
        set_blas_threads(BLAS_THREADS)
    gc.collect()  # as the bridge does before it serves
    gc.freeze()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    endpoint_queue.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    spin_s = spin_us / 1e6
    while True:
        if spin_s:
            spin_until_readable(sock, spin_s)  # exactly as the bridge waits
        frames = sock.recv_multipart()
        msg = P.unpack(frames[-1])
        if msg.get("op") == "quit":
            sock.send_multipart([*frames[:-1], P.pack({"ok": True})])
            break
        if policy is not None and msg.get("op") == "act":
            obs, mask = P.decode_array(msg["obs"], "obs"), P.decode_array(msg["mask"], "mask")
            actions = np.asarray(policy.act(obs, mask).actions, np.int32)
            reply = P.ok_reply(msg["id"], actions=P.encode_array(actions), policy="echo")
        else:
            reply = echo_reply(msg, step_template)
        sock.send_multipart([*frames[:-1], P.pack(reply)])
    sock.close(0)
    ctx.term()


# ---------------------------------------------------------------------------------------------- clients


class Door:
    """One client connection through one door ("zmq", "ws-msgpack", "ws-json"): `call(message)` encodes, sends,
    receives and decodes, the same way for an echo and for the bridge."""

    def __init__(self, kind: str, endpoint: str):
        self.kind = kind
        if kind == "zmq":
            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.REQ)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.connect(endpoint)
        else:
            from websockets.sync.client import connect

            self.ws = connect(endpoint, compression=None, max_size=None).__enter__()

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.kind == "zmq":
            self.sock.send(P.pack(message))
            return P.unpack(self.sock.recv())
        if self.kind == "ws-msgpack":
            self.ws.send(P.pack(message))
            return P.unpack(self.ws.recv())
        self.ws.send(json.dumps(_json_from_reply(message), separators=(",", ":")))
        return json.loads(self.ws.recv())

    def close(self) -> None:
        if self.kind == "zmq":
            self.sock.close(0)
            self.ctx.term()
        else:
            self.ws.close()


def _load_client(kind: str, endpoint: str, rows: int, obs_dim: int, n_actions: int, seconds: float,
                 start_at: float, results: mp.Queue) -> None:
    door = Door(kind, endpoint)
    rng = np.random.default_rng(os.getpid())
    message = P.request("act", 0, obs=rng.random((rows, obs_dim), dtype=np.float32),
                        mask=np.ones((rows, n_actions), bool))
    door.call({**message, "id": -1})
    while time.time() < start_at:
        time.sleep(0.001)
    done, k, end = 0, 0, time.time() + seconds
    while time.time() < end:
        k += 1
        reply = door.call({**message, "id": k})
        assert reply["ok"], reply
        done += rows
    door.close()
    results.put(done)


def decisions_per_s(client: Callable[..., None], args: tuple[Any, ...], clients: int, seconds: float,
                    start_delay_s: float = 4.0) -> float:
    """Run `clients` spawned processes of `client(*args, seconds, start_at, results)`, each of which starts at
    `start_at`, sends for `seconds` and puts the NPC decisions it got into `results`; the total per second."""
    ctx = mp.get_context("spawn")
    results: mp.Queue = ctx.Queue()
    start_at = time.time() + start_delay_s  # time for the spawned clients to import and connect
    procs = [ctx.Process(target=client, args=(*args, seconds, start_at, results)) for _ in range(clients)]
    for p in procs:
        p.start()
    total = sum(results.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(10)
    return total / seconds


def throughput(kind: str, endpoint: str, obs_dim: int, n_actions: int, clients: int, rows: int,
               seconds: float) -> float:
    """NPC decisions/s: `clients` spawned processes, each sending act(`rows`) back to back through one door."""
    return decisions_per_s(_load_client, (kind, endpoint, rows, obs_dim, n_actions), clients, seconds)
