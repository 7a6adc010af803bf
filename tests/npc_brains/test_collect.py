"""The collector in a child process: the same batches as in a thread, a clean stop, clear errors."""

import numpy as np
import pytest
import torch

from npc_brains.checkpoint import load_checkpoint
from npc_brains.collect import CollectorProcessError, ProcessCollector
from npc_brains.config import ConfigError, TrainConfig
from npc_brains.metrics import read_metrics
from npc_brains.trainer import Trainer


def _cfg(run_dir, **kw):
    base = dict(world="village-v1", algo="drmas", envs=2, rollout=8, steps=2 * 12 * 8 * 5, device="cpu", seed=4,
                run_dir=str(run_dir), checkpoint_every=2)
    base.update(kw)
    return TrainConfig(**base)


def test_process_collector_trains_exactly_like_the_thread(tmp_path):
    runs = {}
    for mode in ("thread", "process"):
        trainer = Trainer(_cfg(tmp_path / mode, collector=mode), tensorboard=False)
        trainer.train()
        assert type(trainer._rollouts).__name__ == ("ProcessCollector" if mode == "process" else "Collector")
        rows = [r for r in read_metrics(tmp_path / mode / "metrics.jsonl") if "event" not in r]
        ckpt = load_checkpoint(tmp_path / mode / "checkpoints" / "last.pt")
        runs[mode] = ([(r["step"], r["episode_return_mean"], r["policy_loss"], r["value_loss"]) for r in rows],
                      trainer.brain.state_dict(), ckpt["rng"]["collector_rng"])
    assert len(runs["thread"][0]) == 5
    assert runs["thread"][0] == runs["process"][0]
    assert all(torch.equal(runs["thread"][1][k], runs["process"][1][k]) for k in runs["thread"][1])
    assert torch.equal(runs["thread"][2], runs["process"][2])  # a resumed run samples on from the same state


def test_auto_uses_a_process_for_long_cpu_runs_and_ends_it(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    trainer = Trainer(_cfg(tmp_path / "long", steps=2 * 12 * 8 * 8), tensorboard=False)
    trainer.train()
    assert isinstance(trainer._rollouts, ProcessCollector)
    assert not trainer._rollouts.process.is_alive()
    short = Trainer(_cfg(tmp_path / "short", steps=2 * 12 * 8 * 3), tensorboard=False)
    assert short.collector_kind == "thread"
    short.train()
    assert not isinstance(short._rollouts, ProcessCollector)  # starting a process would cost more than it saves


def test_close_stops_a_collection_under_way(tmp_path):
    trainer = Trainer(_cfg(tmp_path, rollout=64, envs=8), tensorboard=False)
    collector = ProcessCollector(trainer.cfg, trainer.env, trainer.brain.actor, 0, 64, False,
                                 trainer.collector.rng_state())
    collector.submit(False)
    collector.close()
    assert not collector.process.is_alive() and collector.process.exitcode == 0


def test_a_failure_in_the_child_is_reported_with_its_traceback(tmp_path):
    trainer = Trainer(_cfg(tmp_path), tensorboard=False)
    collector = ProcessCollector(trainer.cfg, trainer.env, trainer.brain.actor, 0, 8, False,
                                 trainer.collector.rng_state())
    try:
        collector.weights = {"not.a.weight": np.zeros(3, np.float32)}
        with pytest.raises(CollectorProcessError, match="(?s)Traceback.*Unexpected key.*not.a.weight"):
            collector.collect(False)
    finally:
        collector.close()
    assert not collector.process.is_alive()


def test_collector_option_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="collector: expected one of auto, thread, process, got 'fork'"):
        _cfg(tmp_path, collector="fork").resolved()
    with pytest.raises(ConfigError, match="collector: 'process' needs --device cpu and double buffering"):
        Trainer(_cfg(tmp_path, collector="process", double_buffer=False), tensorboard=False)


def test_process_collector_runs_a_pettingzoo_env(tmp_path):
    cfg = _cfg(tmp_path, env="tests.npc_brains.tiny_env:make_env", collector="process", steps=2000)
    trainer = Trainer(cfg, tensorboard=False)
    trainer.train()
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "event" not in r]
    assert rows and rows[-1]["step"] >= 2000 and not trainer._rollouts.process.is_alive()


def test_a_small_dev_shm_keeps_the_collector_in_a_thread_or_is_a_clear_error(tmp_path, monkeypatch):
    from npc_brains.collect import rollout_buffers, shared_bytes

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    roomy = Trainer(_cfg(tmp_path / "roomy", steps=2 * 12 * 8 * 8), tensorboard=False)
    assert roomy.collector_kind == "process"
    buffers = rollout_buffers(roomy.env, roomy.T, torch.device("cpu"))
    assert shared_bytes(roomy.env, roomy.T) == 2 * sum(t.numel() * t.element_size() for t in buffers.values())
    monkeypatch.setattr("npc_brains.trainer.shm_free_bytes", lambda: 1000)  # a container's tiny /dev/shm
    trainer = Trainer(_cfg(tmp_path / "auto", steps=2 * 12 * 8 * 8), tensorboard=False)
    assert trainer.collector_kind == "thread"
    trainer.train()
    assert not isinstance(trainer._rollouts, ProcessCollector)
    with pytest.raises(ConfigError, match=r"collector: 'process' needs \d+ MiB of shared memory and /dev/shm has 0"):
        Trainer(_cfg(tmp_path / "forced", collector="process"), tensorboard=False)
