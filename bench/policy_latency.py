"""Policy inference latency on CPU: one batched `act()` for 16 NPCs (goal: median <= 100 us).

    python bench/policy_latency.py [--policy PATH|default] [--blas-threads 1] [--json] [--calls 2000]

Uses the given policy file, else the bundled default, else a freshly initialised Dr. MAS network with the
village-v1 layout (latency does not depend on the weights). Observations and masks are real ones from the
village. Compares the numpy runtime (what load_policy returns) with the torch backend.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def fresh_policy_file(directory: str) -> Path:
    from npc_brains.checkpoint import save_checkpoint
    from npc_brains.config import TrainConfig
    from npc_brains.trainer import Trainer

    trainer = Trainer(TrainConfig(steps=1, envs=1, rollout=1, run_dir=directory, device="cpu", double_buffer=False))
    return save_checkpoint(Path(directory) / "fresh.pt", trainer.policy_payload())


def measure(variants: dict[str, Callable[[], Any]], calls: int) -> dict[str, list[float]]:
    """Microseconds per call of each variant, calls interleaved (one of each in turn), so that a machine
    whose speed drifts (a shared VM) slows every variant alike instead of whichever ran last."""
    for _ in range(200):
        for call in variants.values():
            call()
    times: dict[str, list[float]] = {name: [] for name in variants}
    clock = time.perf_counter_ns
    for _ in range(calls):
        for name, call in variants.items():
            start = clock()
            call()
            times[name].append((clock() - start) / 1000)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=None, help="policy file or 'default' (default: bundled, else fresh)")
    parser.add_argument("--calls", type=int, default=2000, help="calls of each variant (default: %(default)s)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="numpy BLAS threads: 1 as `village serve` runs the forward (default), 0 = leave the "
                             "library's default (on a small machine its worker threads slow small products)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    import torch

    from bridge.blas import get_blas_threads, set_blas_threads

    if args.blas_threads > 0:
        set_blas_threads(args.blas_threads)
    threads = get_blas_threads()

    from engine import make_vec_env
    from npc_brains import bundled_policy, load_policy

    default_path = bundled_policy("default")

    torch.set_num_threads(1)  # tiny batches: threads only add synchronisation
    with tempfile.TemporaryDirectory() as tmp:
        path = args.policy or ("default" if default_path.is_file() else str(fresh_policy_file(tmp)))
        source = "fresh network" if args.policy is None and path != "default" else path
        fast = load_policy(path, seed=0)
        ref = load_policy(path, seed=0, backend="torch")
    env = make_vec_env("village-v1", num_envs=22, seed=0)
    obs, info = env.reset(0)
    mask = info["action_mask"]
    results: dict[str, float] = {}
    for batch in (1, 16, 64, 256):
        o, m = obs[:batch], mask[:batch]
        t = measure({"sample": lambda o=o, m=m: fast.act(o, m),
                     "det": lambda o=o, m=m: fast.act(o, m, deterministic=True),
                     "full": lambda o=o, m=m: fast.act(o, m, with_probs=True, with_values=True)}, args.calls)
        t_np, t_det, t_full = t["sample"], t["det"], t["full"]
        t_torch = measure({"torch": lambda o=o, m=m: ref.act(o, m)}, max(args.calls // 4, 10))["torch"]
        med = statistics.median
        print(f"batch {batch:4d}: numpy sample {med(t_np):7.1f} us (p90 {np.percentile(t_np, 90):7.1f}), "
              f"argmax {med(t_det):7.1f} us, +probs+values {med(t_full):7.1f} us | torch {med(t_torch):7.1f} us")
        if batch == 16:
            results = {"median_us": med(t_np), "p90_us": float(np.percentile(t_np, 90)),
                       "deterministic_median_us": med(t_det), "with_probs_values_median_us": med(t_full),
                       "torch_median_us": med(t_torch)}
    print(f"numpy BLAS threads: {threads if threads is not None else 'unknown'}")
    print(f"policy: {source}; goal for 16 NPCs: median <= 100 us -> "
          f"{'met' if results['median_us'] <= 100 else 'NOT met'} ({results['median_us']:.1f} us)")
    if args.json:
        print(json.dumps({"batch": 16, "backend": "numpy", "policy": source, "blas_threads": threads,
                          **{k: round(v, 1) for k, v in results.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
