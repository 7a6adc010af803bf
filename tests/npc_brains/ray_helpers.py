"""Shared by the Ray test modules: one local Ray per module (2 CPUs, a small object store) and a short run."""

from __future__ import annotations

import pytest
import ray

from npc_brains.config import TrainConfig

# fractional CPUs: two workers and the evaluation actors fit in the module's 2 CPUs
OPTIONS = dict(address="local", cpus_per_worker=0.5)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, object_store_memory=150 * 2**20, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield
    ray.shutdown()


def ray_cfg(run_dir, **kw) -> TrainConfig:
    base = dict(world="village-v1", algo="drmas", envs=2, rollout=8, steps=2 * 12 * 8 * 4, device="cpu", seed=3,
                run_dir=str(run_dir), checkpoint_every=1)
    base.update(kw)
    return TrainConfig(**base)
