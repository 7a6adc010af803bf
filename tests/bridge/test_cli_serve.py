"""`village serve` as a command: starts, answers, logs JSON with request ids, stops on SIGTERM; bad flags exit 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from bridge_helpers import ROOT, ServerProcess, python_env, serve_args

from bridge.client import BridgeClient, BridgeError


def test_serve_answers_and_stops_cleanly(tmp_path):
    log = tmp_path / "serve.log"
    log.touch()
    server = ServerProcess(serve_args("--policy", "random", "--bind", "tcp://127.0.0.1:0", "--log-level", "info"), log)
    try:
        with BridgeClient(server.endpoint, timeout=5.0) as c:
            assert c.hello()["policy"] == "random"
            with pytest.raises(BridgeError):
                c.request("session.state", session="missing")
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(30) == 0
    finally:
        server.stop()
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    events = [e["event"] for e in entries]
    assert events[0] == "listening" and "stopped" in events
    error = next(e for e in entries if e["event"] == "request_error")
    assert error["code"] == "not_found" and error["op"] == "session.state" and error["id"].endswith("-2")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policy", "no-such-checkpoint.pt"], "error: --policy: expected default, mappo, scripted, random or a "
                                                "policy file, got 'no-such-checkpoint.pt' (no such file)"),
        (["--policy", "scripted", "--batch-delay-us", "-1"], "--batch-delay-us"),
        (["--policy", "scripted", "--bind", "localhost:5555"], "--bind"),
        (["--policy", "scripted", "--max-batch", "0"], "--max-batch"),
        (["--policy", "scripted", "--blas-threads", "-2"], "--blas-threads"),
        (["--policy", "scripted", "--spin-us", "-1"], "--spin-us"),
        (["--policy", "scripted", "--temperature", "0"], "--temperature: expected a number from 0.01 to 100"),
        (["--policy", "scripted", "--temperature", "0.5"], "--temperature: scripted has no learned probabilities"),
        (["--policy", "scripted", "--personality-strength", "11"], "--personality-strength: expected a number"),
        (["--policy", "scripted", "--personality-strength", "2"], "--personality-strength: scripted has no learned"),
        (["--policy", "scripted", "--personality-traits", "wit"], "--personality-traits: expected 'all' or"),
        (["--policy", "scripted", "--curve-secret", "missing.key_secret", "--curve-allow", "."], "no such key file"),
    ],
)
def test_serve_user_errors_exit_2_with_one_line(args, needle):
    done = subprocess.run([sys.executable, "-m", "village", "serve", "--bind", "tcp://127.0.0.1:0", *args],
                          capture_output=True, text=True, cwd=ROOT, env=python_env(), timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("village serve: error:") and needle in last
