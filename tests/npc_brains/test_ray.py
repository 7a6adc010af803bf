"""Rollout workers as Ray actors, for the PPO family and the replay learners (QMIX, MADDPG): the weights reach
them, two workers train while one is killed and restarted, --resume works. One local Ray (2 CPUs, a small
object store) for the whole module; the longer checks are in test_ray_slow.py."""

import dataclasses
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from npc_brains.algorithms import make_trainer  # noqa: E402
from npc_brains.checkpoint import load_checkpoint  # noqa: E402
from npc_brains.config import TrainConfig  # noqa: E402
from npc_brains.distributed import RayCollector, RayOptions  # noqa: E402
from npc_brains.metrics import read_metrics  # noqa: E402
from npc_brains.trainer import Trainer  # noqa: E402
from tests.npc_brains.ray_helpers import OPTIONS, local_ray, ray_cfg  # noqa: E402, F401
from village.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def nudge(module: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.01)


def assert_workers_hold(workers, module: torch.nn.Module) -> None:
    """Every worker's copy of the policy equals the learner's `module`."""
    learner = module.state_dict()
    for k in range(len(workers.workers)):
        held = workers.worker_weights(k)
        assert set(held) == set(learner)
        assert all(np.array_equal(held[name], learner[name].numpy()) for name in learner)


def test_two_workers_collect_one_batch_in_the_trainers_layout_and_hold_the_learners_weights(tmp_path):
    trainer = Trainer(ray_cfg(tmp_path, envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
    assert trainer.collector_kind == "ray" and trainer.B == 2  # one village per worker
    collector = trainer._start_rollouts()
    try:
        batch = collector.collect(False)
        assert batch.obs.shape == (8, 24, trainer.env.obs_dim) and batch.state.shape[1] == 2
        batch.obs += 0  # the learner may write: nothing read-only reached it
        nudge(trainer.brain.actor)
        collector.sync(trainer.brain.actor)
        collector.collect(False)
        assert_workers_hold(collector, trainer.brain.actor)
    finally:
        collector.close()
    assert ray.is_initialized()  # the module's Ray was joined, not started, so it is left running


def test_resume_with_ray(tmp_path):
    cfg = ray_cfg(tmp_path, envs=1, steps=2 * 12 * 8 * 2)
    Trainer(cfg, tensorboard=False, ray=RayOptions(workers=2, **OPTIONS)).train()
    longer = dataclasses.replace(cfg, steps=2 * 12 * 8 * 4)
    trainer = Trainer(longer, tensorboard=False, resume=tmp_path / "checkpoints" / "last.pt",
                      ray=RayOptions(workers=2, **OPTIONS))
    assert trainer.update == 2 and trainer.B == 2
    result = trainer.train()
    assert result.updates == 4
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "update" in r and "event" not in r]
    assert steps == [192, 384, 576, 768]


def test_ray_collector_is_the_rollouts_seam():
    assert all(hasattr(RayCollector, name) for name in ("sync", "submit", "collect", "rng_state", "events",
                                                          "close"))


# ------------------------------------------------------------------ replay learners (QMIX, MADDPG)
TINY = "tests.npc_brains.tiny_env:make_env"
TINY_ROUND = 4 * 3 * 8  # 2 workers x 2 envs x 3 agents x 8 ticks: the NPC-steps of one round


def replay_cfg(run_dir, algo: str = "qmix", **kw) -> TrainConfig:
    base = dict(env=TINY, algo=algo, envs=4, steps=TINY_ROUND * 4, device="cpu", seed=5, run_dir=str(run_dir),
                hidden=16, intent_dim=16, batch_episodes=4, checkpoint_every=1)
    base.update(kw)
    return TrainConfig(**base)


def test_village_train_qmix_with_two_ray_workers(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the workers import the tiny env from the checkout
    code = main(["train", "--env", TINY, "--algo", "qmix", "--ray", "--workers", "2", "--envs-per-worker", "2",
                 "--steps", str(TINY_ROUND * 4), "--batch-episodes", "4", "--hidden", "16", "--device", "cpu",
                 "--run-dir", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "collector ray (2 workers x 2 envs)" in err
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "event" not in r]
    assert [r["step"] for r in rows] == [TINY_ROUND * k for k in (1, 2, 3, 4)]
    assert rows[-1]["replay_episodes_added"] == 4 * 4  # each round every env finishes its 8-tick episode
    assert rows[-1]["gradient_steps"] >= 1 and np.isfinite(rows[-1]["td_error"])
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert ckpt["progress"]["update"] == 4 and int(ckpt["replay"]["size"]) == 16
    assert (tmp_path / "policy.pt").is_file()


def test_maddpg_workers_fill_the_replay_with_the_learners_weights(tmp_path):
    trainer = make_trainer(replay_cfg(tmp_path, "maddpg"), tensorboard=False,
                           ray=RayOptions(workers=2, envs_per_worker=2, **OPTIONS))
    assert trainer.collector_kind == "ray" and trainer.B == 4
    rounds = trainer._start_rollouts()
    try:
        stored, returns, _ = trainer.collect_round()
        assert stored == 4 and trainer.replay.size == 4 and len(returns) == 2  # one finishing tick per worker
        assert trainer.replay.obs[:4, :8].abs().sum() > 0 and trainer.replay.filled[:4, :8].all()
        nudge(trainer.learner.agent)
        trainer.collect_round()  # syncs the weights first
        assert_workers_hold(rounds, trainer.learner.agent)
    finally:
        rounds.close()


def test_one_replay_worker_fills_the_in_process_replay(tmp_path):
    """K = 1 worker with the run's envs: the same episodes, in the same order, as the learner's own collector
    (the same acting code, seeds and layout)."""
    replays = []
    for name, options in (("inline", None), ("ray", RayOptions(workers=1, **OPTIONS))):
        trainer = make_trainer(replay_cfg(tmp_path / name, envs=2), tensorboard=False, ray=options)
        rounds = trainer._start_rollouts()
        try:
            for _ in range(2):
                trainer.collect_round()
        finally:
            if options is not None:
                rounds.close()
        replays.append(trainer.replay.state_dict())
    assert replays[0]["size"] == replays[1]["size"] == 4
    for key in ("obs", "mask", "actions", "rewards", "alive", "state", "filled", "stored_at"):
        assert torch.equal(replays[0][key], replays[1][key]), key


@pytest.mark.parametrize("algo", ["drmas", "qmix"])
def test_a_killed_worker_is_restarted_and_training_goes_on(tmp_path, algo):
    if algo == "drmas":
        trainer = Trainer(ray_cfg(tmp_path, envs=1, steps=2 * 12 * 8 * 6), tensorboard=False,
                          ray=RayOptions(workers=2, **OPTIONS))
    else:
        trainer = make_trainer(replay_cfg(tmp_path, steps=TINY_ROUND * 6), tensorboard=False,
                               ray=RayOptions(workers=2, envs_per_worker=2, **OPTIONS))
    real_learn = trainer.learn

    def learn_then_kill(*args):
        if trainer.update == 1:  # drmas: while the next batch is being collected (double buffering)
            os.kill(trainer._rollouts.pids[1], signal.SIGKILL)
        return real_learn(*args)

    trainer.learn = learn_then_kill
    result = trainer.train()
    rows = read_metrics(trainer.run_dir / "metrics.jsonl")
    events = [r for r in rows if r.get("event") == "worker_restarted"]
    assert result.updates == 6 and not result.interrupted
    # found dead when the batch (round) after the kill is taken
    assert len(events) == 1 and events[0]["worker"] == 1 and events[0]["update"] >= 3
    assert [r["update"] for r in rows if "event" not in r] == [1, 2, 3, 4, 5, 6]


def test_replay_resume_with_ray(tmp_path):
    options = RayOptions(workers=2, envs_per_worker=2, **OPTIONS)
    cfg = replay_cfg(tmp_path, "maddpg", steps=TINY_ROUND * 2)
    make_trainer(cfg, tensorboard=False, ray=options).train()
    stored = load_checkpoint(tmp_path / "checkpoints" / "last.pt")["replay"]
    trainer = make_trainer(dataclasses.replace(cfg, steps=TINY_ROUND * 4), tensorboard=False,
                           resume=tmp_path / "checkpoints" / "last.pt", ray=options)
    assert trainer.update == 2 and trainer.B == 4 and trainer.replay.size == int(stored["size"]) == 8
    assert trainer.train().updates == 4
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "event" not in r]
    assert steps == [TINY_ROUND * k for k in (1, 2, 3, 4)]
    assert int(load_checkpoint(tmp_path / "checkpoints" / "last.pt")["replay"]["added"]) == 16
