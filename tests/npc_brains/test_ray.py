"""Rollout workers as Ray actors: the weights reach them, two workers train while one is killed and restarted,
--resume works. One local Ray (2 CPUs, a small object store) for the whole module; the longer checks are in
test_ray_slow.py."""

import dataclasses
import os
import signal

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from npc_brains.distributed import RayCollector, RayOptions  # noqa: E402
from npc_brains.metrics import read_metrics  # noqa: E402
from npc_brains.trainer import Trainer  # noqa: E402
from tests.npc_brains.ray_helpers import OPTIONS, local_ray, ray_cfg  # noqa: E402, F401


def test_two_workers_collect_one_batch_in_the_trainers_layout_and_hold_the_learners_weights(tmp_path):
    trainer = Trainer(ray_cfg(tmp_path, envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
    assert trainer.collector_kind == "ray" and trainer.B == 2  # one village per worker
    collector = trainer._start_rollouts()
    try:
        batch = collector.collect(False)
        assert batch.obs.shape == (8, 24, trainer.env.obs_dim) and batch.state.shape[1] == 2
        batch.obs += 0  # the learner may write: nothing read-only reached it
        with torch.no_grad():
            for p in trainer.brain.actor.parameters():
                p.add_(0.01)
        collector.sync(trainer.brain.actor)
        collector.collect(False)
        learner = trainer.brain.actor.state_dict()
        for k in range(2):
            held = collector.worker_weights(k)
            assert all(np.array_equal(held[name], learner[name].numpy()) for name in learner)
    finally:
        collector.close()
    assert ray.is_initialized()  # the module's Ray was joined, not started, so it is left running


def test_a_killed_worker_is_restarted_and_training_goes_on(tmp_path):
    trainer = Trainer(ray_cfg(tmp_path, envs=1, steps=2 * 12 * 8 * 6), tensorboard=False,
                      ray=RayOptions(workers=2, **OPTIONS))
    real_learn = trainer.learn

    def learn_then_kill(batch):
        if trainer.update == 1:  # while the next batch is being collected (double buffering)
            os.kill(trainer._rollouts.pids[1], signal.SIGKILL)
        return real_learn(batch)

    trainer.learn = learn_then_kill
    result = trainer.train()
    rows = read_metrics(trainer.run_dir / "metrics.jsonl")
    events = [r for r in rows if r.get("event") == "worker_restarted"]
    assert result.updates == 6 and not result.interrupted
    assert len(events) == 1 and events[0]["worker"] == 1 and events[0]["step"] > 0
    assert [r["update"] for r in rows if "event" not in r] == [1, 2, 3, 4, 5, 6]


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
