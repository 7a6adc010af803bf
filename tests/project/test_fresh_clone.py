"""A fresh clone passes `make test` with nothing but Python and make: the JS client's dependencies are not in
git; `make test` installs them itself where npm is on PATH, and says so where it is not."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")


def test_node_modules_are_not_tracked():
    tracked = subprocess.run(["git", "ls-files", "bridge/clients/js/node_modules"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert tracked == []
    ignored = subprocess.run(["git", "check-ignore", "-q", "bridge/clients/js/node_modules/zeromq/package.json"],
                             cwd=ROOT)
    assert ignored.returncode == 0


def _make_js_deps(tmp_path: Path, with_npm: bool) -> tuple[subprocess.CompletedProcess, Path]:
    """`make js-deps` in a copy of the Makefile and the lock file, with PATH holding only a fake npm (or none)."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    js = tmp_path / "bridge" / "clients" / "js"
    js.mkdir(parents=True)
    shutil.copy(ROOT / "bridge" / "clients" / "js" / "package-lock.json", js / "package-lock.json")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "npm-calls"
    if with_npm:
        npm = bin_dir / "npm"
        npm.write_text(f'#!/bin/sh\necho "$PWD $*" >> {calls}\n')
        npm.chmod(0o755)
    run = subprocess.run([MAKE, "js-deps"], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": str(bin_dir)}, timeout=60)
    return run, calls


@pytest.mark.skipif(MAKE is None, reason="no make")
def test_make_test_runs_npm_ci_where_npm_is_present(tmp_path):
    make_test = subprocess.run([MAKE, "-n", "-p", "test"], cwd=ROOT, capture_output=True, text=True)
    assert any(line.startswith("test:") and "js-deps" in line for line in make_test.stdout.splitlines())
    run, calls = _make_js_deps(tmp_path, with_npm=True)
    assert run.returncode == 0, run.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 1
    cwd, args = lines[0].split(" ", 1)
    assert Path(cwd) == tmp_path / "bridge" / "clients" / "js" and args.startswith("ci ")


@pytest.mark.skipif(MAKE is None, reason="no make")
def test_make_test_says_why_without_npm(tmp_path):
    run, calls = _make_js_deps(tmp_path, with_npm=False)
    assert run.returncode == 0, run.stderr
    assert "npm not found: the JS client test will skip" in run.stdout
    assert not calls.exists()
