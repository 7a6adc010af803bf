"""The policy forward of `village serve`'s backends side by side, in one run: numpy, onnxruntime running the
exported graph, and onnxruntime running the graph torch's tracer writes (what `village export` wrote before
the actor was written node by node).

    python bench/bridge_forward.py [--policy default] [--rows 16] [--iters 2000] [--rounds 5] [--json]

Each round times every backend back to back, sampled (`act(obs, mask)`, what `act` requests without
`deterministic` run) and greedy; figures are medians over rounds of each round's p50 and p99, in
microseconds per call. The observations are recorded from the default policy's villages (the figures of
a network do not depend on them, but masks with some actions off are the realistic case). Load averages
are printed before and after: on a shared machine the figures move with whatever else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _bridge_common import timed  # noqa: E402

from bridge.blas import set_blas_threads  # noqa: E402
from bridge.policies import load_policy  # noqa: E402


def _traced_onnx(policy: str) -> bytes:
    """The export as torch's tracer writes it (the fallback of npc_brains.export for unknown actors)."""
    from npc_brains import export as E
    from npc_brains.networks import Actor
    from npc_brains.resolve import load_policy as load_torch

    tp = load_torch(policy, backend="torch")
    tp.actor.__class__ = type("TracedActor", (Actor,), {})
    return E.export_bytes(tp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="default", help="a trained policy: a name or a checkpoint path")
    parser.add_argument("--rows", type=int, default=16, help="NPCs per forward (act(16) by default)")
    parser.add_argument("--iters", type=int, default=2000, help="forwards per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; figures are medians over them")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.iters < 10 or args.rounds < 1:
        parser.error("--rows must be >= 1, --iters >= 10, --rounds >= 1")
    set_blas_threads(1)  # as the server does
    from npc_brains.export import OnnxPolicy, onnx_policy

    backends = {"numpy": load_policy(args.policy, slots=4), "onnx": onnx_policy(args.policy),
                "onnx-traced": OnnxPolicy(_traced_onnx(args.policy))}
    from engine.vec_env import make_vec_env

    env = make_vec_env("village-v1", num_envs=2, seed=5)
    obs, info = env.reset(5)
    for _ in range(30):  # past the scenario's killing, so that masks vary
        obs, _, _, _, info = env.step(backends["numpy"].act(obs, info["action_mask"]).actions)
    reps = -(-args.rows // len(obs))
    obs = np.ascontiguousarray(np.tile(obs, (reps, 1))[:args.rows], np.float32)
    mask = np.ascontiguousarray(np.tile(info["action_mask"], (reps, 1))[:args.rows], bool)
    load_before = os.getloadavg()
    rounds: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, policy in backends.items():
            rounds.setdefault(f"{name}:sampled", []).append(timed(lambda p=policy: p.act(obs, mask), args.iters))
            rounds.setdefault(f"{name}:greedy", []).append(
                timed(lambda p=policy: p.act(obs, mask, deterministic=True), args.iters))
    load_after = os.getloadavg()
    med = {k: (round(float(np.median([r[0] for r in v])), 1), round(float(np.median([r[1] for r in v])), 1))
           for k, v in rounds.items()}
    print(f"forward({args.rows}), policy {args.policy}, {args.rounds} rounds x {args.iters}, medians; "
          f"{os.cpu_count()} CPUs, load {load_before[0]:.2f} -> {load_after[0]:.2f}")
    print(f"{'':22s}{'p50 us':>9s}{'p99 us':>9s}")
    for key, (p50, p99) in med.items():
        print(f"{key:22s}{p50:9.1f}{p99:9.1f}")
    if args.json:
        print(json.dumps({"policy": args.policy, "rows": args.rows, "rounds": args.rounds, "iters": args.iters,
                          "cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
                          "loadavg_after": [round(x, 2) for x in load_after],
                          "p50_us": {k: v[0] for k, v in med.items()}, "p99_us": {k: v[1] for k, v in med.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
