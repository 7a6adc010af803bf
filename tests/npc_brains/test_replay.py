"""Episode replay: padding, the final-tick flag, the ring, uniform sampling, the staging of B envs, episodes
packed for another process's replay, and the checkpoint round trip."""

import warnings

import numpy as np
import pytest
import torch

from npc_brains.replay import EpisodeBuilder, EpisodeList, EpisodeReplay, add_packed


def _episode(length: int, value: float, T: int = 6, N: int = 2, D: int = 3, A: int = 4, S: int = 5) -> dict:
    return {"obs": np.full((T, N, D), value, np.float32), "mask": np.ones((T, N, A), bool),
            "actions": np.ones((T, N), np.int64), "rewards": np.full((T, N), value, np.float32),
            "alive": np.ones((T, N), bool), "state": np.full((T, S), value, np.float32)}


def test_short_episodes_are_padded_and_flag_their_last_tick():
    replay = EpisodeReplay(4, 6, 2, 3, 4, 5)
    replay.add(_episode(3, 1.0), 3, update=0)
    replay.add(_episode(6, 2.0), 6, update=0)
    assert replay.filled[0].tolist() == [True] * 3 + [False] * 3
    assert (replay.rewards[0, 3:] == 0).all() and (replay.obs[0, 3:] == 0).all()  # padding is zeros
    batch = replay.sample(2, torch.Generator().manual_seed(0), torch.device("cpu"), update=5)
    order = batch.rewards[:, 0, 0].tolist()
    short = order.index(1.0)
    assert batch.filled.shape == (2, 6)
    assert batch.last[short].tolist() == [False, False, True, False, False, False]
    assert batch.last[1 - short].tolist() == [False] * 5 + [True]
    assert batch.age.tolist() == [5, 5]


def test_sampling_trims_to_the_longest_sampled_episode():
    replay = EpisodeReplay(3, 6, 2, 3, 4, 5)
    for v in (1.0, 2.0):
        replay.add(_episode(2, v), 2, update=0)
    batch = replay.sample(2, torch.Generator().manual_seed(0), torch.device("cpu"), update=0)
    assert batch.obs.shape[1] == 2


def test_ring_overwrites_the_oldest_and_samples_distinct_episodes_uniformly():
    replay = EpisodeReplay(3, 6, 2, 3, 4, 5)
    for v in range(5):
        replay.add(_episode(6, float(v)), 6, update=v)
    assert replay.size == 3 and replay.added == 5
    stored = sorted(replay.rewards[:, 0, 0].tolist())
    assert stored == [2.0, 3.0, 4.0]
    g = torch.Generator().manual_seed(1)
    counts = {2.0: 0, 3.0: 0, 4.0: 0}
    for _ in range(600):
        b = replay.sample(2, g, torch.device("cpu"), update=10)
        picked = b.rewards[:, 0, 0].tolist()
        assert len(set(picked)) == 2  # without replacement
        for p in picked:
            counts[p] += 1
    assert all(abs(c / 1200 - 1 / 3) < 0.05 for c in counts.values())
    with pytest.raises(ValueError, match="3 episodes stored"):
        replay.sample(4, g, torch.device("cpu"), update=0)


def test_builder_stores_finished_envs_and_cuts_long_episodes():
    B, T, N = 3, 4, 2
    builder = EpisodeBuilder(B, T, N, 3, 4, 5)
    replay = EpisodeReplay(10, T, N, 3, 4, 5)

    def tick(k: float, done: list[bool]) -> int:
        rows = B * N
        builder.record(np.full((rows, 3), k, np.float32), np.ones((rows, 4), bool), np.zeros(rows, np.int64),
                       np.full(rows, k, np.float32), np.ones(rows, bool), np.full((B, 5), k, np.float32))
        return builder.finish(np.array(done), replay, update=0)

    assert tick(1, [False, True, False]) == 1  # env 1 finished after one tick
    assert tick(2, [False, False, False]) == 0
    assert tick(3, [False, False, False]) == 0
    assert tick(4, [False, False, False]) == 2  # envs 0 and 2 reach T ticks: cut
    lengths = sorted(int(f.sum()) for f in replay.filled[: replay.size])
    assert lengths == [1, 4, 4]
    first = int(np.flatnonzero(replay.filled[: replay.size].sum(1).numpy() == 1)[0])
    assert replay.rewards[first, 0].tolist() == [1.0, 1.0]
    assert builder.t.tolist() == [0, 3, 0]


def test_packed_episodes_reach_the_replay_as_if_added_there_even_from_read_only_buffers():
    direct, remote, sink = EpisodeReplay(5, 6, 2, 3, 4, 5), EpisodeReplay(5, 6, 2, 3, 4, 5), EpisodeList()
    for length, value, update in ((3, 1.0, 0), (6, 2.0, 4), (1, 3.0, 7)):
        direct.add(_episode(length, value), length, update)
        episode = _episode(length, value)
        sink.add(episode, length, update)
        episode["obs"][:] = -1  # the builder reuses its staging rows: the list kept its own copy
    packed = sink.packed()
    assert packed["lengths"].tolist() == [3, 6, 1] and packed["obs"].shape == (10, 2, 3)
    for array in packed.values():
        array.setflags(write=False)  # as ray.get hands them over
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on a non-writable numpy array
        assert add_packed(remote, packed) == 3
    a, b = direct.state_dict(), remote.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a if isinstance(a[k], torch.Tensor))
    assert (a["size"], a["next"], a["added"]) == (b["size"], b["next"], b["added"]) == (3, 3, 3)
    assert add_packed(remote, EpisodeList().packed()) == 0  # a round in which no episode finished


def test_state_dict_round_trip():
    replay = EpisodeReplay(4, 6, 2, 3, 4, 5)
    for v in range(3):
        replay.add(_episode(4, float(v)), 4, update=v)
    other = EpisodeReplay(4, 6, 2, 3, 4, 5)
    other.load_state_dict(replay.state_dict())
    assert other.size == 3 and other.next == 3 and other.added == 3
    assert torch.equal(other.obs[:3], replay.obs[:3]) and torch.equal(other.filled, replay.filled)
    wrong = EpisodeReplay(4, 6, 2, 7, 4, 5)
    with pytest.raises(ValueError, match="obs"):
        wrong.load_state_dict(replay.state_dict())
