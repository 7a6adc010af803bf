"""Rollout workers as Ray actors, the longer checks: the batches repeat for a fixed seed and K (and K = 1 is the
in-process collector, to the trained weights), `village train --ray` and `village eval --ray` from the command
line (the same JSON as without Ray), and Ctrl-C ends the workers. One local Ray for the module; the Ctrl-C run
starts its own."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray")

from npc_brains.collect import Collector  # noqa: E402
from npc_brains.distributed import RayOptions  # noqa: E402
from npc_brains.metrics import read_metrics  # noqa: E402
from npc_brains.trainer import Trainer  # noqa: E402
from tests.npc_brains.ray_helpers import OPTIONS, local_ray, ray_cfg  # noqa: E402, F401
from village.cli import main  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TINY = "tests.npc_brains.tiny_env:make_env"
def test_one_worker_collects_the_in_process_batches_and_k_workers_repeat_theirs(tmp_path):
    thread = Trainer(ray_cfg(tmp_path / "t"), tensorboard=False)
    local = Collector(thread.env, thread.brain.actor, torch.device("cpu"), thread._env_seed, 8, False)
    expected = [local.collect(True) for _ in range(2)]
    one = Trainer(ray_cfg(tmp_path / "r"), tensorboard=False, ray=RayOptions(workers=1, **OPTIONS))
    collector = one._start_rollouts()
    try:
        got = [collector.collect(True) for _ in range(2)]
    finally:
        collector.close()
    for a, b in zip(expected, got, strict=True):
        for key in ("obs", "mask", "actions", "logp", "rewards", "dones", "alive", "state", "probs"):
            assert torch.equal(getattr(a, key), getattr(b, key)), key
        assert torch.equal(a.next_obs, b.next_obs) and torch.equal(a.cond_table, b.cond_table)
    runs = []
    for name in ("a", "b"):
        trainer = Trainer(ray_cfg(tmp_path / name, envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
        collector = trainer._start_rollouts()
        try:
            runs.append([collector.collect(False).actions for _ in range(2)])
        finally:
            collector.close()
    assert all(torch.equal(x, y) for x, y in zip(*runs, strict=True))
    assert not torch.equal(runs[0][0][:, :12], runs[0][0][:, 12:])  # the two workers play different villages




def test_two_replay_workers_fill_the_same_replay_run_after_run(tmp_path):
    from npc_brains.algorithms import make_trainer
    from tests.npc_brains.test_ray import replay_cfg

    replays = []
    for name in ("a", "b"):
        trainer = make_trainer(replay_cfg(tmp_path / name, envs=2), tensorboard=False,
                               ray=RayOptions(workers=2, envs_per_worker=2, **OPTIONS))
        rounds = trainer._start_rollouts()
        try:
            for _ in range(3):
                trainer.collect_round()
                trainer.learn(4)  # weights change between rounds, as in training
        finally:
            rounds.close()
        replays.append(trainer.replay.state_dict())
    assert replays[0]["size"] == 12
    for key in ("obs", "mask", "actions", "rewards", "alive", "state", "filled", "stored_at"):
        assert torch.equal(replays[0][key], replays[1][key]), key
    # worker 0's two envs, then worker 1's: different villages (their own seeds)
    assert not torch.equal(replays[0]["obs"][:2], replays[0]["obs"][2:4])


def test_cli_train_and_eval_with_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    code = main(["train", "--env", TINY, "--ray", "local", "--workers", "2", "--envs-per-worker", "2",
                 "--steps", "960", "--rollout", "8", "--device", "cpu", "--run-dir", str(tmp_path / "run"),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "collector ray (2 workers x 2 envs)" in err
    # sampling policies over two scenarios: each draws one random stream through the whole suite
    args = ["eval", "--policy", "default", "--compare", "random_init,random", "--seeds", "2", "--max-ticks", "20",
            "--scenarios", "kill-in-square,kill-rival", "--worlds", "village-v1", "--json", "--quiet"]
    assert main(args) == 0
    alone = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*args, "--ray", "local", "--workers", "2"]) == 0
    spread = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert spread == alone and set(alone) == {"default", "random_init", "random"}


def test_one_worker_trains_the_in_process_run(tmp_path):
    weights = []
    for name, options in (("thread", None), ("ray", RayOptions(workers=1, **OPTIONS))):
        trainer = Trainer(ray_cfg(tmp_path / name, collector="thread" if options is None else "auto"),
                          tensorboard=False, ray=options)
        trainer.train()
        weights.append(trainer.brain.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def _rollout_workers() -> set[int]:
    """Pids of the Ray actor processes of rollout workers (the PPO family's and the replay learners') here."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                if b"ray::RolloutWorker" in cmdline or b"ray::ReplayWorker" in cmdline:
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes in /proc")
@pytest.mark.parametrize("algo", ["drmas", "qmix"])
def test_ctrl_c_saves_and_ends_the_workers(tmp_path, algo):
    before = _rollout_workers()
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "village.cli", "train", "--env", TINY, "--algo", algo, "--ray",
                             "--workers", "2", "--steps", "10000000", "--rollout", "8", "--envs-per-worker", "2",
                             "--device", "cpu", "--checkpoint-every", "1", "--run-dir", str(run_dir), "--no-progress"],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (run_dir / "checkpoints" / "last.pt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.5)
        ours = _rollout_workers() - before
        assert len(ours) == 2
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted at step" in err and (run_dir / "policy.pt").is_file()
    deadline = time.monotonic() + 30
    while ours & _rollout_workers() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ours & _rollout_workers()
    assert [r for r in read_metrics(run_dir / "metrics.jsonl") if "update" in r]
