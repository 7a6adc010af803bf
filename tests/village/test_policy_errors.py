"""Every front door (demo, eval, play, serve) resolves --policy through npc_brains.load_policy: a policy it cannot
use is one line and exit 2, a policy of another shape works where the command adapts, and a missing bundled
policy is an error, never the scripted rule in its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from npc_brains import bundled_policy
from village.cli import main

ROOT = Path(__file__).resolve().parents[2]
FAST = {
    "demo": ["--ticks", "5"],
    "eval": ["--seeds", "1", "--quiet", "--scenarios", "kill-loner", "--worlds", "village-v1", "--compare", "none",
             "--max-ticks", "5"],
    "play": ["--headless", "--ticks", "1"],
}


def call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def serve(policy: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SDL_VIDEODRIVER": "dummy"}
    return subprocess.run([sys.executable, "-m", "village", "serve", "--bind", "tcp://127.0.0.1:0", "--policy",
                           policy, *extra], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


@pytest.fixture(scope="module")
def bad_policies(tmp_path_factory, flip_tensor_bytes) -> dict[str, tuple[Path, str]]:
    """name -> (file, what the one line must say)."""
    folder = tmp_path_factory.mktemp("bad")
    good = bundled_policy("default").read_bytes()
    (folder / "truncated.pt").write_bytes(good[: len(good) // 2])
    torch.save({"state_dict": {"w": torch.zeros(2)}}, folder / "foreign.pt")
    (folder / "text.pt").write_text("not a policy\n")
    flip_tensor_bytes(bundled_policy("default"), folder / "flipped.pt")
    return {
        "truncated": (folder / "truncated.pt", "not a readable checkpoint"),
        "foreign": (folder / "foreign.pt", "not a village NPC brain checkpoint"),
        "text": (folder / "text.pt", "not a readable checkpoint"),
        "flipped": (folder / "flipped.pt", "do not match the checksum"),
    }


@pytest.mark.parametrize("command", ["demo", "eval", "play"])
@pytest.mark.parametrize("kind", ["truncated", "foreign", "text", "flipped"])
def test_a_corrupt_or_foreign_policy_is_one_line_and_exit_2(command, kind, bad_policies, capsys):
    path, message = bad_policies[kind]
    assert call([command, "--policy", str(path), *FAST[command]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"village {command}: error: --policy: ") and message in err[0], err


@pytest.mark.parametrize("kind", ["truncated", "flipped"])
def test_serve_refuses_a_corrupt_policy_in_one_line(kind, bad_policies):
    path, message = bad_policies[kind]
    done = serve(str(path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("village serve: error: --policy: ") and message in last, last


@pytest.mark.parametrize("command", ["demo", "eval", "play"])
def test_a_policy_of_another_environment_is_one_line_and_exit_2(command, untrained_policy_file, capsys):
    pytest.importorskip("mpe2")
    path = untrained_policy_file(env="mpe2.simple_spread_v3:parallel_env")
    assert call([command, "--policy", str(path), *FAST[command]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trained on pettingzoo:mpe2.simple_spread_v3:parallel_env, not on a village" in err[0]


@pytest.mark.parametrize("command", ["demo", "eval", "play"])
def test_a_six_slot_policy_runs_where_the_command_adapts(command, untrained_policy_file, capsys):
    path = untrained_policy_file(slots=6)
    assert call([command, "--policy", str(path), *FAST[command]]) == 0, capsys.readouterr().err
    assert "error" not in capsys.readouterr().err


def test_serve_refuses_a_six_slot_policy_and_names_the_flag(untrained_policy_file):
    done = serve(str(untrained_policy_file(slots=6)))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("trained with 6 observation slots, not 4; run it with "
                                                         "--slots 6")


@pytest.mark.parametrize("command", ["demo", "eval", "play"])
def test_without_the_bundled_policy_every_command_says_so(command, monkeypatch, tmp_path, capsys):
    import npc_brains.resolve as resolve

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)  # an installation that lost its package data
    assert call([command, *FAST[command]]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "the bundled default policy is missing" in err[0], err
    assert "scripted" not in captured.out


def test_without_the_bundled_policy_the_bridge_says_so(monkeypatch, tmp_path):
    import npc_brains.resolve as resolve
    from bridge.server import BridgeServer, ConfigError, ServerConfig

    monkeypatch.setattr(resolve, "POLICY_DIR", tmp_path)
    with pytest.raises(ConfigError, match="the bundled default policy is missing"):
        BridgeServer(ServerConfig(bind="tcp://127.0.0.1:0", policy="default"))
