"""Average trained policies in weight space (a "model soup") and write the result as a policy file.

Fine-tunings of one parent (say, twelfth stages from the bundled FT51a with different levers or seeds) lie near
each other in weight space, and their mean can hold what each learned (Wortsman et al., 2022, "Model soups").
The result is an ordinary policy.pt: judge it like any candidate, on the validation worlds against its parent:

    python bench/weight_average.py --out runs/soup/S1.pt runs/FT51a/policy.pt runs/FT57b/policy.pt
    python bench/paired_eval.py --a runs/soup/S1.pt --b runs/FT51a/policy.pt --worlds validation:8 --seeds 16

`PATH@W` gives a policy weight W (1 by default). The first policy's config (its world, its training command)
goes with the result, which also records what it was averaged from.

`--tuning FIELD=VALUE` (repeatable) changes an engine field of the world the result plays in, on top of the first
policy's, and is recorded in the result's config (`config.tuning`) like a training flag. With it one policy is
enough: the result is that policy, playing in the changed world (the bundle in a world with grief held per loss:
`--out P.pt npc_brains/data/policies/default.pt --tuning grief_per_loss=true`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", metavar="PATH[@W]", help="policy files, each with an optional weight")
    parser.add_argument("--out", required=True, help="where to write the averaged policy file")
    parser.add_argument("--tuning", action="append", default=[], metavar="FIELD=VALUE",
                        help="engine field of the world the result plays in, changed on top of the first policy's "
                             "(repeatable; docs/engine.md); with it, one policy is enough")
    args = parser.parse_args(argv)
    args.parser = parser
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from npc_brains.checkpoint import CheckpointError, average_policies, load_checkpoint, payload_of, save_checkpoint
    from npc_brains.tuning import TuningError, engine_tuning
    from village.cli import UserError
    from village.cmd_train import _tuning_flags

    paths, weights = [], []
    for item in args.policies:
        path, _, weight = item.rpartition("@") if "@" in item else (item, "", "1")
        try:
            weights.append(float(weight))
        except ValueError:
            args.parser.error(f"{item}: the weight after @ must be a number, got {weight!r}")
        paths.append(path)
    try:
        overrides = _tuning_flags(args.tuning)
        if len(paths) == 1 and overrides:  # nothing to average: the policy itself, in another world
            payload = payload_of(load_checkpoint(paths[0]))
        else:
            payload = average_policies(paths, weights)
        if overrides:
            config = dict(payload.get("config") or {})
            tuning = dict(config.get("tuning") or {}) | overrides
            engine_tuning(tuning)  # names a bad field or value before anything is written
            payload["config"] = config | {"tuning": tuning}
    except (CheckpointError, UserError) as exc:
        args.parser.error(str(exc))
    except TuningError as exc:
        args.parser.error(f"--{exc}")
    try:
        written = save_checkpoint(args.out, payload)
    except OSError as exc:
        args.parser.error(f"--out {args.out}: cannot write it: {exc.strerror or exc}")
    changed = f", playing with {', '.join(args.tuning)}" if args.tuning else ""
    if len(paths) == 1:
        print(f"wrote {written}: {paths[0]}{changed}")
    else:
        print(f"wrote {written}: the weighted mean of {len(paths)} policies "
              f"({', '.join(f'{p} x {w:g}' for p, w in zip(paths, weights, strict=True))}){changed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
