"""The collector's child process with a third-party env whose factory starts threads: it trains to the end
with the default collector, and a child that cannot start is an error, never a silent hang."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from npc_brains.collect import CollectorProcessError, ProcessCollector, process_context
from npc_brains.config import TrainConfig
from npc_brains.metrics import read_metrics
from npc_brains.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
THREADED = "tests.npc_brains.threaded_env:make_env"


def test_the_child_does_not_inherit_the_parents_threads():
    assert process_context().get_start_method() in ("forkserver", "spawn")


def test_an_env_whose_factory_starts_a_thread_trains_to_the_end_with_the_default_collector(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # 10 updates of 2 x 3 x 8 rows: the default collector is a child process on a multi-core CPU
    proc = subprocess.run([sys.executable, "-m", "village.cli", "train", "--env", THREADED, "--algo", "drmas",
                           "--envs", "2", "--rollout", "8", "--steps", "480", "--device", "cpu",
                           "--run-dir", str(run_dir), "--no-progress"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if (os.cpu_count() or 1) > 1:
        assert "collector process" in proc.stderr
    rows = [r for r in read_metrics(run_dir / "metrics.jsonl") if "update" in r]
    assert rows[-1]["step"] == 480 and (run_dir / "policy.pt").is_file()


def test_a_child_that_never_starts_is_an_error_not_a_hang(tmp_path, monkeypatch):
    import npc_brains.collect as collect

    cfg = TrainConfig(env="tests.npc_brains.tiny_env:make_env", algo="drmas", envs=1, rollout=4, steps=48,
                      device="cpu", run_dir=str(tmp_path))
    trainer = Trainer(cfg, tensorboard=False)
    monkeypatch.setattr(collect, "_collector_process", _never_ready)
    monkeypatch.setattr(collect, "READY_TIMEOUT_S", 2.0)
    with pytest.raises(CollectorProcessError, match="did not start within 2 s.*--collector thread"):
        ProcessCollector(trainer.cfg, trainer.env, trainer.brain.actor, 0, 4, False, trainer.collector.rng_state())


def _never_ready(conn, *args):
    import time

    time.sleep(60)
