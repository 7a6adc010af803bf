"""Frame time of the sandbox, headless (SDL dummy driver), with 12, 50 and 200 NPCs, policy included, at 1x.

Each frame is what the interactive loop does: input events, the ticks due (policy + engine step, from
the fixed-step clock fed 1/60 s per frame), and drawing the whole screen. At 1x a tick falls every
30 frames, so the median is a drawing frame; the tick cost is reported beside it.

    python bench/sandbox_fps.py [--frames 600] [--policy default] [--graph] [--json]

With --json the last line is {"frame_ms": {"12": ..., "50": ..., "200": ...}, ...} (medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["SDL_VIDEODRIVER"] = "dummy"
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

WORLDS = {"12": "village-v1", "50": "generated:50:0", "200": "generated:200:0"}


def measure(world: str, policy: str, frames: int, warmup: int, graph: bool, size: tuple[int, int]) -> dict:
    import pygame

    from engine.vec_env import resolve_world
    from sandbox.app import SandboxApp
    from sandbox.model import SandboxModel

    model = SandboxModel(resolve_world(world), policy=policy, seed=0, scenario="world")
    app = SandboxApp(model, size=size, headless=True, speed=1)
    app.ui.show_graph = graph
    app.ui.selected = 0  # the inspector is part of the frame
    dt = 1.0 / 60.0
    frame_ms: list[float] = []
    tick_ms: list[float] = []
    try:
        for k in range(warmup + frames):
            start = time.perf_counter()
            for event in pygame.event.get():
                app.handle_event(event)
            ticks = app.update(dt)
            after_ticks = time.perf_counter()
            app.draw()
            pygame.display.flip()
            end = time.perf_counter()
            if k >= warmup:
                frame_ms.append((end - start) * 1e3)
                if ticks:
                    tick_ms.append((after_ticks - start) * 1e3 / ticks)
    finally:
        app.close()
    frame_ms.sort()
    return {
        "npcs": model.sim.N,
        "frame_ms_median": statistics.median(frame_ms),
        "frame_ms_mean": statistics.fmean(frame_ms),
        "frame_ms_p95": frame_ms[int(0.95 * (len(frame_ms) - 1))],
        "frame_ms_max": frame_ms[-1],
        "tick_ms_median": statistics.median(tick_ms) if tick_ms else float("nan"),
        "ticks": len(tick_ms),
        "policy": model.source.name,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600, help="measured frames per world (default 600)")
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--policy", default="default", help="default, scripted, random or a checkpoint path")
    parser.add_argument("--graph", action="store_true", help="with the social-graph overlay on")
    parser.add_argument("--size", default="1280x800")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of median frame times")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.warmup < 0:
        parser.error("--frames must be >= 1 and --warmup >= 0")
    size = tuple(int(v) for v in args.size.split("x"))
    results = {}
    print(f"sandbox frame time, headless {args.size}, 1x (a tick every 30 frames), policy {args.policy}, "
          f"graph overlay {'on' if args.graph else 'off'}")
    print(f"{'NPCs':>5} {'median ms':>10} {'mean ms':>8} {'p95 ms':>7} {'max ms':>7} {'fps(median)':>11} "
          f"{'tick ms':>8}  world")
    for key, world in WORLDS.items():
        r = measure(world, args.policy, args.frames, args.warmup, args.graph, size)  # type: ignore[arg-type]
        results[key] = r
        print(f"{r['npcs']:>5} {r['frame_ms_median']:>10.2f} {r['frame_ms_mean']:>8.2f} {r['frame_ms_p95']:>7.2f} "
              f"{r['frame_ms_max']:>7.2f} {1e3 / r['frame_ms_median']:>11.0f} {r['tick_ms_median']:>8.2f}  "
              f"{world} ({r['policy']})")
    if args.json:
        print(json.dumps({
            "frame_ms": {k: round(r["frame_ms_median"], 3) for k, r in results.items()},
            "frame_ms_p95": {k: round(r["frame_ms_p95"], 3) for k, r in results.items()},
            "tick_ms": {k: round(r["tick_ms_median"], 3) for k, r in results.items()},
            "policy": results["12"]["policy"],
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
