"""Shared by the QMIX and MADDPG tests: train on the tiny matching task, play the greedy policy, kill -9 a
`village train` run and resume it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np

from npc_brains.algorithms import make_trainer
from npc_brains.checkpoint import load_checkpoint
from npc_brains.config import TrainConfig
from npc_brains.envs import make_flat_env
from npc_brains.metrics import read_metrics
from npc_brains.runtime import load_policy_file
from tests.npc_brains.test_cli_train import start, wait_for_rows

TINY = "tests.npc_brains.tiny_env:make_env"
ROOT = Path(__file__).resolve().parents[2]


def greedy_reward_per_step(policy_path: Path, episodes: int = 40, seed: int = 123) -> float:
    """Mean reward per agent-step of the greedy policy on held-out tiny-task episodes (a policy of another
    environment than the village loads as a file: `load_policy`'s names and village checks do not apply)."""
    policy = load_policy_file(policy_path)
    env = make_flat_env(TrainConfig(env=TINY), num_envs=episodes, seed=seed)
    obs, info = env.reset(seed)
    total, steps = 0.0, 0
    for _ in range(8):
        a = policy.act(obs, info["action_mask"], deterministic=True).actions
        obs, r, _, _, info = env.step(a)
        total += float(r.sum())
        steps += r.size
    return total / steps


def train_tiny(algo: str, run_dir: Path, steps: int, **options) -> Path:
    cfg = TrainConfig(env=TINY, algo=algo, steps=steps, envs=8, device="cpu", run_dir=str(run_dir), seed=0,
                      hidden=32, intent_dim=16, **options)
    make_trainer(cfg, tensorboard=False).train()
    return run_dir / "policy.pt"


def kill_9_then_resume(tmp_path: Path, village, algo: str) -> None:
    args = ["--env", TINY, "--algo", algo, "--envs", "4", "--batch-episodes", "4", "--run-dir", str(tmp_path),
            "--checkpoint-every", "2", "--no-progress", "--device", "cpu", "--hidden", "16"]
    proc = start(*args, "--steps", "1000000")
    wait_for_rows(tmp_path, 7, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    step, update = ckpt["progress"]["global_step"], ckpt["progress"]["update"]
    stored = int(ckpt["replay"]["size"])
    assert update >= 2 and update % 2 == 0 and stored > 0
    rows_per_update = step // update
    target = step + 3 * rows_per_update
    code, err = village(*args, "--resume", "--steps", str(target))
    assert code == 0, err
    assert f"resuming at step {step}" in err
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert steps == list(range(rows_per_update, target + 1, rows_per_update))  # no gaps, no duplicates
    final = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert final["progress"]["global_step"] == target and final["progress"]["update"] == update + 3
    assert int(final["replay"]["added"]) > int(ckpt["replay"]["added"])  # the replay went on from the stored one
    assert int(final["replay"]["size"]) >= stored
    assert np.isfinite([r.get("td_error") or 0.0 for r in read_metrics(tmp_path / "metrics.jsonl")]).all()


def run_village_train(capsys, *args: str):
    """`village train ...` in this process; (exit code, stderr)."""
    from village.cli import main

    capsys.readouterr()
    code = main(["train", *args])
    return code, capsys.readouterr().err
