"""The import direction of ARCHITECTURE.md: import-linter contracts, and what each entry point loads."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "zmq", "pygame")

# Runs `code`, then prints the top-level heavy modules that ended up in sys.modules as JSON.
_PROBE = """
import json, sys
{code}
print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))))
"""


def loaded_heavy_modules(code: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code, heavy=HEAVY)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def lint_imports_command() -> list[str]:
    script = Path(sys.executable).parent / "lint-imports"
    if script.exists():
        return [str(script)]
    found = shutil.which("lint-imports")
    if found:
        return [found]
    pytest.skip("import-linter is not installed (pip install import-linter)")


def test_import_linter_contracts_are_kept():
    result = subprocess.run(
        [*lint_imports_command(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"lint-imports failed:\n{report[-4000:]}"
    assert "broken" in report and " 0 broken" in report


def test_engine_and_worlds_load_no_torch_zmq_or_pygame():
    assert loaded_heavy_modules("import engine, worlds") == set()
    assert loaded_heavy_modules("import engine.sim, engine.vec_env, engine.observe") == set()


def test_npc_brains_loads_no_zmq_or_pygame():
    init = ROOT / "npc_brains" / "__init__.py"
    if not init.exists() or not init.read_text().strip():
        pytest.skip("npc_brains/__init__.py has no content yet")
    assert loaded_heavy_modules("import npc_brains") & {"zmq", "pygame"} == set()


def test_village_help_loads_nothing_heavy():
    code = (
        "import runpy\n"
        "sys.argv = ['village', '--help']\n"
        "try:\n"
        "    runpy.run_module('village', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    assert loaded_heavy_modules(code) == set()


def test_the_probe_sees_a_heavy_import():
    """Guards the checks above against passing vacuously."""
    assert loaded_heavy_modules("import zmq") == {"zmq"}
