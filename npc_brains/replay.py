"""Episode replay for the off-policy learners (QMIX, MADDPG): whole episodes, padded to one length.

`EpisodeBuilder` takes the flat rows of B parallel envs tick by tick and hands each finished episode to an
`EpisodeReplay`: a ring of preallocated struct-of-arrays buffers (C episodes x T ticks x N agents), written in
place. An episode shorter than T is padded: `filled[t]` is False past its end, and every loss is masked with
it. An episode longer than T is cut into pieces of T ticks (each piece ends as if the episode ended there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

FIELDS = ("obs", "mask", "actions", "rewards", "alive", "state", "filled")


@dataclass
class EpisodeBatch:
    """E sampled episodes (tensors on the learner's device). `filled` (E, T): a real tick, not padding."""

    obs: torch.Tensor  # (E, T, N, D)
    mask: torch.Tensor  # (E, T, N, A) bool
    actions: torch.Tensor  # (E, T, N) long
    rewards: torch.Tensor  # (E, T, N)
    alive: torch.Tensor  # (E, T, N) bool
    state: torch.Tensor  # (E, T, S)
    filled: torch.Tensor  # (E, T) bool
    age: torch.Tensor  # (E,) gradient steps since each episode was stored

    @property
    def last(self) -> torch.Tensor:
        """(E, T) bool: the episode's final tick (its TD target has no next step)."""
        nxt = torch.cat([self.filled[:, 1:], torch.zeros_like(self.filled[:, :1])], 1)
        return self.filled & ~nxt


class EpisodeSink(Protocol):
    """Where finished episodes go: the replay itself, or (on a rollout worker) an `EpisodeList` bound for it."""

    def add(self, episode: dict[str, np.ndarray], length: int, update: int) -> None: ...


class EpisodeReplay:
    """Capacity C episodes of at most T ticks; the oldest is overwritten first."""

    def __init__(self, capacity: int, max_len: int, n_agents: int, obs_dim: int, n_actions: int, state_dim: int):
        if capacity < 1 or max_len < 1:
            raise ValueError(f"replay: capacity and episode length must be >= 1, got {capacity}, {max_len}")
        C, T, N = capacity, max_len, n_agents
        self.capacity, self.max_len, self.n_agents = C, T, N
        self.obs = torch.zeros((C, T, N, obs_dim), dtype=torch.float32)
        self.mask = torch.zeros((C, T, N, n_actions), dtype=torch.bool)
        self.actions = torch.zeros((C, T, N), dtype=torch.long)
        self.rewards = torch.zeros((C, T, N), dtype=torch.float32)
        self.alive = torch.zeros((C, T, N), dtype=torch.bool)
        self.state = torch.zeros((C, T, state_dim), dtype=torch.float32)
        self.filled = torch.zeros((C, T), dtype=torch.bool)
        self.stored_at = torch.zeros(C, dtype=torch.long)  # the learner's gradient step when written
        self.size = 0
        self.next = 0  # slot the next episode goes to
        self.added = 0  # episodes ever added

    def add(self, episode: dict[str, np.ndarray], length: int, update: int) -> None:
        """Store one episode (arrays of at least `length` ticks, the rest ignored and padded)."""
        i = self.next
        for name in FIELDS[:-1]:
            buf = getattr(self, name)
            buf[i].zero_()
            buf[i, :length] = torch.as_tensor(episode[name][:length])
        self.filled[i] = False
        self.filled[i, :length] = True
        self.stored_at[i] = update
        self.next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self.added += 1

    def can_sample(self, batch: int) -> bool:
        return self.size >= batch

    def sample(self, batch: int, generator: torch.Generator, device: torch.device, update: int) -> EpisodeBatch:
        """`batch` distinct stored episodes, uniformly, trimmed to the longest sampled episode."""
        if self.size < batch:
            raise ValueError(f"replay: {self.size} episodes stored, {batch} asked for")
        idx = torch.randperm(self.size, generator=generator)[:batch]
        filled = self.filled[idx]
        t_max = int(filled.any(0).nonzero().max()) + 1  # padding past every sampled episode's end is dropped

        def take(buf: torch.Tensor) -> torch.Tensor:
            return buf[idx, :t_max].to(device, non_blocking=True)

        return EpisodeBatch(take(self.obs), take(self.mask), take(self.actions), take(self.rewards),
                            take(self.alive), take(self.state), take(self.filled),
                            (update - self.stored_at[idx]).to(device))

    # --- checkpoints: the filled part of the ring, as tensors (weights_only-loadable)
    def state_dict(self) -> dict[str, Any]:
        n = self.size
        out: dict[str, Any] = {name: getattr(self, name)[:n].clone() for name in FIELDS}
        out.update(stored_at=self.stored_at[:n].clone(), size=n, next=self.next, added=self.added)
        return out

    def load_state_dict(self, data: dict[str, Any]) -> None:
        n = min(int(data["size"]), self.capacity)
        for name in (*FIELDS, "stored_at"):
            src = data[name]
            if src.shape[1:] != getattr(self, name).shape[1:]:
                raise ValueError(f"replay.{name}: stored shape {tuple(src.shape)} does not fit this run")
            getattr(self, name)[:n] = src[:n]
        self.size, self.next, self.added = n, int(data["next"]) % self.capacity, int(data["added"])


class EpisodeBuilder:
    """Staging buffers for B envs' episodes in progress (B x T ticks, written in place each tick)."""

    def __init__(self, num_envs: int, max_len: int, n_agents: int, obs_dim: int, n_actions: int,
                 state_dim: int):
        B, T, N = num_envs, max_len, n_agents
        self.B, self.T, self.N = B, T, N
        self.buf = {"obs": np.zeros((B, T, N, obs_dim), np.float32),
                    "mask": np.zeros((B, T, N, n_actions), bool),
                    "actions": np.zeros((B, T, N), np.int64),
                    "rewards": np.zeros((B, T, N), np.float32),
                    "alive": np.zeros((B, T, N), bool),
                    "state": np.zeros((B, T, state_dim), np.float32)}
        self.t = np.zeros(B, np.int64)  # ticks recorded of each env's episode in progress
        self._envs = np.arange(B)

    def record(self, obs: np.ndarray, mask: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
               alive: np.ndarray, state: np.ndarray) -> None:
        """One tick of every env (flat rows, env-major, as the training envs give them)."""
        B, N, t, e = self.B, self.N, self.t, self._envs
        b = self.buf
        b["obs"][e, t] = obs.reshape(B, N, -1)
        b["mask"][e, t] = mask.reshape(B, N, -1)
        b["actions"][e, t] = actions.reshape(B, N)
        b["rewards"][e, t] = rewards.reshape(B, N)
        b["alive"][e, t] = alive.reshape(B, N)
        b["state"][e, t] = state.reshape(B, -1)
        self.t += 1

    def finish(self, done_envs: np.ndarray, replay: EpisodeSink, update: int) -> int:
        """Store the episodes of `done_envs` (B,) bool, and of envs whose staging is full (cut at T ticks);
        returns how many were stored."""
        done = np.asarray(done_envs, bool) | (self.t >= self.T)
        for b in np.flatnonzero(done):
            replay.add({k: v[b] for k, v in self.buf.items()}, int(self.t[b]), update)
        self.t[done] = 0
        return int(done.sum())


class EpisodeList:
    """Finished episodes in the order they finished, kept for a replay elsewhere (a rollout worker's round):
    `packed()` is one object to send, `add_packed` stores it into the replay in that same order."""

    def __init__(self) -> None:
        self.episodes: list[tuple[dict[str, np.ndarray], int, int]] = []

    def add(self, episode: dict[str, np.ndarray], length: int, update: int) -> None:
        # the builder's staging rows are reused for the env's next episode: keep a copy of the real ticks
        self.episodes.append(({k: np.array(v[:length]) for k, v in episode.items()}, length, update))

    def packed(self) -> dict[str, np.ndarray]:
        """Every field's ticks joined episode after episode on the first axis, with `lengths` and `updates`."""
        lengths = np.array([n for _, n, _ in self.episodes], np.int64)
        out = {"lengths": lengths, "updates": np.array([u for _, _, u in self.episodes], np.int64)}
        if self.episodes:
            out.update({k: np.concatenate([e[k] for e, _, _ in self.episodes]) for k in self.episodes[0][0]})
        return out


def add_packed(replay: EpisodeSink, packed: dict[str, np.ndarray]) -> int:
    """Store the episodes of `EpisodeList.packed()` (arrays may be read-only views of Ray's object store: each
    field is copied once before the replay sees it); returns how many."""
    lengths = packed["lengths"]
    fields = {k: np.array(v) for k, v in packed.items() if k not in ("lengths", "updates")}
    start = 0
    for length, update in zip(lengths.tolist(), packed["updates"].tolist(), strict=True):
        replay.add({k: v[start:start + length] for k, v in fields.items()}, length, update)
        start += length
    return len(lengths)


__all__ = ["EpisodeBatch", "EpisodeBuilder", "EpisodeList", "EpisodeReplay", "EpisodeSink", "add_packed"]
