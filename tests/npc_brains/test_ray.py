"""Rollout workers as Ray actors: two workers train, the weights reach them, a killed worker is restarted,
--resume works, the batches repeat for a fixed seed and K, and `village eval --ray` gives the same JSON.
One local Ray (2 CPUs, a small object store) for the whole module."""

import dataclasses
import json
import os
import signal

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from npc_brains.collect import Collector  # noqa: E402
from npc_brains.config import TrainConfig  # noqa: E402
from npc_brains.distributed import RayCollector, RayOptions  # noqa: E402
from npc_brains.metrics import read_metrics  # noqa: E402
from npc_brains.trainer import Trainer  # noqa: E402
from village.cli import main  # noqa: E402

TINY = "tests.npc_brains.tiny_env:make_env"
# fractional CPUs: two workers and the evaluation actors fit in the module's 2 CPUs
OPTIONS = dict(address="local", cpus_per_worker=0.5)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, object_store_memory=150 * 2**20, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield
    ray.shutdown()


def _cfg(run_dir, **kw):
    base = dict(world="village-v1", algo="drmas", envs=2, rollout=8, steps=2 * 12 * 8 * 4, device="cpu", seed=3,
                run_dir=str(run_dir), checkpoint_every=1)
    base.update(kw)
    return TrainConfig(**base)


def _trained(trainer):
    result = trainer.train()
    rows = [r for r in read_metrics(trainer.run_dir / "metrics.jsonl") if "update" in r and "event" not in r]
    return result, rows


def test_two_workers_train_a_short_run_and_hold_the_learners_weights(tmp_path):
    trainer = Trainer(_cfg(tmp_path, envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
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
    trainer = Trainer(_cfg(tmp_path / "run", envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
    result, rows = _trained(trainer)
    assert result.updates == trainer.total_updates == 4 and rows[-1]["step"] == 4 * 2 * 12 * 8
    assert (trainer.run_dir / "policy.pt").is_file()


def test_one_worker_collects_the_in_process_batches_and_k_workers_repeat_theirs(tmp_path):
    thread = Trainer(_cfg(tmp_path / "t"), tensorboard=False)
    local = Collector(thread.env, thread.brain.actor, torch.device("cpu"), thread._env_seed, 8, False)
    expected = [local.collect(True) for _ in range(2)]
    one = Trainer(_cfg(tmp_path / "r"), tensorboard=False, ray=RayOptions(workers=1, **OPTIONS))
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
        trainer = Trainer(_cfg(tmp_path / name, envs=1), tensorboard=False, ray=RayOptions(workers=2, **OPTIONS))
        collector = trainer._start_rollouts()
        try:
            runs.append([collector.collect(False).actions for _ in range(2)])
        finally:
            collector.close()
    assert all(torch.equal(x, y) for x, y in zip(*runs, strict=True))
    assert not torch.equal(runs[0][0][:, :12], runs[0][0][:, 12:])  # the two workers play different villages


def test_a_killed_worker_is_restarted_and_training_goes_on(tmp_path):
    trainer = Trainer(_cfg(tmp_path, envs=1, steps=2 * 12 * 8 * 6), tensorboard=False,
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
    cfg = _cfg(tmp_path, envs=1, steps=2 * 12 * 8 * 2)
    Trainer(cfg, tensorboard=False, ray=RayOptions(workers=2, **OPTIONS)).train()
    longer = dataclasses.replace(cfg, steps=2 * 12 * 8 * 4)
    trainer = Trainer(longer, tensorboard=False, resume=tmp_path / "checkpoints" / "last.pt",
                      ray=RayOptions(workers=2, **OPTIONS))
    assert trainer.update == 2 and trainer.B == 2
    result = trainer.train()
    assert result.updates == 4
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "update" in r and "event" not in r]
    assert steps == [192, 384, 576, 768]


def test_cli_train_and_eval_with_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    code = main(["train", "--env", TINY, "--ray", "local", "--workers", "2", "--envs-per-worker", "2",
                 "--steps", "960", "--rollout", "8", "--device", "cpu", "--run-dir", str(tmp_path / "run"),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "collector ray (2 workers x 2 envs)" in err
    args = ["eval", "--policy", "scripted", "--compare", "random", "--seeds", "2", "--max-ticks", "20",
            "--scenarios", "kill-in-square", "--worlds", "village-v1", "--json", "--quiet"]
    assert main(args) == 0
    alone = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*args, "--ray", "local", "--workers", "2"]) == 0
    spread = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert spread == alone and set(alone) == {"scripted", "random"}


def test_ray_collector_is_the_rollouts_seam():
    assert all(hasattr(RayCollector, name) for name in ("sync", "submit", "collect", "rng_state", "events",
                                                          "close"))
