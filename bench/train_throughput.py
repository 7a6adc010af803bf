"""Training throughput: env alone, env + inference + update (NPC-steps/s), and one policy update with 16 agents.

    python bench/train_throughput.py [--device cpu|cuda|auto] [--json] [--updates 6] [--repeats 3]

The training figure runs the real trainer (Dr. MAS, double buffering) for a few updates and measures the
steady state (after the shaping phase and the first, warm-up updates). The update latency is one
`Trainer.learn()` (sync check, GAE, every PPO epoch and minibatch) on a batch from a generated 16-NPC world.
With --json the last line is {"device", "npc_steps_per_s", "update_ms_16_agents", ...}. On a shared machine the
figures move with the load: --repeats N runs the training measurement N times and reports the median (and every
run), with the median time per update spent collecting (in the background thread) and learning.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def env_only(num_envs: int, ticks: int) -> float:
    from engine import make_vec_env

    env = make_vec_env("village-v1", num_envs=num_envs, seed=0)
    _, info = env.reset(0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        _, _, _, _, info = env.step((rng.random(info["action_mask"].shape) * info["action_mask"]).argmax(1))
    start = time.perf_counter()
    for _ in range(ticks):
        m = info["action_mask"]
        _, _, _, _, info = env.step((rng.random(m.shape) * m).argmax(1))
    return env.num_rows * ticks / (time.perf_counter() - start)


def train_loop(device: str, updates: int, **overrides) -> tuple[float, dict]:
    from npc_brains.config import TrainConfig
    from npc_brains.metrics import read_metrics
    from npc_brains.trainer import MAX_AUTO_ENVS, Trainer

    with tempfile.TemporaryDirectory() as tmp:
        # a long run's defaults: as many villages as --envs auto takes for it, the default rollout
        base = dict(algo="drmas", envs=MAX_AUTO_ENVS, device=device, run_dir=tmp, shaping_anneal=0,
                    checkpoint_every=10_000)
        if device == "cpu" and (os.cpu_count() or 1) > 1 and overrides.get("double_buffer", True):
            base["collector"] = "process"  # what --collector auto takes for a run longer than this measurement
        base.update(overrides)
        probe = TrainConfig(steps=1, **base)
        rows_per_update = probe.envs * 12 * probe.rollout
        cfg = TrainConfig(steps=rows_per_update * updates, **base)
        trainer = Trainer(cfg)
        wall, cpu = time.perf_counter(), os.times()
        trainer.train()
        wall, cpu_after = time.perf_counter() - wall, os.times()
        # how busy the cores were over the whole run (warm-up included): CPU seconds / (wall x cores), the
        # collector's child process included (it has ended and been waited for when train() returns)
        used = sum(getattr(cpu_after, k) - getattr(cpu, k) for k in ("user", "system", "children_user",
                                                                      "children_system"))
        busy = used / (wall * (os.cpu_count() or 1))
        rows = [r for r in read_metrics(Path(tmp) / "metrics.jsonl") if "event" not in r]
        warm = 2  # the first updates pay for allocations and lazy initialisation
        span = rows[-1]["time_s"] - rows[warm - 1]["time_s"]
        sps = (rows[-1]["step"] - rows[warm - 1]["step"]) / span
        c = trainer.cfg
        return sps, {"collect_s": round(statistics.median(r["collect_s"] for r in rows[warm:]), 3),
                     "update_s": round(statistics.median(r["update_s"] for r in rows[warm:]), 3),
                     "algo": c.algo, "threads": c.threads, "envs": c.envs, "rollout": c.rollout, "epochs": c.epochs,
                     "minibatches": c.minibatches, "hidden": c.hidden, "double_buffer": c.double_buffer,
                     "rows_per_update": trainer.rows_per_update, "cpu_busy": round(busy, 3),
                     "collector": trainer.collector_kind}


def update_latency(device: str, repeats: int, **overrides) -> tuple[float, dict]:
    from npc_brains.config import TrainConfig
    from npc_brains.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        base = dict(world="generated:16:0", algo="drmas", envs=16, rollout=64, steps=10**9, device=device,
                    run_dir=tmp, double_buffer=False)
        base.update(overrides)
        trainer = Trainer(TrainConfig(**base))
        batch = trainer.collector.collect(False)
        trainer.global_step = 10**8  # past the shaping phase: measure the steady-state update
        trainer.learn(batch)  # warm-up
        times = []
        for _ in range(repeats):
            if trainer.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            start = time.perf_counter()
            trainer.learn(batch)
            if trainer.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        c = trainer.cfg
        return statistics.median(times) * 1000, {"agents": trainer.N, "rows": trainer.rows_per_update,
                                                 "epochs": c.epochs, "minibatches": c.minibatches,
                                                 "hidden": c.hidden}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto (default cpu)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--updates", type=int, default=6, help="updates in the training measurement")
    parser.add_argument("--repeats", type=int, default=1, help="training measurements (the median is reported)")
    parser.add_argument("--hidden", type=int, default=None, help="network width (default: the trainer's)")
    parser.add_argument("--epochs", type=int, default=None, help="PPO epochs (default: the trainer's)")
    parser.add_argument("--minibatches", type=int, default=None, help="minibatches (default: the trainer's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any other trainer option, e.g. --set threads=2 --set double_buffer=false")
    args = parser.parse_args()
    overrides = {k: v for k, v in (("hidden", args.hidden), ("epochs", args.epochs),
                                   ("minibatches", args.minibatches)) if v is not None}
    import tomllib

    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
    import torch

    from npc_brains.trainer import pick_device

    device = str(pick_device(args.device))
    from npc_brains.trainer import MAX_AUTO_ENVS

    env_sps = env_only(MAX_AUTO_ENVS, 100)
    print(f"env only ({MAX_AUTO_ENVS} villages x 12 NPCs, random valid actions): {env_sps:,.0f} NPC-steps/s")
    runs = [train_loop(device, max(args.updates, 3), **overrides) for _ in range(max(args.repeats, 1))]
    all_sps = [r[0] for r in runs]
    sps = statistics.median(all_sps)
    cfg = dict(runs[all_sps.index(sorted(all_sps)[(len(all_sps) - 1) // 2])][1])
    spread = f" (runs: {', '.join(f'{x:,.0f}' for x in all_sps)})" if len(runs) > 1 else ""
    print(f"training (env + inference + update) on {device}: {sps:,.0f} NPC-steps/s{spread}  {cfg}")
    ms, ucfg = update_latency(device, 3, **overrides)
    print(f"one policy update, 16 agents on {device}: {ms:.0f} ms  {ucfg}")
    if args.json:
        print(json.dumps({"device": device, "npc_steps_per_s": round(sps), "update_ms_16_agents": round(ms, 1),
                          "npc_steps_per_s_runs": [round(x) for x in all_sps],
                          "env_only_npc_steps_per_s": round(env_sps), "torch_threads": torch.get_num_threads(),
                          "train_config": cfg, "update_config": ucfg}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
