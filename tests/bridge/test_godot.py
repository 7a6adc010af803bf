"""The Godot 3 add-on in real headless Godot (godot3-server) against a real `village serve --ws`: its msgpack
codec against msgpack-python's bytes, hello, act(16), a session on village-v1 with a pushed death (a mourner
targets the body, a revenge targets the killer), and the demo scene with an automatic kill."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import msgpack
import numpy as np
import pytest
from bridge_helpers import ROOT, WORLD, ServerProcess, serve_args

from bridge import protocol as P

GODOT = shutil.which("godot3-server")
pytestmark = [
    pytest.mark.skipif(GODOT is None, reason="godot3-server is not installed (Debian: apt-get install godot3-server)"),
    pytest.mark.skipif(__import__("importlib").util.find_spec("websockets") is None,
                       reason="the WebSocket door needs the websockets package ([ws] extra)"),
]
PROJECT = ROOT / "bridge" / "clients" / "godot"

# the same names and values as codec_cases() in bridge/clients/godot/tests/run_tests.gd
CODEC_CASES = {
    "u127": 127, "u128": 128, "u255": 255, "u256": 256, "u32767": 32767, "u32768": 32768, "u65535": 65535,
    "u65536": 65536, "u2^31": 2**31, "u2^32": 2**32, "u2^62": 2**62, "n-1": -1, "n-32": -32, "n-33": -33,
    "n-128": -128, "n-129": -129, "n-32769": -32769, "n-2^31-1": -(2**31) - 1, "f64": 0.1, "f64big": -1.5e300,
    "f64int": 2.0, "nil": None, "true": True, "false": False, "str_empty": "", "str_fix": "hi", "str8": "a" * 40,
    "str16": "é" * 200, "bin8": bytes([0, 1, 2, 255]), "bin16": bytes(i % 256 for i in range(300)),
    "array16": list(range(20)), "nested": {"a": [1, -1, {"b": None, "c": True}], "d": 2.5, "e": {"f": [[], {}]}},
    "f32array": P.encode_array(np.array([0.5, -2.0, 3.25], np.float32)),
}


@pytest.fixture(scope="module")
def ws_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("godot") / "server.log"
    log.touch()
    srv = ServerProcess(serve_args("--policy", "default", "--bind", "none", "--ws", "127.0.0.1:0"), log)
    yield srv
    srv.stop()


def _godot(tmp_path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, HOME=str(tmp_path), LANG="C.UTF-8", **env)
    return subprocess.run([GODOT, "--path", str(PROJECT), *args], capture_output=True, text=True, timeout=300,
                          env=environ)


def test_addon_in_headless_godot(ws_server, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("".join(f"{k} {msgpack.packb(v, use_bin_type=True).hex()}\n" for k, v in CODEC_CASES.items()))
    out = _godot(tmp_path, ["-s", "res://tests/run_tests.gd"], VILLAGE_CODEC_CASES=str(cases),
                 VILLAGE_WS_URL=ws_server.endpoint, VILLAGE_WORLD=str(WORLD), VILLAGE_BENCH_N="50",
                 VILLAGE_WATCHDOG_S="240")
    text = out.stdout
    encoded = dict(re.findall(r"^CODEC_ENC (\S+) ([0-9a-f]*)$", text, re.M))
    decoded = dict(re.findall(r"^CODEC_DEC (\S+) (.*)$", text, re.M))
    assert set(encoded) == set(CODEC_CASES), out.stdout[-3000:] + out.stderr[-3000:]
    for name, value in CODEC_CASES.items():
        assert encoded[name] == msgpack.packb(value, use_bin_type=True).hex(), f"GDScript encodes {name} differently"
        assert decoded[name] == "ok", f"GDScript decodes {name}: {decoded[name]}"
    failed = re.findall(r"^FAIL .*$", text, re.M)
    assert not failed and "DONE failures=0" in text and out.returncode == 0, "\n".join(failed) + text[-3000:]
    for needle in ("OK hello: protocol 1", "OK act(16)", "OK act at temperature 0.5", "OK act at temperature 0 is a",
                   "OK act at personality strength 2", "OK act at personality strength 11 is a",
                   "OK session.create at personality strength 11 is a", "mourns, target Alda",
                   "seeks revenge, target player"):
        assert needle in text, needle
    bench = re.search(r"^BENCH godot_act16_us .*$", text, re.M)
    assert bench, text[-2000:]
    print(bench.group(0))


def test_demo_scene_reacts_to_a_kill(ws_server, tmp_path):
    out = _godot(tmp_path, ["res://demo/demo.tscn"], VILLAGE_WS_URL=ws_server.endpoint,
                 VILLAGE_DEMO_AUTOKILL="Alda", VILLAGE_DEMO_QUIT_S="5")
    text = out.stdout
    assert out.returncode == 0 and "DEMO the player kills Alda" in text, text[-2000:] + out.stderr[-2000:]
    reactions = re.findall(r"^DEMO tick \d+: (\S+) (\S+) (\S+) \"(.+)\"$", text, re.M)
    assert any(r == "mourning" and t == "Alda" for _, r, t, _ in reactions), text[-2000:]
