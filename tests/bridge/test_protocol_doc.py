"""docs/protocol.md agrees with bridge/protocol.py: version, error codes, limits, dtypes, every op's fields."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from bridge import protocol as P

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n") + len(heading) + 1
    stop = re.compile(rf"^#{{1,{len(level)}}} ", re.M).search(text, start)
    return text[start:stop.start() if stop else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """Rows of the first markdown table in `text` (header and rule skipped), cells stripped of backticks."""
    rows = []
    lines = [line for line in text.splitlines() if line.startswith("|")]
    for line in lines[2:]:
        rows.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    return rows


def test_version(doc):
    found = re.search(r"Protocol version: \*\*(\d+)\*\* \(minor \*\*(\d+)\*\*\)", doc)
    assert found, "the version line is missing"
    assert (int(found.group(1)), int(found.group(2))) == (P.PROTOCOL_VERSION, P.PROTOCOL_MINOR)


def test_error_codes(doc):
    rows = table_rows(section(doc, "## Error codes"))
    assert {code: meaning for code, meaning in rows} == P.ERROR_CODES


def test_limits(doc):
    rows = table_rows(section(doc, "## Limits"))
    defaults = P.Limits()
    assert {name: int(value) for name, value in rows} == {f.name: getattr(defaults, f.name) for f in fields(P.Limits)}


def test_dtypes(doc):
    listed = re.search(r"- dtypes: (.*?)\(each field", section(doc, "## Arrays"), re.S).group(1)
    assert re.findall(r"`(\w+)`", listed) == list(P.ARRAY_DTYPES)


def test_ops_and_their_fields(doc):
    ops_text = section(doc, "## Ops")
    documented = re.findall(r"^### `([\w.]+)`$", ops_text, re.M)
    assert documented == list(P.OPS)
    for name, spec in P.OPS.items():
        text = section(ops_text, f"### `{name}`")
        assert spec.doc in text, f"{name}: description differs"
        assert ("Batched." in text) == spec.batched, name
        request_text, reply_text = text.split("Reply fields:")
        for part, specs in ((request_text, spec.request), (reply_text, spec.reply)):
            if not specs:
                assert "No fields." in part, name
                continue
            rows = table_rows(part)
            expected = [[f.name, f.type, "yes" if f.required else "no"] for f in specs]
            assert [row[:3] for row in rows] == expected, name
            for row, f in zip(rows, specs, strict=True):
                assert row[3].startswith(f.doc), (name, f.name)
                for dtype in f.dtypes:
                    assert dtype in row[3], (name, f.name, dtype)
                for choice in f.choices:
                    assert choice in row[3], (name, f.name, choice)
