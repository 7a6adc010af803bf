"""Helpers of the bridge tests: a fake policy, server factories, raw sockets, subprocess servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from bridge import protocol as P
from bridge.server import BridgeServer, ServerConfig
from engine.observe import SELF_FEATURES, SLOT_FEATURES
from npc_brains.baselines import ScriptedPolicy
from npc_brains.policy_api import PolicyOutput

ROOT = Path(__file__).resolve().parents[2]
WORLD = ROOT / "worlds" / "data" / "village-v1.toml"
OBS_DIM = len(SELF_FEATURES) + 4 * len(SLOT_FEATURES)  # the observation width of a village with 4 slots


class FirstValidPolicy:
    """A tiny fake policy: the lowest valid action of each row (probabilities one-hot)."""

    name = "first-valid"

    def act(self, obs: np.ndarray, mask: np.ndarray, *, deterministic: bool = False, with_probs: bool = False,
            with_values: bool = False) -> PolicyOutput:
        actions = np.argmax(mask, axis=1).astype(np.int64)
        probs = np.eye(mask.shape[1], dtype=np.float32)[actions] if with_probs else None
        return PolicyOutput(actions, probs, None)


def make_server(policy: Any = None, **overrides: Any) -> BridgeServer:
    config = ServerConfig(**{"bind": "tcp://127.0.0.1:0", "policy": "scripted", **overrides})
    return BridgeServer(config, policy if policy is not None else ScriptedPolicy(slots=4, seed=0))


def raw_roundtrip(endpoint: str, frames: list[bytes], timeout_ms: int = 5000) -> list[bytes] | None:
    """Send raw frames on a fresh DEALER socket; the reply frames, or None on silence."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        sock.send_multipart(frames)
        if sock.poll(timeout_ms, zmq.POLLIN):
            return sock.recv_multipart()
        return None
    finally:
        sock.close(0)


def decode_reply(frames: list[bytes]) -> dict[str, Any]:
    body = frames[-1]
    reply = P.unpack(body)
    assert isinstance(reply, dict) and reply["v"] == P.PROTOCOL_VERSION
    return reply


# ---------------------------------------------------------------------------------------------- subprocesses


def python_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


class ServerProcess:
    """A server in a child process, its JSON log in a file; `endpoint` read from the 'listening' line."""

    def __init__(self, args: list[str], log_path: Path, timeout: float = 60.0):
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        offset = log_path.stat().st_size
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log, cwd=ROOT, env=python_env())
        self.endpoint = self._wait_listening(offset, timeout)

    def _wait_listening(self, offset: int, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as handle:
                handle.seek(offset)
                for line in handle.read().decode("utf-8", "replace").splitlines():
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if entry.get("event") == "listening":
                        return entry["endpoint"]
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.05)  # polling a log file, not waiting for a socket
        raise RuntimeError(f"server did not report listening within {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def serve_args(*extra: str) -> list[str]:
    return [sys.executable, "-m", "village", "serve", *extra]
