"""Shared test setup: make the repository's packages importable without installing the project."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import pytest  # noqa: E402


@pytest.fixture
def bench_script():
    """`load(name)` -> the module of bench/NAME.py, imported from its file (bench/ is not a package)."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def untrained_policy_file(tmp_path_factory):
    """`make(**train_config)` -> the policy.pt an untrained run of that configuration writes (cached per
    configuration): for the tests that need a policy of another shape (6 slots) or of another env (mpe2)."""
    made: dict[tuple, Path] = {}

    def make(**fields) -> Path:
        key = tuple(sorted(fields.items()))
        if key not in made:
            from npc_brains.checkpoint import save_checkpoint
            from npc_brains.config import TrainConfig
            from npc_brains.trainer import Trainer

            run_dir = tmp_path_factory.mktemp("policy")
            cfg = TrainConfig(steps=100, envs=1, rollout=8, run_dir=str(run_dir), device="cpu", double_buffer=False,
                              collector="thread", **fields)
            made[key] = save_checkpoint(run_dir / "policy.pt", Trainer(cfg).policy_payload())
        return made[key]

    return make


def _flip_tensor_bytes(src: Path, dst: Path, count: int = 2000, seed: int = 0) -> None:
    """Copy src to dst with `count` bytes of its largest tensor record inverted: the zip and the pickle stay
    readable, so only a checksum can tell."""
    import struct
    import zipfile

    import numpy as np

    data = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as archive:
        records = [i for i in archive.infolist() if "/data/" in i.filename and i.compress_type == zipfile.ZIP_STORED]
        largest = max(records, key=lambda i: i.file_size)
    assert largest.file_size > count
    name_len, extra_len = struct.unpack("<HH", data[largest.header_offset + 26:largest.header_offset + 30])
    start = largest.header_offset + 30 + name_len + extra_len
    for at in start + np.random.default_rng(seed).choice(largest.file_size, count, replace=False):
        data[at] ^= 0xFF
    dst.write_bytes(bytes(data))


@pytest.fixture(scope="session")
def flip_tensor_bytes():
    """`flip(src, dst, count=2000)`: a policy file with bytes of its weights inverted (what the checksum must catch)."""
    return _flip_tensor_bytes
