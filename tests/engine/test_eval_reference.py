"""`village eval --policy default` prints the same figures as the recorded run (small settings, two seeds).

The reference files hold the JSON line of `village eval --policy default --seeds 4 --seed S --compare
scripted,random --json`; every figure must come out the same, so an engine change that is meant to keep
behaviour is checked end to end (the trained policy, the scenario suite, the metrics). Counts and rates must match
exactly in effect: one NPC's other choice moves a rate by far more than the tolerance, which is there for the
diversity (SND), a float32 network's probabilities whose last digits differ between CPUs.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_eval_of_the_default_policy_is_unchanged(seed):
    out = subprocess.run(
        [sys.executable, "-m", "village.cli", "eval", "--policy", "default", "--seeds", "4", "--seed", str(seed),
         "--compare", "scripted,random", "--quiet", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    expected = json.loads((DATA / f"eval_default_seed{seed}.json").read_text(encoding="utf-8"))
    assert same(got, expected), "the eval output differs from the reference (see the diff above)"


# relative tolerance on floats: float32 SND differs in its last digits between CPUs, a rate moves by 1e-3 or more
FLOAT_TOLERANCE = 1e-6


def same(got: object, expected: object, path: str = "") -> bool:
    """`got` equals `expected` key for key, floats within FLOAT_TOLERANCE; prints the first difference."""
    if isinstance(got, dict) and isinstance(expected, dict):
        if set(got) != set(expected):
            print(f"{path}: keys {sorted(set(got) ^ set(expected))} in one only")
            return False
        return all(same(got[k], expected[k], f"{path}/{k}") for k in expected)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(same(g, e, f"{path}[{i}]") for i, (g, e) in
                                                  enumerate(zip(got, expected, strict=True)))
    if isinstance(got, float) and isinstance(expected, float):
        if math.isclose(got, expected, rel_tol=FLOAT_TOLERANCE, abs_tol=1e-12):
            return True
    elif got == expected:
        return True
    print(f"{path}: {got!r} != {expected!r}")
    return False
