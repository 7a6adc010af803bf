"""`village eval --policy default` prints the same figures as the recorded run (small settings, two seeds).

The reference files hold the JSON line of `village eval --policy default --seeds 4 --seed S --compare
scripted,random --json`; every figure must come out exactly the same, so an engine change that is meant to
keep behaviour is checked end to end (the trained policy, the scenario suite, the metrics).
"""

from __future__ import annotations

import json
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
    assert got == expected
