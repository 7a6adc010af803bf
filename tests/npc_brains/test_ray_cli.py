"""`--ray` as a user meets it without starting Ray: a missing Ray is a one-line error naming the extra, a bad
address is a one-line error, and without --ray nothing imports ray."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from village.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = "tests.npc_brains.tiny_env:make_env"


def _train(capsys, *flags):
    capsys.readouterr()
    code = main(["train", "--env", TINY, "--steps", "48", "--envs", "1", "--rollout", "4", "--device", "cpu",
                 "--no-progress", *flags])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("command", ["train", "eval"])
def test_without_ray_installed_ray_is_a_one_line_error_naming_the_extra(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as if it were absent
    if command == "train":
        code, err = _train(capsys, "--run-dir", str(tmp_path), "--ray", "--workers", "2")
    else:
        code = main(["eval", "--policy", "scripted", "--ray", "--quiet"])
        err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == ("village " + command + ": error: ray: Ray is not installed; install the distributed extra "
                   "(pip install 'village-npc[distributed]')")
    assert not (tmp_path / "metrics.jsonl").exists()


@pytest.mark.parametrize(("address", "expected"), [
    ("nohost", "ray: expected local, auto or a head's HOST:PORT (ray://HOST:PORT for Ray Client), got 'nohost'"),
    ("127.0.0.1:99999", "ray: expected local, auto or a head's HOST:PORT"),
    ("127.0.0.1:1", "ray: cannot reach a Ray head at 127.0.0.1:1 ("),
])
def test_a_bad_address_is_a_one_line_error(tmp_path, capsys, address, expected):
    if "cannot reach" in expected and importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed")
    code, err = _train(capsys, "--run-dir", str(tmp_path), "--ray", address)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"village train: error: {expected}")


def test_worker_flags_need_ray_and_a_positive_count(tmp_path, capsys):
    code, err = _train(capsys, "--run-dir", str(tmp_path), "--workers", "3")
    assert code == 2 and err == "village train: error: --workers: needs --ray (rollout workers run on Ray)"
    code, err = _train(capsys, "--run-dir", str(tmp_path), "--ray", "--workers", "0")
    assert code == 2 and err == "village train: error: workers: expected an integer >= 1, got 0"


def test_without_ray_flag_nothing_imports_ray(tmp_path):
    script = (f"import sys; from village.cli import main; "
              f"code = main(['train', '--env', {TINY!r}, '--steps', '48', '--envs', '1', '--rollout', '4', "
              f"'--device', 'cpu', '--no-progress', '--run-dir', {str(tmp_path)!r}]); "
              "assert code == 0, code; assert 'ray' not in sys.modules, 'ray was imported'")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
