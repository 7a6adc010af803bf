"""Averaging policies in weight space: the weighted mean of every tensor, refused across architectures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from npc_brains import load_policy
from npc_brains.checkpoint import CHECKSUM_KEY, CheckpointError, average_policies, load_checkpoint, save_checkpoint
from npc_brains.resolve import bundled_policy


def _scaled_copy(src: Path, dst: Path, factor: float) -> Path:
    data = load_checkpoint(src)
    data = {k: v for k, v in data.items() if k not in ("format", "version", CHECKSUM_KEY)}
    data["model"] = {k: v * factor if v.is_floating_point() else v for k, v in data["model"].items()}
    return save_checkpoint(dst, data)


def test_the_average_is_the_weighted_mean_of_every_tensor(tmp_path: Path) -> None:
    parent = bundled_policy("default")
    doubled = _scaled_copy(parent, tmp_path / "doubled.pt", 2.0)
    soup = average_policies([parent, doubled], [3.0, 1.0])  # (3 x + 1 x 2x) / 4 = 1.25 x
    original = load_checkpoint(parent)["model"]
    for key, value in original.items():
        assert torch.allclose(soup["model"][key], value * 1.25, rtol=1e-6, atol=1e-7), key
    assert soup["config"] == load_checkpoint(parent)["config"] and soup["averaged_weights"] == [3.0, 1.0]


def test_a_policy_averaged_with_itself_acts_as_it_did(tmp_path: Path, bench_script) -> None:
    parent = bundled_policy("default")
    out = tmp_path / "self.pt"
    assert bench_script("weight_average").main(["--out", str(out), str(parent), f"{parent}@2"]) == 0
    obs_dim = load_checkpoint(parent)["env"]["obs_dim"]
    n_actions = load_checkpoint(parent)["env"]["n_actions"]
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, obs_dim)).astype(np.float32)
    mask = np.ones((64, n_actions), dtype=bool)
    a = load_policy(str(parent), seed=0).act(obs, mask, deterministic=True, with_probs=True)
    b = load_policy(str(out), seed=0).act(obs, mask, deterministic=True, with_probs=True)
    np.testing.assert_array_equal(a.actions, b.actions)
    np.testing.assert_allclose(a.probs, b.probs, rtol=1e-5, atol=1e-6)


def test_policies_of_another_architecture_are_refused(untrained_policy_file, bench_script, capsys,
                                                      tmp_path: Path) -> None:
    unused = str(tmp_path / "unused.pt")
    parent = bundled_policy("default")
    other = untrained_policy_file(slots=6)
    with pytest.raises(CheckpointError, match="'net' differs"):
        average_policies([parent, other])
    with pytest.raises(CheckpointError, match="two policies or more"):
        average_policies([parent])
    with pytest.raises(SystemExit) as exit_info:
        bench_script("weight_average").main(["--out", unused, str(parent), str(other)])
    assert exit_info.value.code == 2 and "differs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_script("weight_average").main(["--out", unused, str(parent), f"{parent}@heavy"])
    assert "@" in capsys.readouterr().err and not Path(unused).exists()


def test_one_policy_with_tuning_is_that_policy_in_the_changed_world(tmp_path: Path, bench_script, capsys) -> None:
    from npc_brains.tuning import policy_tuning

    parent = bundled_policy("default")
    out = tmp_path / "retuned.pt"
    assert bench_script("weight_average").main(["--out", str(out), str(parent), "--tuning", "grief_per_loss=true"]) == 0
    before, after = load_checkpoint(parent), load_checkpoint(out)
    assert after["config"]["tuning"] == before["config"]["tuning"] | {"grief_per_loss": True}
    assert all(torch.equal(after["model"][k], v) for k, v in before["model"].items())
    tuning = policy_tuning(load_policy(str(out), seed=0))
    assert tuning.grief_per_loss and tuning.mourning_ends_with_grief  # the parent's world, with the one change
    unused = tmp_path / "unused.pt"
    for bad, says in (("grief_per_loss=3", "expected a bool"), ("no_such_field=1", "unknown engine field")):
        with pytest.raises(SystemExit) as exit_info:
            bench_script("weight_average").main(["--out", str(unused), str(parent), "--tuning", bad])
        assert exit_info.value.code == 2 and says in capsys.readouterr().err and not unused.exists()
