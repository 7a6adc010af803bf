"""Property tests: whatever a user feeds the loader, it answers with a WorldSpec or a WorldError."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from worlds import WorldError, WorldSpec, load_world, save_world, world_from_dict, world_to_dict
from worlds.io import DATA_DIR

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BUNDLED = world_to_dict(load_world("village-v1"))
BUNDLED_TEXT = (DATA_DIR / "village-v1.toml").read_bytes()


def _strings_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [*node.keys(), *(s for v in node.values() for s in _strings_in(v))]
    if isinstance(node, list):
        return [s for v in node for s in _strings_in(v)]
    return [node] if isinstance(node, str) else []


# Strings from the world itself make semantic errors likely (duplicate names, wrong kinds).
WORLD_STRINGS = sorted(set(_strings_in(BUNDLED)))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-3, max_value=60),
    st.floats(),
    st.floats(min_value=-2.0, max_value=2.0),
    st.text(max_size=12),
    st.sampled_from(WORLD_STRINGS),
    st.binary(max_size=4),
    st.dates(),
    st.datetimes(),
    st.times(),
)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(WORLD_STRINGS)), inner, max_size=3),
    ),
    max_leaves=6,
)
toml_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.floats(min_value=-2.0, max_value=2.0),
    st.text(max_size=12),
    st.sampled_from(WORLD_STRINGS),
    st.dates(),
    st.datetimes(),
    st.times(),
)
toml_junk = st.recursive(
    toml_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(WORLD_STRINGS)), inner, max_size=3),
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into the nested data, containers and leaves alike."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        out.append((*prefix, key))
        out.extend(_paths(child, (*prefix, key)))
    return out


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


@st.composite
def mutated_worlds(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    """The bundled world's dict after 1-3 random deletions, replacements or insertions."""
    data = copy.deepcopy(BUNDLED)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        op = draw(st.sampled_from(["delete", "replace", "same-type", "same-type", "insert"]))
        if op == "delete":
            del parent[path[-1]]
        elif op == "same-type":
            # A plausible edit of the same type: often still a valid world, sometimes not.
            parent[path[-1]] = draw(_like(parent[path[-1]], values))
        elif op == "replace":
            parent[path[-1]] = draw(values)
        elif isinstance(parent, dict):
            parent[draw(st.one_of(st.text(max_size=8), st.sampled_from(WORLD_STRINGS)))] = draw(values)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(values))
    return data


def _like(value: Any, fallback: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-2, max_value=100)
    if isinstance(value, float):
        return st.one_of(st.floats(min_value=-1.5, max_value=1.5), st.floats(min_value=0.0, max_value=60.0))
    if isinstance(value, str):
        return st.sampled_from(WORLD_STRINGS)
    return fallback


def _check(result: Any) -> None:
    """A valid spec must round-trip exactly."""
    assert isinstance(result, WorldSpec)
    assert world_from_dict(world_to_dict(result)) == result


def _load_dict(data: Any) -> None:
    try:
        spec = world_from_dict(data, source="prop")
    except WorldError as err:
        event("WorldError")
        assert err.source == "prop"
        assert str(err).startswith("prop: ")
        return
    event("valid world")
    _check(spec)


@SETTINGS
@given(mutated_worlds(junk))
def test_mutated_dicts_give_spec_or_world_error(data: dict[str, Any]) -> None:
    _load_dict(data)


@SETTINGS
@given(junk)
def test_arbitrary_values_give_spec_or_world_error(data: Any) -> None:
    _load_dict(data)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prop")


def _load_file(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    try:
        spec = load_world(path)
    except WorldError as err:
        event("WorldError")
        assert str(path) in str(err)
        return
    event("valid world")
    _check(spec)


@SETTINGS
@given(data=mutated_worlds(toml_junk))
def test_mutated_files_give_spec_or_world_error(scratch: Path, data: dict[str, Any]) -> None:
    _load_file(scratch / "mutated.toml", tomli_w.dumps(data).encode("utf-8"))


@SETTINGS
@given(content=st.binary(max_size=300))
def test_random_bytes_give_world_error(scratch: Path, content: bytes) -> None:
    _load_file(scratch / "random.toml", content)


@SETTINGS
@given(edits=st.lists(st.tuples(st.integers(0, len(BUNDLED_TEXT) - 1), st.sampled_from(["del", "put"]),
                                st.binary(min_size=1, max_size=3)), min_size=1, max_size=4))
def test_corrupted_bundled_file_gives_spec_or_world_error(
    scratch: Path, edits: list[tuple[int, str, bytes]]
) -> None:
    content = bytearray(BUNDLED_TEXT)
    for position, op, chunk in edits:
        position = min(position, len(content))
        if op == "del":
            del content[position:position + len(chunk)]
        else:
            content[position:position] = chunk
    _load_file(scratch / "corrupted.toml", bytes(content))


def test_strategies_reach_valid_worlds_too() -> None:
    # Guard against a property that only ever sees errors: a harmless edit still loads.
    data = copy.deepcopy(BUNDLED)
    data["npcs"][0]["traits"]["bravery"] = 0.25
    data["events"][0]["tick"] = 0
    data["world"]["description"] = str(dt.date(2024, 1, 1))
    _check(world_from_dict(data))


def _rename(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {k: _rename(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename(v, old, new) for v in node]
    return new if node == old else node


@SETTINGS
@given(name=st.text(min_size=1, max_size=20), place=st.text(min_size=1, max_size=20),
       description=st.text(max_size=40), bravery=st.floats(min_value=0.0, max_value=1.0))
def test_any_text_and_float_survive_a_file_round_trip(
    scratch: Path, name: str, place: str, description: str, bravery: float
) -> None:
    data = _rename(_rename(BUNDLED, "Alda", name), "Miller House", place)
    data["world"]["description"] = description
    data["npcs"][1]["traits"]["bravery"] = bravery
    try:
        spec = world_from_dict(data)
    except WorldError:
        event("WorldError")  # e.g. a blank name, or one that clashes with another
        return
    event("valid world")
    target = scratch / "round-trip.toml"
    save_world(spec, target)
    assert load_world(target) == spec
