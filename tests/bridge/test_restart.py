"""kill -9 of the server in the middle of a request, then a restart on the same port with the same --state-dir:
the Python client's retry gets its answer and the session carries on from its saved state."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from bridge_helpers import ServerProcess, serve_args

from bridge.client import BridgeClient

HERE = Path(__file__).resolve().parent


def test_kill9_mid_request_then_restart_recovers(tmp_path, world_text):
    state = tmp_path / "state"
    stall, entered = tmp_path / "stall", tmp_path / "entered"
    log = tmp_path / "server.log"
    log.touch()
    first = ServerProcess([sys.executable, str(HERE / "stall_server.py"), "tcp://127.0.0.1:0", str(state),
                           str(stall), str(entered)], log)
    endpoint = first.endpoint
    second = None
    try:
        client = BridgeClient(endpoint, timeout=1.0, retries=30)
        sid = client.session_create(world=world_text, seed=2)["session"]
        number = client.session_event(sid, "death", actor="player", target="Alda", witnesses=["Bren"])["event"]
        client.session_step(sid)  # tick 1: Alda dies, Bren saw it
        stall.touch()
        outcome: dict = {}

        def step() -> None:
            try:
                outcome["reply"] = client.session_step(sid)
            except Exception as exc:  # reported by the assertions below
                outcome["error"] = exc

        worker = threading.Thread(target=step)
        worker.start()
        deadline = time.monotonic() + 30
        while not entered.exists():  # the server is now inside the policy forward of our request
            assert time.monotonic() < deadline, "the server never started the request"
            worker.join(0.02)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        stall.unlink()
        second = ServerProcess(serve_args("--policy", "scripted", "--bind", endpoint, "--state-dir", str(state)), log)
        worker.join(60)
        assert not worker.is_alive()
        assert "error" not in outcome, outcome.get("error")
        reply = outcome["reply"]
        assert reply["tick"] == 2  # the interrupted step ran once, after the restart
        assert client.reconnects >= 1
        # the session survived: its history is intact and it keeps going
        bren = client.session_state(sid, npc="Bren")["npcs"][0]
        assert bren["knows_death"] == [{"subject": "Alda", "culprit": "player", "learned_tick": 0, "from": None,
                                        "how": "saw"}]
        alda = client.session_state(sid, npc="Alda")["npcs"][0]
        assert alda["alive"] is False
        later = client.session_step(sid)
        assert later["tick"] == 3
        mourning = [r for r in later["reactions"] if r["reaction"] == "mourning"]
        assert all(r["cause"] == number for r in mourning)
        client.close()
    finally:
        first.stop()
        if second is not None:
            second.stop()
