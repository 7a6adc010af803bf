"""A PettingZoo env whose factory starts a thread, as JAX-based or simulator-client envs do: the thread holds
a lock that every step takes. A child forked while the thread held it inherits the lock held by a thread that
does not exist there, and its first step waits for ever."""

from __future__ import annotations

import threading
import time

from tests.npc_brains.tiny_env import MatchEnv

ENGINE_LOCK = threading.Lock()
_started = threading.Event()


def _engine_thread() -> None:
    while True:  # the lock is held nearly all the time, released for a moment between "device calls"
        with ENGINE_LOCK:
            time.sleep(0.05)
        time.sleep(0.0005)


class ThreadedMatchEnv(MatchEnv):
    def reset(self, seed=None, options=None):
        with ENGINE_LOCK:
            return super().reset(seed, options)

    def step(self, actions):
        with ENGINE_LOCK:
            return super().step(actions)


def make_env() -> ThreadedMatchEnv:
    if not _started.is_set():
        _started.set()
        threading.Thread(target=_engine_thread, name="engine", daemon=True).start()
    return ThreadedMatchEnv()
