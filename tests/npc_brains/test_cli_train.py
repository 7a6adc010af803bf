"""`village train` as a user runs it: progress, TOML config, resume after kill -9, Ctrl-C, clear errors."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from npc_brains.checkpoint import load_checkpoint
from npc_brains.metrics import read_metrics
from village.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = "tests.npc_brains.tiny_env:make_env"


@dataclass
class Outcome:
    returncode: int
    stderr: str


@pytest.fixture
def village(capsys, monkeypatch):
    """Run `village train ...` in this process (fast); returns its exit code and stderr."""
    monkeypatch.chdir(ROOT)

    def run(*args: str) -> Outcome:
        capsys.readouterr()
        code = main(["train", *args])
        return Outcome(code, capsys.readouterr().err)

    return run


def village_process(*args):
    return subprocess.run([sys.executable, "-m", "village", "train", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def start(*args):
    return subprocess.Popen([sys.executable, "-m", "village", "train", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_rows(run_dir: Path, n: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = run_dir / "metrics.jsonl"
        if path.exists() and len(read_metrics(path)) >= n and (run_dir / "checkpoints" / "last.pt").exists():
            return
        if proc.poll() is not None:
            raise AssertionError(f"training ended early: {proc.stderr.read()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("training made no progress")


def test_env_factory_smoke_and_summary(tmp_path):
    out = village_process("--env", TINY, "--steps", "300", "--envs", "2", "--rollout", "8", "--run-dir", str(tmp_path),
                  "--no-progress", "--device", "cpu")
    assert out.returncode == 0, out.stderr
    assert "done:" in out.stderr and "Traceback" not in out.stderr
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert rows and all("step" in r and "episode_return_mean" in r for r in rows)


def test_toml_config_and_flag_precedence(tmp_path, village):
    cfg = tmp_path / "train.toml"
    cfg.write_text(f'env = "{TINY}"\nalgo = "mappo"\nsteps = 10000\nenvs = 2\nrollout = 8\n'
                   f'run_dir = "{tmp_path / "run"}"\n')
    out = village("--config", str(cfg), "--steps", "200", "--no-progress")
    assert out.returncode == 0, out.stderr
    stored = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["config"]
    assert stored["algo"] == "mappo" and stored["steps"] == 200 and stored["central_critic"] is True


@pytest.mark.parametrize("args, message", [
    (["--algo", "vdn"], "algo: expected one of ippo, mappo, drmas, qmix, maddpg"),
    (["--adv-norm", "village"], "adv_norm: expected one of"),
    (["--world", "no-such-world"], "no-such-world"),
    (["--env", "tests.npc_brains.tiny_env:make_box_env"], "only Discrete actions"),
    (["--env", "no_such_module_xyz:make"], "cannot import module"),
    (["--collector", "fork"], "collector: expected one of auto, thread, process"),
    (["--collector", "process", "--no-double-buffer"], "collector: 'process' needs --device cpu and double"),
    (["--constraint-rows", "0"], "constraint_rows: expected a number in (0, 1]"),
])
def test_user_mistakes_are_one_line_exit_2(tmp_path, village, args, message):
    out = village(*args, "--steps", "100", "--run-dir", str(tmp_path / "r"), "--no-progress")
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cuda_without_a_gpu_is_a_user_error(tmp_path, village):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = village("--device", "cuda", "--steps", "100", "--run-dir", str(tmp_path / "r"), "--no-progress")
    assert out.returncode == 2 and "no CUDA device" in out.stderr


def test_tuning_flags_and_table_merge(tmp_path, village):
    cfg = tmp_path / "train.toml"
    cfg.write_text('steps = 100\nenvs = 1\nrollout = 8\n[tuning]\nw_alive = 1.0\nfear_near = 0.5\n')
    out = village("--config", str(cfg), "--tuning", "w_alive=2", "--tuning", "attack_needs_grievance=false",
                  "--run-dir", str(tmp_path / "r"), "--no-progress")
    assert out.returncode == 0, out.stderr
    stored = load_checkpoint(tmp_path / "r" / "checkpoints" / "last.pt")["config"]["tuning"]
    assert stored == {"w_alive": 2, "fear_near": 0.5, "attack_needs_grievance": False}
    bad = village("--tuning", "w_alive", "--run-dir", str(tmp_path / "b"), "--no-progress")
    assert bad.returncode == 2 and "--tuning: expected FIELD=VALUE" in bad.stderr and "Traceback" not in bad.stderr
    bad = village("--tuning", "no_such=1", "--run-dir", str(tmp_path / "b"), "--no-progress")
    assert bad.returncode == 2 and "unknown engine field 'no_such'" in bad.stderr


def test_bad_toml_key(tmp_path, village):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("learning_rate = 0.1\n")
    out = village("--config", str(cfg), "--run-dir", str(tmp_path / "r"))
    assert out.returncode == 2 and "unknown option 'learning_rate'" in out.stderr


@pytest.mark.parametrize("text, message", [
    ('central_critic = "false"\n', "central_critic: expected true or false, got 'false'"),
    ('film = "no"\n', "film: expected true or false, got 'no'"),
    ('proximal_clip = 0\n', "proximal_clip: expected true or false, got 0"),
    ('world = ["a"]\n', "world: expected a string, got ['a']"),
    ('device = 0\n', "device: expected a string, got 0"),
    ('lr = "0.1"\n', "lr: expected a number, got '0.1'"),
])
def test_config_values_of_the_wrong_type_are_one_line(tmp_path, village, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    out = village("--config", str(cfg), "--run-dir", str(tmp_path / "r"), "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"village train: error: {message}"]
    assert not (tmp_path / "r").exists()


def test_non_utf8_config_is_one_line(tmp_path, village):
    cfg = tmp_path / "latin1.toml"
    cfg.write_bytes("steps = 100 # d\u00e9j\u00e0\n".encode("latin-1"))
    out = village("--config", str(cfg), "--run-dir", str(tmp_path / "r"), "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "not UTF-8" in lines[0] and "latin1.toml" in lines[0]


def test_corrupted_or_foreign_checkpoint_on_resume(tmp_path, village):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"PK\x03\x04 this is not a checkpoint")
    out = village("--run-dir", str(run), "--resume", "--no-progress")
    assert out.returncode == 2 and "not a readable checkpoint" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    foreign = tmp_path / "foreign.pt"
    import torch

    torch.save({"weights": torch.zeros(3)}, foreign)
    out = village("--run-dir", str(run), "--resume", str(foreign), "--no-progress")
    assert out.returncode == 2 and "not a village NPC brain checkpoint" in out.stderr
    out = village("--run-dir", str(tmp_path / "empty"), "--resume", "--no-progress")
    assert out.returncode == 2 and "nothing to resume" in out.stderr


def test_existing_run_needs_resume_or_overwrite(tmp_path, village):
    args = ["--env", TINY, "--steps", "100", "--envs", "2", "--rollout", "8", "--run-dir", str(tmp_path),
            "--no-progress"]
    assert village(*args).returncode == 0
    again = village(*args)
    assert again.returncode == 2 and "already holds a run" in again.stderr
    assert village(*args, "--overwrite").returncode == 0


def test_a_run_without_a_checkpoint_is_not_overwritten(tmp_path, village):
    (tmp_path / "metrics.jsonl").write_text('{"step": 10}\n')
    (tmp_path / "policy.pt").write_bytes(b"a finished run's policy")
    out = village("--env", TINY, "--steps", "100", "--envs", "2", "--rollout", "8", "--run-dir", str(tmp_path),
                  "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line, = out.stderr.strip().splitlines()
    assert "already holds a run (metrics.jsonl, policy.pt)" in line and "--overwrite" in line
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 10}\n'
    assert (tmp_path / "policy.pt").read_bytes() == b"a finished run's policy"


def test_an_uncreatable_run_dir_is_one_line(tmp_path, village):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = village("--env", TINY, "--steps", "100", "--run-dir", str(blocker / "x"), "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line, = out.stderr.strip().splitlines()
    assert line.startswith("village train: error: --run-dir: cannot create") and "Not a directory" in line


def test_a_checkpoint_write_that_fails_mid_run_saves_what_it_can(tmp_path, village, monkeypatch):
    import errno

    import npc_brains.runloop as runloop  # where every trainer writes its checkpoints

    real = runloop.save_checkpoint
    calls = {"last.pt": 0}

    def disk_full_on_the_second_checkpoint(path, payload):
        if Path(path).name == "last.pt":
            calls["last.pt"] += 1
            if calls["last.pt"] >= 2:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, payload)

    monkeypatch.setattr(runloop, "save_checkpoint", disk_full_on_the_second_checkpoint)
    out = village("--env", TINY, "--steps", "2000", "--envs", "2", "--rollout", "8", "--checkpoint-every", "1",
                  "--collector", "thread", "--run-dir", str(tmp_path), "--no-progress")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert "last.pt: No space left on device" in line and "saved" in line and "policy.pt" in line
    policy = load_checkpoint(tmp_path / "policy.pt")
    assert policy["kind"] == "policy"
    first = load_checkpoint(tmp_path / "checkpoints" / "last.pt")  # the first checkpoint is still whole
    assert first["progress"]["update"] == 1


def test_sigterm_saves_like_ctrl_c_and_resume_continues(tmp_path, village):
    args = ["--world", "village-v1", "--envs", "1", "--rollout", "8", "--epochs", "1", "--run-dir", str(tmp_path),
            "--checkpoint-every", "1000", "--no-progress", "--device", "cpu"]
    proc = start(*args, "--steps", "1000000")
    deadline = time.monotonic() + 300  # a fresh clone compiles the numba kernels first
    while time.monotonic() < deadline and not ((tmp_path / "metrics.jsonl").exists()
                                               and len(read_metrics(tmp_path / "metrics.jsonl")) >= 3):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "SIGTERM" in err and "--resume" in err
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    step, update = ckpt["progress"]["global_step"], ckpt["progress"]["update"]
    assert update >= 3
    assert load_checkpoint(tmp_path / "policy.pt")["kind"] == "policy"
    target = step + 2 * (step // update)
    out = village(*args, "--resume", "--steps", str(target))
    assert out.returncode == 0, out.stderr
    assert f"resuming at step {step}" in out.stderr and f"done: step {target}" in out.stderr
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["progress"]["update"] == update + 2


def _children(pid: int) -> list[int]:
    """Running processes whose parent is pid (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _state(int(entry.name)) not in (None, "Z"):
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _state(pid: int) -> str | None:
    """A process's state letter, or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_kill_9_then_resume_continues_from_the_last_checkpoint(tmp_path, village):
    args = ["--world", "village-v1", "--envs", "1", "--rollout", "8", "--epochs", "1", "--run-dir", str(tmp_path),
            "--checkpoint-every", "2", "--no-progress", "--device", "cpu"]
    proc = start(*args, "--steps", "1000000")
    wait_for_rows(tmp_path, 5, proc)
    collectors = _children(proc.pid) if Path("/proc/self/stat").exists() else []
    if Path("/proc/self/stat").exists() and (os.cpu_count() or 1) > 1:
        assert collectors  # --collector auto took a child process: its end is what is checked below
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30  # the collector process ends with its parent (it checks every second)
    while time.monotonic() < deadline and any(_state(pid) not in (None, "Z") for pid in collectors):
        time.sleep(0.1)
    assert all(_state(pid) in (None, "Z") for pid in collectors)
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    step, update = ckpt["progress"]["global_step"], ckpt["progress"]["update"]
    assert update >= 2 and update % 2 == 0
    rows_per_update = step // update
    target = step + 3 * rows_per_update
    out = village(*args, "--resume", "--steps", str(target))
    assert out.returncode == 0, out.stderr
    assert f"resuming at step {step}" in out.stderr
    steps = [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl") if "event" not in r]
    assert steps == list(range(rows_per_update, target + 1, rows_per_update))  # no gaps, no duplicates
    final = load_checkpoint(tmp_path / "checkpoints" / "last.pt")["progress"]
    assert final["global_step"] == target and final["update"] == update + 3


def test_ctrl_c_saves_and_exits_cleanly(tmp_path):
    proc = start("--world", "village-v1", "--envs", "1", "--rollout", "8", "--epochs", "1", "--run-dir",
                 str(tmp_path), "--checkpoint-every", "1000", "--no-progress", "--device", "cpu",
                 "--steps", "1000000")
    deadline = time.monotonic() + 300  # a fresh clone compiles the numba kernels first
    while time.monotonic() < deadline and not ((tmp_path / "metrics.jsonl").exists()
                                               and len(read_metrics(tmp_path / "metrics.jsonl")) >= 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    assert ckpt["progress"]["update"] >= 3
    assert (tmp_path / "policy.pt").is_file()
    json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])


def test_init_from_starts_the_actor_from_a_trained_policy(tmp_path, village):
    """--init-from: the new run's actor starts as the given policy's (with a vanishing learning rate it stays
    there), while a fresh run starts elsewhere; a policy for another layout or a missing file is one line."""
    import torch

    base = ("--env", TINY, "--steps", "64", "--envs", "2", "--rollout", "8", "--no-progress")
    assert village(*base, "--seed", "3", "--run-dir", str(tmp_path / "a")).returncode == 0
    source = tmp_path / "a" / "policy.pt"
    tuned = village(*base, "--init-from", str(source), "--lr", "1e-12", "--run-dir", str(tmp_path / "b"))
    assert tuned.returncode == 0, tuned.stderr
    fresh = village(*base, "--lr", "1e-12", "--run-dir", str(tmp_path / "c"))
    assert fresh.returncode == 0, fresh.stderr

    def actor(run: str) -> dict[str, torch.Tensor]:
        model = load_checkpoint(tmp_path / run / "policy.pt")["model"]
        return {k: v for k, v in model.items() if k.startswith("actor.")}

    a, b, c = actor("a"), actor("b"), actor("c")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6
    assert max(float((a[k] - c[k]).abs().max()) for k in a) > 1e-3
    missing = village(*base, "--init-from", str(tmp_path / "nope.pt"), "--run-dir", str(tmp_path / "d"))
    assert missing.returncode == 2 and "init-from: no checkpoint file" in missing.stderr
    other = village("--world", "village-v1", "--steps", "64", "--envs", "1", "--rollout", "8", "--no-progress",
                    "--init-from", str(source), "--run-dir", str(tmp_path / "e"))
    assert other.returncode == 2 and "init-from:" in other.stderr and "obs_dim" in other.stderr
    assert "Traceback" not in missing.stderr + other.stderr


def test_recipe_trains_as_a_policy_was_trained_under_the_config_and_flags(tmp_path, village):
    """--recipe: a policy's recorded options become the run's defaults; a TOML's [tuning] and the flags go on top,
    and the run's own choices (run dir, seed, start) are not taken."""
    base = ("--steps", "64", "--envs", "1", "--rollout", "8", "--no-progress")
    first = village(*base, "--algo", "mappo", "--lr", "0.001", "--ent-coef", "0.05", "--tuning", "w_alive=2",
                    "--tuning", "fear_near=0.5", "--seed", "3", "--run-dir", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    cfg = tmp_path / "more.toml"
    cfg.write_text("[tuning]\nfear_near = 0.25\n")
    again = village("--recipe", str(tmp_path / "a" / "policy.pt"), "--config", str(cfg), "--steps", "32",
                    "--tuning", "attack_needs_grievance=false", "--lr", "0.002", "--run-dir", str(tmp_path / "b"),
                    "--no-progress")
    assert again.returncode == 0, again.stderr
    stored = load_checkpoint(tmp_path / "b" / "policy.pt")["config"]
    assert (stored["algo"], stored["ent_coef"], stored["envs"], stored["rollout"]) == ("mappo", 0.05, 1, 8)
    assert (stored["lr"], stored["steps"], stored["seed"], stored["run_dir"]) == (0.002, 32, 0, str(tmp_path / "b"))
    assert stored["tuning"] == {"w_alive": 2, "fear_near": 0.25, "attack_needs_grievance": False}


@pytest.mark.parametrize("args, message", [
    (["--recipe", "{tmp}/nope.pt"], "recipe: no checkpoint file"),
    (["--recipe", "{tmp}/notes.txt"], "recipe: {tmp}/notes.txt: not a readable checkpoint"),
    (["--recipe", "default", "--resume"], "--recipe: a resumed run keeps its own options"),
])
def test_a_bad_recipe_is_one_line(tmp_path, village, args, message):
    (tmp_path / "notes.txt").write_text("not a policy\n")
    out = village(*[a.format(tmp=tmp_path) for a in args], "--steps", "64", "--run-dir", str(tmp_path / "r"),
                  "--no-progress")
    assert out.returncode == 2
    assert message.format(tmp=tmp_path) in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "metrics.jsonl").exists()


def test_the_bundled_recipe_is_its_last_stage_less_the_runs_own_choices():
    from npc_brains.checkpoint import load_checkpoint as load
    from npc_brains.resolve import bundled_policy
    from npc_brains.trainer import RECIPE_LEAVES, recipe_of

    recipe = recipe_of("default")
    stored = load(bundled_policy("default"))["config"]
    assert not set(RECIPE_LEAVES) & set(recipe)
    assert {k: v for k, v in stored.items() if k not in RECIPE_LEAVES} == {k: recipe[k] for k in stored
                                                                          if k not in RECIPE_LEAVES}
    assert recipe["tuning"]["grief_per_loss"] is True and recipe["tuning"]["hide_until_clear"] is True
    assert recipe["tuning"]["w_grief"] == 1.5
    assert recipe["steps"] == 8_000_000 and recipe["teacher_tau"] == 0 and recipe["constraint"] == 0.3
