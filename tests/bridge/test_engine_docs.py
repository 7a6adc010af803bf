"""The examples of docs/engines.md, extracted and run against a live server: Godot (headless godot3-server),
Unity (C#, mono), Unreal (C++, g++), the web (JavaScript WebSocket + JSON, node). Each prints one line per
reaction ("NPC reaction target"); each skips with its reason where its toolchain is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from bridge_helpers import ROOT, WORLD, make_server

from bridge.server import BridgeServer
from engine.constants import REACTION_NAMES

pytest.importorskip("websockets", reason="the WebSocket door needs the websockets package ([ws] extra)")
DOC = ROOT / "docs" / "engines.md"
GODOT_PROJECT = ROOT / "bridge" / "clients" / "godot"
CSHARP = ROOT / "bridge" / "clients" / "csharp"
CPP = ROOT / "bridge" / "clients" / "cpp"


def examples() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- example: (\w+) -->\n```\w+\n(.*?)```", text, re.S))


@pytest.fixture(scope="module")
def live() -> Iterator[BridgeServer]:
    from bridge.policies import load_policy

    srv = make_server(load_policy("default", slots=4), ws_bind="127.0.0.1:0")
    srv.run_in_thread()
    yield srv
    srv.stop()


def _source(name: str, srv: BridgeServer) -> str:
    return examples()[name].replace("ws://127.0.0.1:8765", srv.ws_endpoint).replace("tcp://127.0.0.1:5555",
                                                                                  srv.endpoint)


def _check(out: subprocess.CompletedProcess, *, mourner_target: str | None = "Alda") -> None:
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = re.findall(r"^(\w+) (\w+) (\S+)$", out.stdout, re.M)
    reactions = [(npc, r, t) for npc, r, t in lines if r in REACTION_NAMES]
    assert reactions, out.stdout[-2000:] + out.stderr[-2000:]
    for _, reaction, target in reactions:
        if reaction == "mourning" and mourner_target:
            assert target == mourner_target


def test_the_page_has_the_four_examples():
    assert set(examples()) == {"godot", "unity", "unreal", "web"}


def test_godot_example(live, tmp_path):
    godot = shutil.which("godot3-server")
    if godot is None:
        pytest.skip("godot3-server is not installed (Debian: apt-get install godot3-server)")
    script = GODOT_PROJECT / "tests" / f"docs_example_{tmp_path.name}.gd"  # inside the project: res://
    script.write_text(_source("godot", live), encoding="utf-8")
    try:
        out = subprocess.run([godot, "--path", str(GODOT_PROJECT), "-s", f"res://tests/{script.name}"],
                             capture_output=True, text=True, timeout=120,
                             env={"HOME": str(tmp_path), "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    finally:
        script.unlink()
    assert "SCRIPT ERROR" not in out.stdout + out.stderr, out.stdout[-2000:] + out.stderr[-2000:]
    _check(out)


def test_unity_example(live, tmp_path):
    mcs, mono = shutil.which("mcs"), shutil.which("mono")
    if mcs is None or mono is None:
        pytest.skip("no mono C# compiler (apt-get install mono-devel)")
    (tmp_path / "Example.cs").write_text(_source("unity", live), encoding="utf-8")
    shutil.copy(WORLD, tmp_path / "village-v1.toml")
    build = subprocess.run([mcs, "-out:example.exe", str(CSHARP / "MsgPackLite.cs"), str(CSHARP / "VillageBridgeWs.cs"),
                            "Example.cs"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    _check(subprocess.run([mono, "example.exe"], capture_output=True, text=True, timeout=120, cwd=tmp_path))


def test_unreal_example(live, tmp_path):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler (apt-get install g++ libzmq3-dev cppzmq-dev libmsgpack-cxx-dev)")
    (tmp_path / "example.cpp").write_text(_source("unreal", live), encoding="utf-8")
    shutil.copy(WORLD, tmp_path / "village-v1.toml")
    build = subprocess.run([compiler, "-std=c++17", "-O1", "example.cpp", "-I", str(CPP), "-lzmq", "-o", "example"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    if build.returncode != 0 and ("zmq.hpp" in build.stderr or "msgpack.hpp" in build.stderr):
        pytest.skip("cppzmq / msgpack-cxx headers missing (apt-get install cppzmq-dev libmsgpack-cxx-dev)")
    assert build.returncode == 0, build.stderr
    _check(subprocess.run([str(tmp_path / "example")], capture_output=True, text=True, timeout=120, cwd=tmp_path))


def test_web_example(live, tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node (install nodejs)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    if major < 20:
        pytest.skip(f"node {version} has no WebSocket (20 with --experimental-websocket, 22 by default)")
    (tmp_path / "example.mjs").write_text(_source("web", live), encoding="utf-8")
    flags = ["--experimental-websocket"] if major < 22 else []
    _check(subprocess.run([node, *flags, "example.mjs"], capture_output=True, text=True, timeout=120, cwd=tmp_path))
