"""The C++, JavaScript and C# clients, built and run against a live server: hello, act, a session with a death.

They skip (with the reason) where the toolchain is missing: g++ with cppzmq + msgpack-cxx
(`apt-get install g++ libzmq3-dev cppzmq-dev libmsgpack-cxx-dev`), node with the JS dependencies installed in
bridge/clients/js (`make test` runs `npm ci` there when npm is on PATH), mono's mcs (`apt-get install
mono-devel`) for the C# WebSocket client, and NetMQ + MessagePack-CSharp assemblies for the C# ZeroMQ client.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bridge_helpers import ROOT, WORLD

from engine.constants import REACTION_NAMES

CPP = ROOT / "bridge" / "clients" / "cpp"
JS = ROOT / "bridge" / "clients" / "js"
CSHARP = ROOT / "bridge" / "clients" / "csharp"


def _has_header(compiler: str, header: str) -> bool:
    probe = subprocess.run([compiler, "-std=c++17", "-x", "c++", "-E", "-"], input=f"#include <{header}>\n",
                           capture_output=True, text=True, timeout=120)
    return probe.returncode == 0


def _check_transcript(out: str, n_actions_expected: int = 29) -> None:
    lines = out.splitlines()
    hello = next(line for line in lines if line.startswith("hello "))
    assert "protocol=1" in hello and "policy=scripted" in hello
    act = next(line for line in lines if line.startswith("act "))
    rows = int(re.search(r"rows=(\d+)", act).group(1))
    actions = [int(a) for a in act.split("actions=")[1].split(",")]
    assert rows == 16 and len(actions) == 16 and all(0 <= a < n_actions_expected for a in actions)
    assert "temperature error code=bad_request" in lines  # the field reached the server, which serves the rules
    # the field reached the server, which refused it for the rules' want of a learned personality
    strength = next(line for line in lines if line.startswith("personality_strength "))
    assert strength.startswith("personality_strength error code=bad_request message=personality_strength: the served "
                               "policy scripted has no learned personality"), strength
    assert "session personality_strength error code=bad_request" in lines  # and so did session creation's
    assert any(line.startswith("session id=") and "npcs=12 actors=3" in line for line in lines)
    assert "event death number=1 victim=Alda" in lines
    assert "step tick=1 event=death number=1 actor=player target=Alda" in lines
    assert "victim Alda alive=0" in lines
    reactions = [dict(kv.split("=", 1) for kv in line.split(" ")[1:7])
                 for line in lines if line.startswith("reaction ")]
    assert reactions, out
    assert all(r["reaction"] in REACTION_NAMES for r in reactions)
    mourners = [r for r in reactions if r["reaction"] == "mourning"]
    assert mourners and all(r["target"] == "Alda" and r["cause"] == "1" for r in mourners)
    assert "error code=not_found" in lines  # after close, the session is gone


def test_cpp_client_round_trip(server, tmp_path):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (install g++)")
    for header in ("zmq.hpp", "msgpack.hpp"):
        if not _has_header(compiler, header):
            pytest.skip(f"<{header}> not found: apt-get install libzmq3-dev cppzmq-dev libmsgpack-cxx-dev")
    binary = tmp_path / "village_example"
    build = subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(CPP),
                            str(CPP / "example.cpp"), "-lzmq", "-o", str(binary)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary), server.endpoint, str(WORLD)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    _check_transcript(run.stdout)


def _missing_js_dependencies() -> str:
    """What is missing of a complete `npm ci` in bridge/clients/js ('' when nothing is)."""
    modules = JS / "node_modules"
    # npm writes its hidden lock file once an install is complete: a half-done install has none
    for needed in (modules / ".package-lock.json", modules / "zeromq" / "package.json",
                   modules / "@msgpack" / "msgpack" / "package.json"):
        if not needed.is_file():
            return str(needed.relative_to(JS))
    return ""


def test_js_client_round_trip(server):
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node (install nodejs)")
    missing = _missing_js_dependencies()
    if missing:
        pytest.skip(f"JS dependencies not installed ({missing}): run `npm ci` in bridge/clients/js "
                    "(`make test` does when npm is on PATH)")
    run = subprocess.run([node, str(JS / "example.mjs"), server.endpoint, str(WORLD)], capture_output=True,
                         text=True, timeout=120, cwd=JS)
    assert run.returncode == 0, run.stderr
    _check_transcript(run.stdout)


def test_csharp_websocket_client_round_trip(tmp_path):
    """The C# client over the WebSocket door (framework WebSockets + MsgPackLite.cs, no package): compiled
    with mono's mcs and run against a live server, the same transcript as the C++ example."""
    mcs, mono = shutil.which("mcs"), shutil.which("mono")
    if mcs is None or mono is None:
        pytest.skip("no mono C# compiler (apt-get install mono-devel)")
    pytest.importorskip("websockets", reason="the WebSocket door needs the websockets package ([ws] extra)")
    from bridge_helpers import make_server

    exe = tmp_path / "example_ws.exe"
    build = subprocess.run([mcs, "-warnaserror+", f"-out:{exe}", str(CSHARP / "MsgPackLite.cs"),
                            str(CSHARP / "VillageBridgeWs.cs"), str(CSHARP / "ExampleWs.cs")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    srv = make_server(bind=None, ws_bind="127.0.0.1:0", ws_token="csharp-token-0123456789")
    srv.run_in_thread()
    try:
        run = subprocess.run([mono, str(exe), srv.ws_endpoint, str(WORLD), "csharp-token-0123456789"],
                             capture_output=True, text=True, timeout=120)
    finally:
        srv.stop()
    assert run.returncode == 0, run.stdout + run.stderr
    _check_transcript(run.stdout)


def test_csharp_netmq_client_compiles(tmp_path):
    """The C# ZeroMQ client needs NetMQ 4.x and MessagePack-CSharp 2.x from the NuGet gallery. Debian ships no
    C# ZeroMQ or msgpack assembly; where the gallery cannot be reached, point VILLAGE_CSHARP_LIBS at a folder
    with NetMQ.dll, AsyncIO.dll, NaCl.dll and MessagePack*.dll (what `nuget install NetMQ` and `nuget install
    MessagePack` unpack) to run it."""
    mcs = shutil.which("mcs")
    libs = os.environ.get("VILLAGE_CSHARP_LIBS")
    if mcs is None:
        pytest.skip("no mono C# compiler (apt-get install mono-devel)")
    if not libs:
        pytest.skip("NetMQ and MessagePack-CSharp come from the NuGet gallery, not reachable here, and Debian ships "
                    "no C# ZeroMQ/msgpack assembly: set VILLAGE_CSHARP_LIBS to a folder of their DLLs")
    refs = [f"-r:{p}" for p in sorted(Path(libs).glob("*.dll"))]
    build = subprocess.run([mcs, "-target:library", f"-out:{tmp_path / 'client.dll'}", *refs,
                            str(CSHARP / "VillageBridgeClient.cs")], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr


def test_csharp_client_is_documented_source():
    """Not built here (no .NET toolchain): check it exists, speaks protocol 1 and covers the ops."""
    source = (ROOT / "bridge" / "clients" / "csharp" / "VillageBridgeClient.cs").read_text(encoding="utf-8")
    assert "ProtocolVersion = 1" in source
    for op in ("hello", "act", "session.create", "session.event", "session.step", "session.close", "ping"):
        assert f'"{op}"' in source, op
    readme = (ROOT / "bridge" / "clients" / "csharp" / "README.md").read_text(encoding="utf-8")
    assert "not built" in readme.lower()


def test_native_clients_speak_the_protocol_version():
    from bridge.protocol import PROTOCOL_VERSION

    assert f"kProtocolVersion = {PROTOCOL_VERSION};" in (CPP / "village_bridge.hpp").read_text()
    assert f"PROTOCOL_VERSION = {PROTOCOL_VERSION};" in (JS / "village_client.mjs").read_text()
    assert Path(JS / "village_client.d.ts").is_file()
