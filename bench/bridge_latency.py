"""Bridge latency and throughput against its floor, all in one run.

    python bench/bridge_latency.py [--policy scripted|random|default|PATH] [--json]

Measures, side by side:
  1. a bare ZeroMQ + msgpack echo: a ROUTER in another process that decodes the request and answers a
     reply of the same shape as act's (the transport + codec floor), per batch size;
  2. a bare policy forward (policy.act on the same batch, in this process);
  3. the bridge's `act` for 1, 16 and 64 NPCs (`village serve` in another process, the Python client),
     p50 and p99, and the ratio of p50 to the floor (echo p50 + forward p50);
  4. throughput: 8 client processes each sending act(64) back to back for a few seconds; NPC decisions/s.
With --json the last line is one JSON object:
  {"floor_us", "act": {"1"|"16"|"64": {"p50_us", "p99_us", "ratio_to_floor", "floor_us"}},
   "decisions_per_s_8_clients", "policy", ...}
`floor_us` at the top is the floor of act(16), the size the targets refer to.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import zmq

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bridge import protocol as P  # noqa: E402
from bridge.client import BridgeClient  # noqa: E402
from bridge.policies import PolicyLoadError, layout, load_policy  # noqa: E402

SIZES = (1, 16, 64)
SLOTS = 4


def _percentiles(samples: list[float]) -> tuple[float, float]:
    a = np.asarray(samples) * 1e6
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


# ---------------------------------------------------------------------------------------------- echo


def _echo_server(endpoint_queue: mp.Queue, n_actions: int) -> None:
    """A bare ROUTER: decode the body, answer {"v","id","ok","actions"} of the request's row count."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    endpoint_queue.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    while True:
        frames = sock.recv_multipart()
        msg = P.unpack(frames[-1])
        if msg.get("op") == "quit":
            sock.send_multipart([*frames[:-1], P.pack({"ok": True})])
            break
        rows = msg["obs"]["shape"][0]
        actions = np.zeros(rows, np.int32)
        reply = P.pack(P.ok_reply(msg["id"], actions=P.encode_array(actions), policy="echo"))
        sock.send_multipart([*frames[:-1], reply])
    sock.close(0)
    ctx.term()


def measure_echo(obs_dim: int, n_actions: int, iters: int) -> dict[int, tuple[float, float]]:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_echo_server, args=(q, n_actions), daemon=True)
    proc.start()
    endpoint = q.get(timeout=60)
    zctx = zmq.Context()
    sock = zctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    out = {}
    rid = 0
    for n in SIZES:
        obs = np.zeros((n, obs_dim), np.float32)
        mask = np.ones((n, n_actions), bool)
        samples = []
        for k in range(iters + iters // 10):
            rid += 1
            t0 = time.perf_counter()
            sock.send(P.pack(P.request("act", rid, obs=obs, mask=mask)))
            reply = P.unpack(sock.recv())
            P.decode_array(reply["actions"], "actions")
            if k >= iters // 10:  # the first tenth warms up
                samples.append(time.perf_counter() - t0)
        out[n] = _percentiles(samples)
    sock.send(P.pack({"op": "quit"}))
    sock.recv()
    sock.close(0)
    zctx.term()
    proc.join(10)
    return out


# ---------------------------------------------------------------------------------------------- forward


def measure_forward(policy, obs_dim: int, n_actions: int, iters: int) -> dict[int, tuple[float, float]]:
    out = {}
    for n in SIZES:
        obs = np.zeros((n, obs_dim), np.float32)
        mask = np.ones((n, n_actions), bool)
        samples = []
        for k in range(iters + iters // 10):
            t0 = time.perf_counter()
            policy.act(obs, mask)
            if k >= iters // 10:
                samples.append(time.perf_counter() - t0)
        out[n] = _percentiles(samples)
    return out


# ---------------------------------------------------------------------------------------------- bridge


def start_bridge(policy: str) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "village", "serve", "--policy", policy, "--bind", "tcp://127.0.0.1:0"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("event") == "listening":
            # keep reading its log so the server never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, entry["endpoint"]
    raise RuntimeError(f"the bridge did not start (exit {proc.wait()})")


def measure_bridge(endpoint: str, obs_dim: int, n_actions: int, iters: int) -> dict[int, tuple[float, float]]:
    out = {}
    with BridgeClient(endpoint, timeout=10.0, retries=0) as client:
        for n in SIZES:
            obs = np.zeros((n, obs_dim), np.float32)
            mask = np.ones((n, n_actions), bool)
            samples = []
            for k in range(iters + iters // 10):
                t0 = time.perf_counter()
                client.act(obs, mask)
                if k >= iters // 10:
                    samples.append(time.perf_counter() - t0)
            out[n] = _percentiles(samples)
    return out


def _load_client(endpoint: str, rows: int, obs_dim: int, n_actions: int, seconds: float, start_at: float,
                 results: mp.Queue) -> None:
    obs = np.random.default_rng(0).random((rows, obs_dim), dtype=np.float32)
    mask = np.ones((rows, n_actions), bool)
    with BridgeClient(endpoint, timeout=10.0, retries=0) as client:
        client.ping()
        while time.time() < start_at:
            time.sleep(0.001)
        done = 0
        end = time.time() + seconds
        while time.time() < end:
            client.act(obs, mask)
            done += rows
        results.put(done)


def measure_throughput(endpoint: str, obs_dim: int, n_actions: int, clients: int, rows: int, seconds: float
                       ) -> float:
    ctx = mp.get_context("spawn")
    results: mp.Queue = ctx.Queue()
    start_at = time.time() + 3.0  # time for the spawned clients to import and connect
    procs = [ctx.Process(target=_load_client, args=(endpoint, rows, obs_dim, n_actions, seconds, start_at, results))
             for _ in range(clients)]
    for p in procs:
        p.start()
    total = sum(results.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(10)
    return total / seconds


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default=None,
                        help="policy to serve (default: 'default' when a trained policy loads, else scripted)")
    parser.add_argument("--iters", type=int, default=2000, help="requests per measurement (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=4.0, help="throughput run length (default: %(default)s)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rows", type=int, default=64, help="NPCs per request in the throughput run")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)

    obs_names, action_names = layout(SLOTS)
    obs_dim, n_actions = len(obs_names), len(action_names)
    spec = args.policy
    if spec is None:
        try:
            load_policy("default", slots=SLOTS)
            spec = "default"
        except PolicyLoadError as exc:
            print(f"note: no trained policy ({exc}); measuring with the scripted baseline")
            spec = "scripted"
    policy = load_policy(spec, slots=SLOTS)
    policy_name = str(getattr(policy, "name", spec))
    print(f"policy: {policy_name} ({spec}); obs_dim {obs_dim}, n_actions {n_actions}; {os.cpu_count()} CPUs")

    echo = measure_echo(obs_dim, n_actions, args.iters)
    forward = measure_forward(policy, obs_dim, n_actions, args.iters)
    proc, endpoint = start_bridge(spec)
    try:
        bridge = measure_bridge(endpoint, obs_dim, n_actions, args.iters)
        throughput = measure_throughput(endpoint, obs_dim, n_actions, args.clients, args.rows, args.seconds)
        with BridgeClient(endpoint, timeout=10.0) as client:
            batches = client.stats()["batches"]
    finally:
        proc.terminate()
        proc.wait(10)

    print(f"{'NPCs':>5} {'echo p50':>9} {'fwd p50':>8} {'floor':>8} {'act p50':>8} {'act p99':>8} {'ratio':>6}"
          "   (microseconds)")
    act = {}
    for n in SIZES:
        floor = echo[n][0] + forward[n][0]
        p50, p99 = bridge[n]
        act[str(n)] = {"p50_us": round(p50, 1), "p99_us": round(p99, 1), "ratio_to_floor": round(p50 / floor, 3),
                       "floor_us": round(floor, 1), "echo_p50_us": round(echo[n][0], 1),
                       "forward_p50_us": round(forward[n][0], 1)}
        print(f"{n:>5} {echo[n][0]:>9.1f} {forward[n][0]:>8.1f} {floor:>8.1f} {p50:>8.1f} {p99:>8.1f} "
              f"{p50 / floor:>6.2f}")
    print(f"throughput: {throughput:,.0f} NPC decisions/s with {args.clients} clients x act({args.rows}) "
          f"(server batches: {batches['requests_mean']} requests, {batches['rows_mean']} rows on average)")
    if args.json:
        print(json.dumps({
            "floor_us": act["16"]["floor_us"], "act": act, "decisions_per_s_8_clients": round(throughput),
            "policy": policy_name, "clients": args.clients, "rows_per_request": args.rows,
            "batch_requests_mean": batches["requests_mean"], "cpus": os.cpu_count(),
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
