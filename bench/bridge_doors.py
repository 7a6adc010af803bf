"""The bridge's doors side by side, in one run: ZeroMQ, WebSocket + msgpack, WebSocket + JSON.

    python bench/bridge_doors.py [--policy default] [--iters 1000] [--rounds 3] [--seconds 4] [--json]

Measures, every figure in the same run:
  1. act(16) and session.step(12 NPCs) round trips through each door of one `village serve --bind ... --ws ...`
     (one service behind both doors), p50 and p99, each against its own floor: a bare echo over the same
     transport in another process (it decodes the request and answers a reply of the same shape and size as the
     bridge's: act's actions, or a recorded session.step reply) plus the bare policy forward for the same rows;
  2. decisions/s with 8 client processes on each door, each sending act(64) back to back;
  3. act(16) with `--backend onnx` against the numpy backend: the bare forward of each, and the round trip
     through the ZeroMQ door of a server running each;
  4. the Godot add-on's act(16) round trip from GDScript (headless godot3-server, when installed).
Clients send pre-encoded-per-call requests the same way to the echo and to the bridge (encode, send, receive,
decode). Each measurement warms up first (a tenth, not counted); every figure is the median over `--rounds`
rounds, each round measuring echo and bridge of one door and op back to back. Load averages are printed: on a
shared machine the figures move with whatever else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _bridge_common import SLOTS, Door, echo_reply, start_serve, throughput, timed, zmq_echo_server  # noqa: E402

from bridge import protocol as P  # noqa: E402
from bridge.blas import set_blas_threads  # noqa: E402
from bridge.policies import layout, load_policy  # noqa: E402
from bridge.ws import _arrays_from_json, _json_from_reply  # noqa: E402

WORLD = ROOT / "worlds" / "data" / "village-v1.toml"
DOORS = ("zmq", "ws-msgpack", "ws-json")


# ---------------------------------------------------------------------------------------------- echo, clients


def _ws_echo(q: mp.Queue, step_template: dict[str, Any]) -> None:
    """The same library and asyncio loop as the WebSocket door, without the service behind it."""
    from websockets.asyncio.server import serve

    async def handler(ws: Any) -> None:
        async for frame in ws:
            if isinstance(frame, str):
                msg = _arrays_from_json(json.loads(frame))
                await ws.send(json.dumps(_json_from_reply(echo_reply(msg, step_template)), separators=(",", ":")))
            else:
                await ws.send(P.pack(echo_reply(P.unpack(frame), step_template)))

    async def main() -> None:
        async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
            q.put(f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}")
            await asyncio.Future()

    asyncio.run(main())


def _act_message(rid: int, rows: int, obs_dim: int, n_actions: int) -> dict[str, Any]:
    return P.request("act", rid, obs=np.zeros((rows, obs_dim), np.float32), mask=np.ones((rows, n_actions), bool))


def godot_round_trip(ws_endpoint: str, n: int) -> dict[str, Any] | None:
    godot = shutil.which("godot3-server")
    if godot is None:
        return None
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, LANG="C.UTF-8", VILLAGE_WS_URL=ws_endpoint, VILLAGE_WORLD=str(WORLD),
                   VILLAGE_BENCH_N=str(n))
        out = subprocess.run([godot, "--path", str(ROOT / "bridge" / "clients" / "godot"), "-s",
                              "res://tests/run_tests.gd"], capture_output=True, text=True, timeout=300, env=env)
    found = re.search(r"BENCH godot_act16_us n=(\d+) p50=(\d+) p99=(\d+)", out.stdout)
    return {"n": int(found.group(1)), "p50_us": int(found.group(2)), "p99_us": int(found.group(3))} if found else None


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="default", help="policy served (default: %(default)s)")
    parser.add_argument("--iters", type=int, default=1000, help="requests per measurement (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=4.0, help="throughput run per door (default: %(default)s)")
    parser.add_argument("--clients", type=int, default=8, help="client processes per door (default: %(default)s)")
    parser.add_argument("--rows", type=int, default=64, help="NPCs per request in the throughput runs")
    parser.add_argument("--godot-n", type=int, default=1000, help="act(16) round trips from GDScript")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    set_blas_threads(1)  # as the server does: small forwards, no BLAS hand-offs
    load_before = os.getloadavg()
    obs_names, action_names = layout(SLOTS)
    obs_dim, n_actions = len(obs_names), len(action_names)
    policy = load_policy(args.policy, slots=SLOTS)
    from npc_brains.export import onnx_policy

    onnx = onnx_policy(args.policy)
    bridge, listening = start_serve(args.policy, "--ws", "127.0.0.1:0", "--ws-rate", "0", "--ws-inflight", "4096")
    bridge_onnx, listening_onnx = start_serve(args.policy, "--backend", "onnx")
    endpoints = {"zmq": listening["zmq"], "ws-msgpack": listening["ws"], "ws-json": listening["ws"]}
    doors = {k: Door(k, e) for k, e in endpoints.items()}
    onnx_door = Door("zmq", listening_onnx["zmq"])
    world = WORLD.read_text(encoding="utf-8")
    sessions = {}
    for kind, door in doors.items():  # one session per door, so that their ticks do not interleave
        sessions[kind] = door.call(P.request("session.create", 1, world=world, seed=1))["session"]
        door.call(P.request("session.event", 2, session=sessions[kind], type="death", actor="player", target="Alda"))
    step_template = doors["zmq"].call(P.request("session.step", 3, session=sessions["zmq"]))
    ctx = mp.get_context("spawn")
    echo_q: mp.Queue = ctx.Queue()
    echoes = [ctx.Process(target=zmq_echo_server, args=(echo_q, None, 0, step_template), daemon=True),
              ctx.Process(target=_ws_echo, args=(echo_q, step_template), daemon=True)]
    for proc in echoes:
        proc.start()
    echo_endpoints = sorted((echo_q.get(timeout=60) for _ in echoes), key=lambda e: not e.startswith("tcp"))
    echo_doors = {"zmq": Door("zmq", echo_endpoints[0]), "ws-msgpack": Door("ws-msgpack", echo_endpoints[1]),
                  "ws-json": Door("ws-json", echo_endpoints[1])}
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}

    def record(key: str, value: tuple[float, float]) -> None:
        results.setdefault(key, {}).setdefault("rounds", []).append(value)

    obs16, mask16 = np.zeros((16, obs_dim), np.float32), np.ones((16, n_actions), bool)
    obs12, mask12 = np.zeros((12, obs_dim), np.float32), np.ones((12, n_actions), bool)
    rid = [10]

    def next_id() -> int:
        rid[0] += 1
        return rid[0]

    try:
        for _ in range(args.rounds):
            record("forward16:numpy", timed(lambda: policy.act(obs16, mask16), args.iters))
            record("forward16:onnx", timed(lambda: onnx.act(obs16, mask16), args.iters))
            record("forward12:numpy", timed(lambda: policy.act(obs12, mask12), args.iters))
            for kind in DOORS:
                for side, client in (("echo", echo_doors[kind]), ("bridge", doors[kind])):
                    record(f"act16:{kind}:{side}", timed(
                        lambda c=client: c.call(_act_message(next_id(), 16, obs_dim, n_actions)), args.iters))
                    record(f"step12:{kind}:{side}", timed(
                        lambda c=client, s=sessions[kind]: c.call(P.request("session.step", next_id(), session=s)),
                        args.iters))
            record("act16:zmq:bridge-onnx", timed(lambda: onnx_door.call(_act_message(next_id(), 16, obs_dim,
                                                                                        n_actions)), args.iters))
        rates = {kind: throughput(kind, endpoints[kind], obs_dim, n_actions, args.clients, args.rows, args.seconds)
                 for kind in DOORS}
        godot = godot_round_trip(listening["ws"], args.godot_n)
    finally:
        for d in (*doors.values(), *echo_doors.values(), onnx_door):
            d.close()
        for proc in (bridge, bridge_onnx):
            proc.terminate()
            proc.wait(10)
        for proc in echoes:
            proc.kill()
    load_after = os.getloadavg()

    med = {k: (float(np.median([r[0] for r in v["rounds"]])), float(np.median([r[1] for r in v["rounds"]])))
           for k, v in results.items()}
    report: dict[str, Any] = {"policy": args.policy, "rounds": args.rounds, "iters": args.iters,
                              "cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
                              "loadavg_after": [round(x, 2) for x in load_after], "doors": {}}
    print(f"bridge doors, policy {args.policy}, {args.rounds} rounds x {args.iters} requests, medians; "
          f"{os.cpu_count()} CPUs, load {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'':24s}{'p50 us':>9s}{'p99 us':>9s}{'floor p50':>11s}{'ratio':>7s}")
    for op, fwd in (("act16", "forward16:numpy"), ("step12", "forward12:numpy")):
        for kind in DOORS:
            echo, bridge_t = med[f"{op}:{kind}:echo"], med[f"{op}:{kind}:bridge"]
            floor = echo[0] + med[fwd][0]
            ratio = bridge_t[0] / floor
            report["doors"].setdefault(kind, {})[op] = {
                "p50_us": round(bridge_t[0], 1), "p99_us": round(bridge_t[1], 1), "echo_p50_us": round(echo[0], 1),
                "echo_p99_us": round(echo[1], 1), "forward_p50_us": round(med[fwd][0], 1),
                "floor_p50_us": round(floor, 1), "ratio_to_floor": round(ratio, 2)}
            print(f"{op + ' ' + kind:24s}{bridge_t[0]:9.0f}{bridge_t[1]:9.0f}{floor:11.0f}{ratio:7.2f}"
                  f"   (echo {echo[0]:.0f}/{echo[1]:.0f}, forward {med[fwd][0]:.0f})")
    for kind in DOORS:
        report["doors"][kind]["decisions_per_s"] = round(rates[kind])
        print(f"decisions/s, {args.clients} clients x act({args.rows}), {kind:10s}: {rates[kind]:,.0f}")
    fn, fo = med["forward16:numpy"], med["forward16:onnx"]
    rn, ro = med["act16:zmq:bridge"], med["act16:zmq:bridge-onnx"]
    report["onnx"] = {"forward16_numpy_p50_us": round(fn[0], 1), "forward16_onnx_p50_us": round(fo[0], 1),
                      "forward16_numpy_p99_us": round(fn[1], 1), "forward16_onnx_p99_us": round(fo[1], 1),
                      "act16_zmq_numpy_p50_us": round(rn[0], 1), "act16_zmq_onnx_p50_us": round(ro[0], 1),
                      "act16_zmq_numpy_p99_us": round(rn[1], 1), "act16_zmq_onnx_p99_us": round(ro[1], 1)}
    print(f"forward(16): numpy {fn[0]:.1f} us (p99 {fn[1]:.1f}), onnxruntime {fo[0]:.1f} us (p99 {fo[1]:.1f}); "
          f"act(16) over ZeroMQ: numpy backend {rn[0]:.0f} us, onnx backend {ro[0]:.0f} us (p50)")
    report["godot_act16"] = godot
    print("godot act(16) from GDScript: " + (f"p50 {godot['p50_us']} us, p99 {godot['p99_us']} us (n={godot['n']})"
                                            if godot else "not measured (godot3-server missing)"))
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
