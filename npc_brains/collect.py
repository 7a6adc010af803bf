"""Rollouts: the Collector steps the training env with a copy of the actor and fills Batches.

With double buffering the next batch is collected while the learner updates, either in a thread
(`Collector`) or, on a multi-core CPU, in a child process (`ProcessCollector`): the environment is Python and
numpy code that holds the GIL most of the time, and in one process the learner and the collector slowed each
other down by a quarter. Both collect the same batches for the same seed (tested). Past one machine, Ray
actors collect (npc_brains.distributed.RayCollector). Whatever collects is a `Rollouts`: the trainer's seam.

The child process is started without the parent's threads (forkserver, else spawn) and builds its own
environments: a third-party env factory that starts threads (JAX, a simulator's client) leaves locks that a
forked child would inherit held, and it would hang in its first step.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from npc_brains.networks import Actor, NetSpec

if TYPE_CHECKING:
    from npc_brains.config import TrainConfig


@dataclass
class Batch:
    """One rollout of T ticks over R rows (tensors on the training device)."""

    obs: torch.Tensor  # (T, R, D)
    mask: torch.Tensor  # (T, R, A) bool
    actions: torch.Tensor  # (T, R) long
    logp: torch.Tensor  # (T, R) behaviour log-probability
    rewards: torch.Tensor  # (T, R)
    dones: torch.Tensor  # (T, R) bool: the row's episode ended after this step
    alive: torch.Tensor  # (T, R) bool: the observation at t belongs to a living agent
    state: torch.Tensor  # (T, B, S)
    next_obs: torch.Tensor  # (R, D)
    next_state: torch.Tensor  # (B, S)
    cond_table: torch.Tensor  # (R, C) latest personality features of every row
    probs: torch.Tensor | None  # (T, R, A) when shaping needs the action distributions
    episode_returns: list[np.ndarray] = field(default_factory=list)
    seconds: float = 0.0
    # rows cut by the time limit while alive: step t, row r, their final observation and village state
    truncated: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    # per finished episode, whether it was won (envs with a win condition: info["episode_wins"])
    episode_wins: list[np.ndarray] = field(default_factory=list)


class Cancelled(Exception):
    pass


class PendingRollout(Protocol):
    """A batch being collected elsewhere (a Future's `done()` / `result()`)."""

    def done(self) -> bool: ...

    def result(self) -> Batch: ...


class Rollouts(Protocol):
    """What the trainer collects with, besides the in-process `Collector` (which it runs in a thread):
    a child process (`ProcessCollector`) or Ray workers (npc_brains.distributed.RayCollector)."""

    def sync(self, actor: Actor) -> None:
        """Weights for the next collection."""

    def submit(self, store_probs: bool) -> PendingRollout:
        """Start collecting the next batch (one at a time)."""

    def collect(self, store_probs: bool) -> Batch: ...

    def rng_state(self) -> torch.Tensor:
        """The sampling state to store in checkpoints."""

    def events(self) -> list[dict[str, Any]]:
        """Rows for metrics.jsonl about the collector itself (a worker restarted), each taken once."""

    def close(self) -> None: ...


def rollout_buffers(env: Any, rollout: int, device: torch.device, with_probs: bool = True,
                    shared: bool = False) -> dict[str, torch.Tensor]:
    """Empty rollout tensors for `Collector.collect(out=...)`; in shared memory with `shared` (another process
    fills them)."""
    T, R, D, A = rollout, env.num_rows, env.obs_dim, env.n_actions
    out = {"obs": torch.empty((T, R, D), dtype=torch.float32, device=device),
           "mask": torch.empty((T, R, A), dtype=torch.bool, device=device),
           "actions": torch.empty((T, R), dtype=torch.long, device=device),
           "logp": torch.empty((T, R), dtype=torch.float32, device=device),
           "rewards": torch.empty((T, R), dtype=torch.float32, device=device),
           "dones": torch.empty((T, R), dtype=torch.bool, device=device),
           "alive": torch.empty((T, R), dtype=torch.bool, device=device),
           "state": torch.empty((T, env.num_envs, env.state_dim), dtype=torch.float32, device=device)}
    if with_probs:
        out["probs"] = torch.empty((T, R, A), dtype=torch.float32, device=device)
    return {k: v.share_memory_() for k, v in out.items()} if shared else out


def shared_bytes(env: Any, rollout: int) -> int:
    """Shared memory the ProcessCollector's two sets of rollout buffers take."""
    shapes = rollout_buffers(env, rollout, torch.device("meta"))  # sizes without allocating
    return 2 * sum(t.numel() * t.element_size() for t in shapes.values())


def shm_free_bytes() -> int | None:
    """Free space of /dev/shm, where torch puts shared tensors on Linux (a container's --shm-size), or None
    where there is no such mount."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


class Collector:
    """Owns the environment and a copy of the actor; fills Batches."""

    def __init__(self, env: Any, actor: Actor, device: torch.device, seed: int, rollout: int,
                 bootstrap_truncated: bool = False):
        self.env = env
        self.bootstrap_truncated = bootstrap_truncated
        self.device = device
        self.actor = copy.deepcopy(actor).requires_grad_(False)
        self.rollout = rollout
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed + 1)
        self.obs, self.info = env.reset(seed)
        self.cond_index = np.asarray(actor.spec.cond_index, np.int64)
        self.cond_table = self.obs[:, self.cond_index].copy() if self.cond_index.size else np.zeros((env.num_rows, 0),
                                                                                                   np.float32)
        self.stop = threading.Event()

    def sync(self, actor: Actor) -> None:
        self.actor.load_state_dict(actor.state_dict())

    def rng_state(self) -> torch.Tensor:
        """The sampling generator's state (stored in checkpoints)."""
        return self.generator.get_state()

    def events(self) -> list[dict[str, Any]]:
        """Nothing to report (the Rollouts seam's event rows come from collectors elsewhere)."""
        return []

    def collect(self, store_probs: bool, out: dict[str, torch.Tensor] | None = None) -> Batch:
        """T ticks of every village; into `out` (from `buffers()`) when given, else into fresh tensors."""
        env, dev, T = self.env, self.device, self.rollout
        start = time.perf_counter()
        if out is None:
            out = rollout_buffers(env, T, dev, with_probs=store_probs)
        obs_b, mask_b, act_b, logp_b = out["obs"], out["mask"], out["actions"], out["logp"]
        rew_b, done_b, alive_b, state_b = out["rewards"], out["dones"], out["alive"], out["state"]
        probs_b = out["probs"] if store_probs else None
        finished: list[np.ndarray] = []
        wins: list[np.ndarray] = []
        cut: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (t, rows, final obs, final state)
        with torch.no_grad():
            for t in range(T):
                if self.stop.is_set():
                    raise Cancelled
                info = self.info
                o = torch.from_numpy(self.obs).to(dev)
                m = torch.from_numpy(info["action_mask"]).to(dev)
                logits = self.actor(o, m)
                logp_all = torch.log_softmax(logits, -1)
                u = torch.rand(logits.shape, generator=self.generator, device=dev).clamp_(1e-12, 1 - 1e-7)
                a = (logits - torch.log(-torch.log(u))).argmax(-1)
                obs_b[t] = o
                mask_b[t] = m
                act_b[t] = a
                logp_b[t] = logp_all.gather(1, a[:, None]).squeeze(1)
                alive_b[t] = torch.from_numpy(info["alive"]).to(dev)
                state_b[t] = torch.from_numpy(np.asarray(info["state"], np.float32)).to(dev)
                if probs_b is not None:
                    probs_b[t] = torch.softmax(logits, -1)  # = exp(logp_all), without exp's slow masked entries
                alive_before = info["alive"]
                self.obs, reward, term, trunc, self.info = env.step(a.cpu().numpy())
                # only an env that reports the final observation and state (the village's does) is bootstrapped:
                # without them the centralised critic would have nothing to value
                if self.bootstrap_truncated and "final_obs" in self.info and "final_state" in self.info:
                    rows = np.flatnonzero(np.asarray(trunc) & alive_before)
                    if len(rows):
                        village = rows // env.num_agents
                        cut.append((t, rows, np.asarray(self.info["final_obs"])[rows],
                                    np.asarray(self.info["final_state"], np.float32)[village]))
                rew_b[t] = torch.from_numpy(np.asarray(reward, np.float32)).to(dev)
                done_b[t] = torch.from_numpy(np.asarray(term) | np.asarray(trunc)).to(dev)
                if "episode_returns" in self.info:
                    finished.append(np.asarray(self.info["episode_returns"], np.float64))
                if "episode_wins" in self.info:
                    wins.append(np.asarray(self.info["episode_wins"], bool))
                alive_now = self.info["alive"]
                if self.cond_index.size and alive_now.any():
                    self.cond_table[alive_now] = self.obs[alive_now][:, self.cond_index]
        truncated = None
        if cut:
            truncated = (torch.as_tensor(np.concatenate([np.full(len(c[1]), c[0]) for c in cut]), device=dev),
                         torch.as_tensor(np.concatenate([c[1] for c in cut]), device=dev),
                         torch.as_tensor(np.concatenate([c[2] for c in cut]), dtype=torch.float32, device=dev),
                         torch.as_tensor(np.concatenate([c[3] for c in cut]), dtype=torch.float32, device=dev))
        return Batch(obs_b, mask_b, act_b, logp_b, rew_b, done_b, alive_b, state_b,
                     torch.from_numpy(self.obs).to(dev),
                     torch.from_numpy(np.asarray(self.info["state"], np.float32)).to(dev),
                     torch.from_numpy(self.cond_table.copy()).to(dev), probs_b, finished,
                     time.perf_counter() - start, truncated, wins)


PARENT_CHECK_S = 1.0  # how often an idle collector process checks that its parent is still there
# the child's start (an interpreter, torch, the env factory) may take this long before it is reported as stuck
READY_TIMEOUT_S = 300.0
PROCESS_PRELOAD = ["torch", "npc_brains.collect", "npc_brains.envs"]  # imported once, in the forkserver


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user (its pid was reused)
        return True
    return True


def process_context() -> Any:
    """A multiprocessing context whose children do not inherit this process's threads: forkserver (a clean
    server process forks them, with torch already imported) where there is one, else spawn."""
    methods = torch.multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = torch.multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PROCESS_PRELOAD)
        return ctx
    return torch.multiprocessing.get_context("spawn")


class CollectorProcessError(RuntimeError):
    """The collector's child process failed; the message carries its traceback."""


def _collector_process(conn: Any, parent_end: Any, parent_pid: int, cfg: TrainConfig, spec: dict, seed: int,
                       rollout: int, bootstrap_truncated: bool, buffers: list[dict[str, torch.Tensor]], stop: Any,
                       rng_state: np.ndarray) -> None:
    """The child's loop: build the env and a Collector, then fill the shared buffers on request."""
    # the child was handed the parent's end of the pipe too; closed, the pipe ends when the parent does
    parent_end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which saves and then stops us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # so is SIGTERM (systemd sends it to the whole group)
    torch.set_num_threads(1)
    try:
        from npc_brains.envs import make_flat_env

        collector = Collector(make_flat_env(cfg), Actor(NetSpec.from_dict(spec)), torch.device("cpu"), seed,
                              rollout, bootstrap_truncated)
        collector.stop = stop
        collector.generator.set_state(torch.from_numpy(rng_state))
    except BaseException:  # whatever failed, the parent reports it
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready",))
    while True:
        try:
            while not conn.poll(PARENT_CHECK_S):
                if not _alive(parent_pid):  # the parent is gone (kill -9)
                    return
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message[0] == "close":
            return
        _, weights, store_probs, slot = message
        try:
            collector.actor.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
            batch = collector.collect(store_probs, buffers[slot])
        except Cancelled:
            conn.send(("cancelled",))
            continue
        except BaseException:
            conn.send(("error", traceback.format_exc()))
            return
        truncated = None if batch.truncated is None else tuple(t.numpy() for t in batch.truncated)
        try:
            conn.send(("batch", batch.next_obs.numpy().copy(), batch.next_state.numpy().copy(),
                       batch.cond_table.numpy(), batch.episode_returns, batch.seconds, truncated,
                       collector.rng_state().numpy().copy(), batch.episode_wins))
        except (BrokenPipeError, OSError):  # the parent is gone (kill -9): nobody to tell
            return


class PendingBatch:
    """A batch being collected in the child process (`done()` / `result()`, like a Future)."""

    def __init__(self, owner: ProcessCollector, slot: int, store_probs: bool):
        self.owner, self.slot, self.store_probs = owner, slot, store_probs
        self._batch: Batch | None = None

    def done(self) -> bool:
        return self._batch is not None or self.owner.conn.poll()

    def result(self) -> Batch:
        if self._batch is None:
            reply = self.owner.reply("batch")
            next_obs, next_state, cond_table, returns, seconds, truncated, rng_state, wins = reply[1:]
            self.owner.last_rng_state = torch.from_numpy(rng_state)
            buf = self.owner.buffers[self.slot]
            self._batch = Batch(buf["obs"], buf["mask"], buf["actions"], buf["logp"], buf["rewards"],
                                buf["dones"], buf["alive"], buf["state"], torch.from_numpy(next_obs),
                                torch.from_numpy(next_state), torch.from_numpy(cond_table),
                                buf["probs"] if self.store_probs else None, returns, seconds,
                                None if truncated is None else tuple(torch.from_numpy(t) for t in truncated),
                                wins)
            self.owner.pending = None
        return self._batch


class ProcessCollector:
    """The Collector in a child process (CPU only): the same batches as `Collector` for the same seed and
    weights, collected without holding this process's GIL. Two sets of shared rollout buffers alternate: the
    learner reads one batch while the child fills the next."""

    def __init__(self, cfg: TrainConfig, env: Any, actor: Actor, seed: int, rollout: int, bootstrap_truncated: bool,
                 rng_state: torch.Tensor):
        # no fork: see the module's docstring (a script that starts training needs the usual
        # `if __name__ == "__main__":` guard, as everywhere multiprocessing spawns)
        ctx = process_context()
        cpu = torch.device("cpu")
        self.buffers = [rollout_buffers(env, rollout, cpu, shared=True) for _ in range(2)]
        self.last_rng_state = rng_state  # the sampling state to start from (a Collector's `rng_state()`)
        self.weights: dict[str, np.ndarray] = {}
        self.sync(actor)
        self.stop = ctx.Event()
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_collector_process, name="collector", daemon=True,
                                   args=(child, self.conn, os.getpid(), cfg, actor.spec.to_dict(), seed, rollout,
                                         bootstrap_truncated, self.buffers, self.stop,
                                         # plain bytes: a tensor in a message travels as a file descriptor that the
                                         # receiver fetches from the sender's fd server, which may already be gone
                                         rng_state.numpy().copy()))
        self.process.start()
        child.close()
        self.pending: PendingBatch | None = None
        self._slot = 0
        self.reply("ready", timeout=READY_TIMEOUT_S)

    def reply(self, expected: str, timeout: float | None = None) -> tuple:
        """The child's next message, which must be `expected`; never waits on a child that died, nor (with
        `timeout`) longer than that."""
        waited = 0.0
        try:
            while not self.conn.poll(PARENT_CHECK_S):
                waited += PARENT_CHECK_S
                if not self.process.is_alive():
                    raise EOFError
                if timeout is not None and waited >= timeout:
                    self.process.kill()
                    raise CollectorProcessError(
                        f"the collector process did not start within {timeout:.0f} s (an environment factory "
                        "that blocks?); train with --collector thread to build the environments in this process")
            message = self.conn.recv()
        except (EOFError, OSError):
            raise CollectorProcessError(f"the collector process exited (code {self.process.exitcode})") from None
        if message[0] == "error":
            raise CollectorProcessError(f"the collector process failed:\n{message[1]}")
        if message[0] != expected:
            raise CollectorProcessError(f"collector process: expected {expected!r}, got {message[0]!r}")
        return message

    def sync(self, actor: Actor) -> None:
        """Weights for the next collection."""
        self.weights = {k: v.detach().cpu().numpy().copy() for k, v in actor.state_dict().items()}

    def submit(self, store_probs: bool) -> PendingBatch:
        """Start collecting the next batch (one at a time)."""
        if self.pending is not None:
            raise RuntimeError("collector process: the previous batch was not taken")
        self.conn.send(("collect", self.weights, store_probs, self._slot))
        self.pending = PendingBatch(self, self._slot, store_probs)
        self._slot = 1 - self._slot
        return self.pending

    def collect(self, store_probs: bool) -> Batch:
        return self.submit(store_probs).result()

    def rng_state(self) -> torch.Tensor:
        """The sampling generator's state after the last batch received (stored in checkpoints)."""
        return self.last_rng_state

    def events(self) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        """Stop a collection under way, end the child and wait for it."""
        self.stop.set()
        try:
            if self.pending is not None and self.process.is_alive() and self.conn.poll(30):
                self.conn.recv()  # the batch or "cancelled"
            self.conn.send(("close",))
        except (EOFError, OSError, BrokenPipeError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()
        self.pending = None
