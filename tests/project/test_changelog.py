"""CHANGELOG.md is a changelog of user-visible changes whose versions match the package's."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION_HEADING = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (unreleased|\d{4}-\d{2}-\d{2})$")


def _versions() -> list[tuple[str, str]]:
    heads = [line for line in CHANGELOG.splitlines() if line.startswith("## ")]
    parsed = [VERSION_HEADING.match(line) for line in heads]
    assert all(parsed), [h for h, m in zip(heads, parsed, strict=True) if not m]
    return [(m.group(1), m.group(2)) for m in parsed if m]


def test_topmost_version_is_unreleased_and_the_next_is_the_package_version():
    versions = _versions()
    assert versions[0][1] == "unreleased"
    assert all(date != "unreleased" for _, date in versions[1:])
    assert versions[1][0] == PROJECT["version"]
    numbers = [tuple(int(p) for p in v.split(".")) for v, _ in versions]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers)


def test_only_added_changed_fixed_sections():
    sections = {line[4:].strip() for line in CHANGELOG.splitlines() if line.startswith("### ")}
    assert sections <= {"Added", "Changed", "Fixed", "Removed", "Deprecated", "Security"}, sections


def test_no_lab_notes():
    # measurement history (sessions, one machine's speed, issue numbers) lives in docs/history.md
    # ("session" alone is a domain word: bridge and sandbox sessions)
    for pattern in (r"\bsession of\b", r"\b(first|second|third|fourth|fifth|sixth|this) session\b",
                    r"\bthis VM\b", r"\bthis machine\b", r"\bIssue \d+", r"NPC-steps/s"):
        assert not re.search(pattern, CHANGELOG, flags=re.I), pattern


def test_license_is_an_spdx_string():
    assert isinstance(PROJECT["license"], str) and PROJECT["license"] == "MIT"


def test_no_machine_timings_in_code_comments():
    # figures that depend on one machine belong in docs/history.md, not beside the code
    files = subprocess.run(["git", "ls-files", "*.py", "Makefile"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    # figures one machine gave, not configured ones (a batch delay in milliseconds is a setting)
    timing = re.compile(r"#.*(this (CPU|VM|machine)|\d+(\.\d+)?x (faster|slower)|measured\b.*\d"
                        r"|\d[\d.]* ?(ms|us|µs) (against|vs)\b)")
    hits = [f"{f}:{i}" for f in files if "node_modules" not in f
            for i, line in enumerate((ROOT / f).read_text(encoding="utf-8").splitlines(), 1) if timing.search(line)]
    assert not hits, hits
