"""docs/sandbox.md lists exactly the keys the in-app help lists, and shows the README screenshot."""

from __future__ import annotations

from pathlib import Path

from sandbox.ui import HELP

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_help_entry_is_documented():
    text = (DOCS / "sandbox.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "|" in line[2:]}
    keys = {k for k, _ in HELP}
    assert keys <= rows, sorted(keys - rows)


def test_screenshot_is_committed():
    assert (DOCS / "img" / "sandbox.png").is_file()
