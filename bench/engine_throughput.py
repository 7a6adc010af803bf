"""Engine throughput: NPC-steps per second of the batched village env, beside an MPE2 reference.

For every B (villages) x N (NPCs) it builds `make_vec_env(..., scenario="random_kill")`, warms up,
then times `env.step` with random valid actions drawn from the action mask by a seeded numpy RNG.
The drawing is timed separately, so three figures come out per row:

  env      VillageVecEnv.step alone (the tick, observations, masks, info, auto-reset): the headline
  sim      VillageSim.step alone (the tick and observations, without the vec env's info/reset work)
  +draw    env plus drawing the random actions from the masks

N=12 runs the bundled village-v1; any other N runs `generate_world(N, seed)`. The reference is
mpe2's simple_spread_v3 parallel env with N=12 agents and random actions, in agent-steps/s.

    python bench/engine_throughput.py                # readable table
    python bench/engine_throughput.py --json         # ... and a last line with one JSON object
    python bench/engine_throughput.py --ticks 50 --batches 1,64 --npcs 12
    python bench/engine_throughput.py --batches 512 --npcs 12 --against /tmp/base --pairs 3 --json

--against OTHER_CHECKOUT times this checkout's engine and the other's in turn (ABBA order, one process each,
with this harness and that checkout's code) and prints each run and the medians: a shared machine's speed
moves within minutes, so only runs made in the same minutes compare. Each run also reports cpu NPC-steps/s,
env.step per CPU second of its process, which other load on the machine disturbs less than the wall clock.

Figures depend on the machine and on what else runs on it; compare rows of one run, not runs of
different days.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script from a checkout: make its packages (or --code DIR's) importable
    _code = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv[:-1] else Path(__file__).parent.parent
    sys.path.insert(0, str(Path(_code).resolve()))

from engine import make_vec_env  # noqa: E402
from worlds import WorldSpec, generate_world, load_world  # noqa: E402

TARGET_NPC_STEPS = 500_000  # the target at B=512, N=12
DEFAULT_BATCHES = (1, 64, 512)
DEFAULT_NPCS = (12, 48)


def world_for(n: int, seed: int) -> tuple[WorldSpec, str]:
    if n == 12:
        return load_world("village-v1"), "village-v1"
    return generate_world(n, seed), f"generated:{n}:{seed}"


def bench_village(spec: WorldSpec, world_name: str, batch: int, ticks: int, warmup: int, seed: int) -> dict:
    """Time `ticks` steps of B villages after `warmup` untimed ones."""
    env = make_vec_env(spec, num_envs=batch, seed=seed, scenario="random_kill")
    sim_seconds = 0.0
    sim_step = env.sim.step

    def timed_sim_step(actions: np.ndarray) -> None:
        nonlocal sim_seconds
        t0 = time.perf_counter()
        sim_step(actions)
        sim_seconds += time.perf_counter() - t0

    env.sim.step = timed_sim_step  # instance attribute: the vec env calls self.sim.step
    rng = np.random.default_rng(seed)
    _, info = env.reset()

    def draw(mask: np.ndarray) -> np.ndarray:
        return (rng.random(mask.shape) * mask).argmax(-1)  # uniform over allowed actions

    for _ in range(warmup):
        _, _, _, _, info = env.step(draw(info["action_mask"]))
    sim_seconds = 0.0
    env_seconds = draw_seconds = cpu_seconds = 0.0
    for _ in range(ticks):
        t0 = time.perf_counter()
        actions = draw(info["action_mask"])
        t1 = time.perf_counter()
        c1 = time.process_time()
        _, _, _, _, info = env.step(actions)
        cpu_seconds += time.process_time() - c1
        t2 = time.perf_counter()
        draw_seconds += t1 - t0
        env_seconds += t2 - t1
    steps = batch * env.num_agents * ticks
    return {
        "B": batch,
        "N": env.num_agents,
        "world": world_name,
        "ticks": ticks,
        "npc_steps_per_s": steps / env_seconds,
        "sim_npc_steps_per_s": steps / sim_seconds,
        "cpu_npc_steps_per_s": steps / max(cpu_seconds, 1e-9),  # env.step per CPU second of this process
        "with_sampling_npc_steps_per_s": steps / (env_seconds + draw_seconds),
        "ms_per_tick": 1000.0 * env_seconds / ticks,
    }


def bench_mpe(agents: int, ticks: int, warmup: int, seed: int) -> dict:
    """mpe2 simple_spread_v3 (parallel API) with random discrete actions, env.step timed alone."""
    name = f"mpe2 simple_spread_v3 N={agents}"
    try:
        from mpe2 import simple_spread_v3
    except ImportError:
        return {"name": name, "agent_steps_per_s": None, "error": "mpe2 is not installed (pip install mpe2)"}
    episode = 100
    env = simple_spread_v3.parallel_env(N=agents, max_cycles=episode)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    n_moves = {a: int(env.action_space(a).n) for a in env.possible_agents}
    seconds, steps = 0.0, 0
    for k in range(warmup + ticks):
        if not env.agents:
            env.reset(seed=seed + k)
        actions = {a: int(rng.integers(n_moves[a])) for a in env.agents}
        t0 = time.perf_counter()
        env.step(actions)
        if k >= warmup:
            seconds += time.perf_counter() - t0
            steps += len(actions)
    env.close()
    return {"name": name, "agent_steps_per_s": steps / seconds, "ticks": ticks}


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value

    return parse


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def one_checkout_run(checkout: Path, args: argparse.Namespace) -> dict[str, float]:
    """One run of `checkout`'s bench in its own process: env NPC-steps/s (wall clock) and cpu NPC-steps/s (per
    CPU second of the process, which other load on the machine disturbs less) per B and N."""
    command = [sys.executable, str(Path(__file__).resolve()), "--code", str(checkout), "--json",
               "--repeats", str(args.repeats),
               "--ticks", str(args.ticks),
               "--warmup", str(args.warmup), "--seed", str(args.seed),
               "--batches", ",".join(map(str, args.batches)), "--npcs", ",".join(map(str, args.npcs))]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(command, cwd=checkout, capture_output=True, text=True, env=env)  # its code, this harness
    if out.returncode != 0:
        raise SystemExit(f"engine_throughput: the run in {checkout} failed:\n{out.stderr.strip()[-2000:]}")
    rows = json.loads(out.stdout.strip().splitlines()[-1])["results"]
    return {f"{key} B={r['B']},N={r['N']}": r[field] for r in rows
            for key, field in (("env", "npc_steps_per_s"), ("cpu", "cpu_npc_steps_per_s"))}


def compare_checkouts(args: argparse.Namespace) -> int:
    sides = {"this": Path(__file__).resolve().parent.parent, "other": args.against.resolve()}
    runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    for i in range(args.pairs):
        for side in ("this", "other") if i % 2 == 0 else ("other", "this"):
            runs[side].append(one_checkout_run(sides[side], args))
            print(f"{side:5s} " + "  ".join(f"{k}: {fmt(v)}" for k, v in runs[side][-1].items()), flush=True)
    summary = {side: {"checkout": str(sides[side]),
                      "median_npc_steps_per_s": {k: statistics.median(r[k] for r in rs) for k in rs[0]},
                      "runs": [{k: round(v) for k, v in r.items()} for r in rs]} for side, rs in runs.items()}
    for side, row in summary.items():
        medians = "  ".join(f"{k}: {fmt(v)}" for k, v in row["median_npc_steps_per_s"].items())
        print(f"{side}: median {medians} NPC-steps/s ({row['checkout']})")
    if args.json:
        print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="engine_throughput",
        description="NPC-steps/s of the batched village env (random valid actions, scenario random_kill) "
        "for B villages x N NPCs, beside mpe2 simple_spread_v3 (N=12) agent-steps/s.",
    )
    parser.add_argument("--ticks", type=int_at_least(1), default=200,
                        help="timed ticks per configuration (default 200)")
    parser.add_argument("--warmup", type=int_at_least(0), default=10, help="untimed ticks first (default 10)")
    parser.add_argument("--batches", type=int_list, default=list(DEFAULT_BATCHES),
                        help="comma-separated villages per batch (default 1,64,512)")
    parser.add_argument("--npcs", type=int_list, default=list(DEFAULT_NPCS),
                        help="comma-separated NPC counts; 12 = village-v1, others generated (default 12,48)")
    parser.add_argument("--seed", type=int, default=0, help="seed of worlds, sims and action draws (default 0)")
    parser.add_argument("--repeats", type=int_at_least(1), default=3,
                        help="runs per configuration; the fastest is reported, as timeit does, because a shared "
                        "machine only ever slows a run down (default 3)")
    parser.add_argument("--json", action="store_true", help="end with one line holding a JSON object")
    parser.add_argument("--against", type=Path, metavar="CHECKOUT",
                        help="compare with another checkout: run both in turn, ABBA order, each run one process "
                        "(e.g. a `git worktree add /tmp/base <commit>`)")
    parser.add_argument("--code", type=Path, metavar="DIR",
                        help="import the engine from checkout DIR instead of this one (what --against uses)")
    parser.add_argument("--pairs", type=int_at_least(1), default=3,
                        help="with --against: runs of each checkout (default 3)")
    args = parser.parse_args(argv)
    if args.against is not None:
        if not (args.against / "engine" / "__init__.py").is_file():
            parser.error(f"--against: {args.against} is not a checkout of this project (no engine/)")
        return compare_checkouts(args)

    worlds = []
    for n in args.npcs:
        try:
            worlds.append(world_for(n, args.seed))
        except ValueError as exc:  # WorldError: an N the generator does not support
            parser.error(f"--npcs {n}: {exc}")

    print(f"engine throughput: {args.ticks} timed ticks after {args.warmup} warm-up ticks, scenario random_kill; "
          f"{os.cpu_count()} CPUs visible, numpy {np.__version__}, Python {platform.python_version()}; engine from "
          f"{Path(sys.modules['engine'].__file__).parent.parent}")
    print(f"figures vary with machine load; each row is the fastest of {args.repeats} runs; "
          "compare rows within one run")
    header = f"{'B':>5} {'N':>4}  {'world':<16} {'env NPC-steps/s':>16} {'sim only':>12} {'+draw':>12} {'ms/tick':>9}"
    print(header)
    print("-" * len(header))
    results = []
    for spec, world_name in worlds:
        for batch in args.batches:
            runs = [bench_village(spec, world_name, batch, args.ticks, args.warmup, args.seed)
                    for _ in range(args.repeats)]
            row = max(runs, key=lambda r: r["npc_steps_per_s"])
            row["all_runs_npc_steps_per_s"] = [round(r["npc_steps_per_s"]) for r in runs]
            results.append(row)
            print(f"{row['B']:>5} {row['N']:>4}  {world_name:<16} {fmt(row['npc_steps_per_s']):>16} "
                  f"{fmt(row['sim_npc_steps_per_s']):>12} {fmt(row['with_sampling_npc_steps_per_s']):>12} "
                  f"{row['ms_per_tick']:>9.2f}", flush=True)
    references = [bench_mpe(12, args.ticks, args.warmup, args.seed) for _ in range(args.repeats)]
    reference = max(references, key=lambda r: r["agent_steps_per_s"] or 0.0)
    print("-" * len(header))
    if reference["agent_steps_per_s"] is None:
        print(f"reference: {reference['name']}: {reference['error']}")
    else:
        print(f"reference: {reference['name']}: {fmt(reference['agent_steps_per_s'])} agent-steps/s (env.step only)")
    target_row = next((r for r in results if r["B"] == 512 and r["N"] == 12), None)
    if target_row is not None:
        ratio = target_row["npc_steps_per_s"] / TARGET_NPC_STEPS
        print(f"target: >= {TARGET_NPC_STEPS:,} NPC-steps/s at B=512, N=12; measured "
              f"{fmt(target_row['npc_steps_per_s'])} ({ratio:.0%} of target)")
    if args.json:
        print(json.dumps({"results": results, "reference": reference}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
