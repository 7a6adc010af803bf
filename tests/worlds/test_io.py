"""Loading, saving and validating world files."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from worlds import (
    WorldError,
    WorldSpec,
    bundled_worlds,
    load_world,
    save_world,
    world_from_dict,
    world_to_dict,
)
from worlds.io import DATA_DIR

Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def village() -> WorldSpec:
    return load_world("village-v1")


@pytest.fixture()
def village_dict(village: WorldSpec) -> dict[str, Any]:
    return copy.deepcopy(world_to_dict(village))


def _npc(world: WorldSpec, name: str):
    return world.npcs[world.npc_index(name)]


# ---- the bundled world ----------------------------------------------------------------------------


def test_bundled_worlds_lists_village_v1() -> None:
    assert "village-v1" in bundled_worlds()


def test_load_by_id_and_by_path_agree(village: WorldSpec) -> None:
    assert load_world(DATA_DIR / "village-v1.toml") == village
    assert load_world(str(DATA_DIR / "village-v1.toml")) == village


def test_village_v1_content(village: WorldSpec) -> None:
    assert village.id == "village-v1"
    assert (village.width, village.height) == (48.0, 48.0)
    assert len(village.npcs) == 12
    assert len(village.locations_of_kind("home")) == 4
    assert len(village.locations_of_kind("field")) == 2
    for kind in ("well", "tavern", "market", "square", "smithy", "graveyard", "forest_edge"):
        assert len(village.locations_of_kind(kind)) == 1, kind
    assert village.settings.raid_probability == 0.0
    kinds = {rel.kind for rel in village.relationships}
    assert kinds == {"kin", "spouse", "friend", "rival"}
    assert any(rel.affinity < 0 for rel in village.relationships)

    traits = [npc.traits for npc in village.npcs]
    assert any(t.bravery >= 0.7 and t.aggression >= 0.7 for t in traits)
    assert any(t.bravery <= 0.3 for t in traits)
    assert any(t.empathy >= 0.8 for t in traits)

    actors = {a.name: a for a in village.actors}
    assert actors["player"].kind == "player"
    assert actors["raider1"].kind == actors["raider2"].kind == "raider"
    square = village.locations_of_kind("square")[0]
    forest = village.locations_of_kind("forest_edge")[0]
    assert abs(actors["player"].x - square.x) + abs(actors["player"].y - square.y) <= 5
    for raider in ("raider1", "raider2"):
        assert abs(actors[raider].x - forest.x) + abs(actors[raider].y - forest.y) <= forest.radius + 2

    (event,) = village.events
    assert (event.tick, event.type, event.actor) == (30, "kill", "player")
    # The victim is a parent: a spouse and children living in the village.
    victim = event.target
    ties = [rel for rel in village.relationships if victim in (rel.a, rel.b)]
    assert any(rel.kind == "spouse" for rel in ties)
    kin = [rel.b if rel.a == victim else rel.a for rel in ties if rel.kind == "kin"]
    assert any(_npc(village, name).role == "child" for name in kin)


def test_round_trip_is_identical(village: WorldSpec, tmp_path: Path) -> None:
    target = tmp_path / "copy.toml"
    save_world(village, target)
    again = load_world(target)
    assert again == village
    save_world(again, target)
    assert load_world(target) == village
    assert not [p for p in tmp_path.iterdir() if p.name != "copy.toml"], "temp files left behind"


def test_round_trip_keeps_floats_exactly(village: WorldSpec, tmp_path: Path) -> None:
    data = world_to_dict(village)
    data["npcs"][0]["traits"]["bravery"] = 0.1 + 0.2  # 0.30000000000000004
    data["relationships"][0]["affinity"] = 1 / 3
    spec = world_from_dict(data)
    save_world(spec, tmp_path / "w.toml")
    loaded = load_world(tmp_path / "w.toml")
    assert loaded.npcs[0].traits.bravery == 0.1 + 0.2
    assert loaded.relationships[0].affinity == 1 / 3


def test_dict_round_trip(village: WorldSpec) -> None:
    assert world_from_dict(world_to_dict(village)) == village


def test_optional_fields_take_defaults(village_dict: dict[str, Any]) -> None:
    del village_dict["settings"]
    del village_dict["npcs"][0]["traits"]
    del village_dict["npcs"][1]["health"]
    del village_dict["locations"][0]["radius"]
    for key in ("relationships", "actors", "events"):
        del village_dict[key]
    spec = world_from_dict(village_dict)
    assert spec.settings.sight_radius == 10.0
    assert spec.npcs[0].traits.bravery == 0.5
    assert spec.npcs[1].health == 1.0
    assert spec.locations[0].radius == 2.0
    assert spec.relationships == spec.actors == spec.events == ()


def test_integers_are_accepted_as_numbers(village_dict: dict[str, Any]) -> None:
    village_dict["world"]["width"] = 48
    village_dict["npcs"][0]["traits"]["bravery"] = 1
    spec = world_from_dict(village_dict)
    assert spec.width == 48.0 and isinstance(spec.width, float)
    assert spec.npcs[0].traits.bravery == 1.0


def test_save_refuses_an_invalid_spec(village: WorldSpec, tmp_path: Path) -> None:
    from dataclasses import replace

    broken = replace(village, width=-1.0)
    with pytest.raises(WorldError, match="world.width"):
        save_world(broken, tmp_path / "broken.toml")
    assert not list(tmp_path.iterdir())


def test_save_rejects_unwritable_values(village: WorldSpec, tmp_path: Path) -> None:
    from dataclasses import replace

    with pytest.raises(WorldError):
        save_world(replace(village, width=None), tmp_path / "a.toml")  # type: ignore[arg-type]
    with pytest.raises(WorldError, match="surrogate"):
        save_world(replace(village, name="bad \udc80"), tmp_path / "b.toml")
    assert not list(tmp_path.iterdir())


def test_save_keeps_the_old_file_on_failure(village: WorldSpec, tmp_path: Path) -> None:
    from dataclasses import replace

    target = tmp_path / "w.toml"
    save_world(village, target)
    before = target.read_bytes()
    with pytest.raises(WorldError):
        save_world(replace(village, npcs=()), target)
    assert target.read_bytes() == before


def test_a_write_that_fails_is_a_world_error_naming_the_file(village: WorldSpec, tmp_path: Path) -> None:
    target = tmp_path / "no-such-folder" / "w.toml"
    with pytest.raises(WorldError, match="cannot write the world file") as info:
        save_world(village, target)
    assert "w.toml" in str(info.value)
    assert not list(tmp_path.iterdir())


# ---- file-level errors ------------------------------------------------------------------------------


def test_missing_file_is_a_world_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(WorldError) as info:
        load_world(missing)
    assert "nowhere.toml" in str(info.value)
    assert "village-v1" in str(info.value)  # lists the bundled ids


def test_unknown_id_is_a_world_error() -> None:
    with pytest.raises(WorldError, match="no-such-village"):
        load_world("no-such-village")


def test_directory_is_a_world_error(tmp_path: Path) -> None:
    with pytest.raises(WorldError, match=tmp_path.name):
        load_world(tmp_path)


def test_syntax_error_is_a_world_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[world]\nid = \"x\nname = 1\n", encoding="utf-8")
    with pytest.raises(WorldError) as info:
        load_world(bad)
    assert "bad.toml" in str(info.value)
    assert "TOML syntax error" in str(info.value)


def test_binary_file_is_a_world_error(tmp_path: Path) -> None:
    bad = tmp_path / "binary.toml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(WorldError, match="binary.toml"):
        load_world(bad)


def test_error_carries_source_and_path(village_dict: dict[str, Any]) -> None:
    village_dict["npcs"][3]["traits"]["bravery"] = 1.7
    with pytest.raises(WorldError) as info:
        world_from_dict(village_dict, source="mine.toml")
    err = info.value
    assert err.source == "mine.toml"
    assert err.path == "npcs[3].traits.bravery"
    assert err.detail == "expected a number in [0, 1], got 1.7"
    assert str(err) == "mine.toml: npcs[3].traits.bravery: expected a number in [0, 1], got 1.7"


@pytest.mark.parametrize("data", [None, 3, "world", [], {"world": []}, {"npcs": {}}])
def test_non_tables_are_world_errors(data: Any) -> None:
    with pytest.raises(WorldError):
        world_from_dict(data)


# ---- every validation rule, as it reaches the user through a file -----------------------------------


def _set(path: str, value: Any) -> Mutation:
    """A mutation that sets a dotted path ("npcs.3.traits.bravery") to value."""

    def apply(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return apply


def _delete(path: str) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return apply


def _append(key: str, entry: dict[str, Any]) -> Mutation:
    def apply(data: dict[str, Any]) -> None:
        data.setdefault(key, []).append(entry)

    return apply


# Indices into village-v1: npcs[0] Alda (Miller House), npcs[1] Bren, npcs[3] Dora; locations[0] Miller
# House, locations[8] Tavern; relationships[0] Alda-Bren; actors[0] player; events[0] the kill.
CASES: list[tuple[str, Mutation, str, str]] = [
    ("trait-range", _set("npcs.3.traits.bravery", 1.7), "npcs[3].traits.bravery",
     "expected a number in [0, 1], got 1.7"),
    ("trait-negative", _set("npcs.0.traits.empathy", -0.1), "npcs[0].traits.empathy", "[0, 1]"),
    ("trait-nan", _set("npcs.0.traits.empathy", float("nan")), "npcs[0].traits.empathy", "got nan"),
    ("trait-bool", _set("npcs.2.traits.diligence", True), "npcs[2].traits.diligence",
     "expected a number in [0, 1], got true (a boolean)"),
    ("trait-string", _set("npcs.2.traits.diligence", "high"), "npcs[2].traits.diligence",
     "expected a number in [0, 1], got the string 'high'"),
    ("trait-unknown", _set("npcs.1.traits.cunning", 0.5), "npcs[1].traits.cunning",
     "allowed keys: bravery, aggression, empathy, sociability, diligence"),
    ("npc-unknown-key", _set("npcs.1.colour", "red"), "npcs[1].colour",
     "unknown key 'colour'; allowed keys: name, role, home, traits, health"),
    ("top-unknown-key", _set("weather", {"rain": 1.0}), "weather", "unknown key 'weather'"),
    ("world-unknown-key", _set("world.seed", 3), "world.seed", "allowed keys: id, name"),
    ("missing-name", _delete("npcs.0.name"), "npcs[0].name", "missing required field; expected a non-empty"),
    ("missing-world", _delete("world"), "world", "missing required table"),
    ("missing-width", _delete("world.width"), "world.width", "missing required field"),
    ("missing-affinity", _delete("relationships.0.affinity"), "relationships[0].affinity",
     "expected a number in [-1, 1]"),
    ("empty-name", _set("npcs.0.name", "  "), "npcs[0].name", "expected a non-empty string"),
    ("bad-id", _set("world.id", "my village"), "world.id", "expected an id of letters"),
    ("location-kind", _set("locations.0.kind", "castle"), "locations[0].kind",
     "expected one of home, field, well, tavern"),
    ("role", _set("npcs.0.role", "wizard"), "npcs[0].role", "expected one of farmer, smith"),
    ("relation-kind", _set("relationships.0.kind", "lover"), "relationships[0].kind",
     "expected one of kin, spouse, friend, rival"),
    ("actor-kind", _set("actors.1.kind", "dragon"), "actors[1].kind", "expected one of player, raider"),
    ("event-type", _set("events.0.type", "marry"), "events[0].type", "expected one of kill, attack"),
    ("affinity-range", _set("relationships.0.affinity", 1.5), "relationships[0].affinity",
     "expected a number in [-1, 1], got 1.5"),
    ("width-zero", _set("world.width", 0.0), "world.width", "expected a number in (0, 10000], got 0.0"),
    ("width-huge", _set("world.height", 20000), "world.height", "(0, 10000], got 20000"),
    ("width-type", _set("world.width", "wide"), "world.width", "got the string 'wide'"),
    ("location-outside", _set("locations.2.x", 100.0), "locations[2].x",
     "an x inside the map, a number in [0, 48], got 100.0"),
    ("actor-outside", _set("actors.0.y", -1.0), "actors[0].y", "a y inside the map"),
    ("radius", _set("locations.0.radius", 0.0), "locations[0].radius", "(0, 10000]"),
    ("health-zero", _set("npcs.0.health", 0.0), "npcs[0].health", "expected a number in (0, 10], got 0.0"),
    ("health-high", _set("actors.0.health", 11.0), "actors[0].health", "(0, 10]"),
    ("sight-radius", _set("settings.sight_radius", -1.0), "settings.sight_radius",
     "expected a number > 0, got -1.0"),
    ("raid-probability", _set("settings.raid_probability", 2.0), "settings.raid_probability",
     "expected a number in [0, 1], got 2.0"),
    ("gossip-probability", _set("settings.gossip_probability", -0.5), "settings.gossip_probability",
     "[0, 1]"),
    ("settings-unknown", _set("settings.gravity", 9.8), "settings.gravity", "allowed keys: sight_radius"),
    ("tick-negative", _set("events.0.tick", -1), "events[0].tick", "expected an integer >= 0, got -1"),
    ("tick-float", _set("events.0.tick", 1.5), "events[0].tick", "expected an integer >= 0, got 1.5"),
    ("duplicate-npc", _set("npcs.1.name", "Alda"), "npcs[1].name",
     "expected a name unique across NPCs and actors, got 'Alda' again (first at npcs[0])"),
    ("npc-named-like-actor", _set("actors.1.name", "Bren"), "actors[1].name",
     "unique across NPCs and actors"),
    ("duplicate-location", _set("locations.1.name", "Miller House"), "locations[1].name",
     "expected a unique location name"),
    ("home-not-home", _set("npcs.0.home", "Tavern"), "npcs[0].home",
     "expected the name of a location of kind 'home', got the string 'Tavern', a location of kind 'tavern'"),
    ("home-missing", _set("npcs.0.home", "Castle"), "npcs[0].home", "which is not a location"),
    ("relation-self", _set("relationships.0.b", "Alda"), "relationships[0].b", "two different NPCs"),
    ("relation-unknown", _set("relationships.0.b", "Zed"), "relationships[0].b",
     "expected the name of an NPC"),
    ("relation-actor", _set("relationships.0.b", "player"), "relationships[0].b", "which is not an NPC"),
    ("relation-duplicate", _append("relationships", {"a": "Bren", "b": "Alda", "kind": "friend",
                                                      "affinity": 0.2}),
     "relationships[22]", "one relationship per pair of NPCs"),
    ("event-actor", _set("events.0.actor", "ghost"), "events[0].actor",
     "expected the name of an actor or NPC"),
    ("event-target", _set("events.0.target", "ghost"), "events[0].target", "expected the name of an NPC"),
    ("event-target-missing", _delete("events.0.target"), "events[0].target", "missing required field"),
    ("event-half-position", _set("events.0.x", 3.0), "events[0].y", "expected both x and y"),
    ("no-npcs", _set("npcs", []), "npcs", "expected at least 1 NPC"),
    ("npcs-not-array", _set("npcs", {"name": "Alda"}), "npcs", "expected an array of tables, got a table"),
    ("no-locations", _delete("locations"), "locations", "missing required array"),
    ("two-players", _set("actors.1.kind", "player"), "actors[1].kind",
     "expected at most 1 player actor, got 2"),
]


@pytest.mark.parametrize(("mutate", "path", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation_error_names_file_path_and_expectation(
    village_dict: dict[str, Any], tmp_path: Path, mutate: Mutation, path: str, expected: str
) -> None:
    mutate(village_dict)
    world_file = tmp_path / "edited-world.toml"
    world_file.write_text(tomli_w.dumps(village_dict), encoding="utf-8")
    with pytest.raises(WorldError) as info:
        load_world(world_file)
    message = str(info.value)
    assert "edited-world.toml" in message
    assert info.value.path == path
    assert f": {path}: " in message
    assert expected in message


# ---- the format document agrees with the code --------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "world-format.md"


def test_doc_minimal_example_loads(tmp_path: Path) -> None:
    import re

    text = DOC.read_text(encoding="utf-8")
    example = text.split("## A complete minimal world", 1)[1]
    (block,) = re.findall(r"```toml\n(.*?)```", example.split("\n## ", 1)[0], re.S)
    world_file = tmp_path / "hamlet.toml"
    world_file.write_text(block, encoding="utf-8")
    spec = load_world(world_file)
    assert spec.npc_names == ("Ada", "Bo", "Cy", "Di")


@pytest.mark.parametrize(("keep_npcs", "keep_actors", "field"), [(3, 1, "npcs"), (4, 0, "npcs"), (2, 3, "npcs")])
def test_worlds_smaller_than_an_observation_are_one_line(village_dict: dict[str, Any], keep_npcs: int,
                                                         keep_actors: int, field: str) -> None:
    names = {npc["name"] for npc in village_dict["npcs"][:keep_npcs]}
    village_dict["npcs"] = village_dict["npcs"][:keep_npcs]
    village_dict["actors"] = village_dict["actors"][:keep_actors]
    village_dict["relationships"] = [r for r in village_dict["relationships"] if {r["a"], r["b"]} <= names]
    village_dict["events"] = []
    with pytest.raises(WorldError) as info:
        world_from_dict(village_dict)
    assert info.value.path == field and "at least" in str(info.value) and "\n" not in str(info.value)


DOC_ERRORS: list[tuple[Mutation, str]] = [
    (_set("npcs.3.traits.bravery", 1.7), "npcs[3].traits.bravery: expected a number in [0, 1], got 1.7"),
    (_set("npcs.2.traits.diligence", True),
     "npcs[2].traits.diligence: expected a number in [0, 1], got true (a boolean)"),
    (_set("npcs.1.colour", "red"),
     "npcs[1].colour: unknown key 'colour'; allowed keys: name, role, home, traits, health"),
    (_set("locations.0.kind", "castle"),
     "locations[0].kind: expected one of home, field, well, tavern, market, graveyard, forest_edge, square, "
     "smithy; got the string 'castle'"),
    (_set("npcs.0.home", "Tavern"), "npcs[0].home: expected the name of a location of kind 'home', got the "
     "string 'Tavern', a location of kind 'tavern'"),
    (_set("npcs.1.name", "Alda"),
     "npcs[1].name: expected a name unique across NPCs and actors, got 'Alda' again (first at npcs[0])"),
    (_append("relationships", {"a": "Bren", "b": "Alda", "kind": "friend", "affinity": 0.2}),
     "relationships[22]: expected one relationship per pair of NPCs, got a second one for 'Bren' and "
     "'Alda' (first at relationships[0])"),
    (_delete("npcs.0.name"), "npcs[0].name: missing required field; expected a non-empty string"),
]


@pytest.mark.parametrize(("mutate", "line"), DOC_ERRORS)
def test_doc_error_examples_are_real(village_dict: dict[str, Any], mutate: Mutation, line: str) -> None:
    mutate(village_dict)
    with pytest.raises(WorldError) as info:
        world_from_dict(village_dict, source="worlds/mine.toml")
    assert str(info.value) == f"worlds/mine.toml: {line}"
    assert f"worlds/mine.toml: {line}" in DOC.read_text(encoding="utf-8")


# ---- the documented size limit ---------------------------------------------------------------------------


def test_too_many_npcs_is_one_line_before_any_is_built(village_dict: dict[str, Any], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import worlds.io
    from worlds.spec import MAX_NPCS

    built: list[str] = []
    real_npc = worlds.io._Validator.npc

    def counting_npc(self: Any, table: Any, path: str) -> Any:
        built.append(path)
        return real_npc(self, table, path)

    monkeypatch.setattr(worlds.io._Validator, "npc", counting_npc)

    npc = village_dict["npcs"][0]
    village_dict["npcs"] = [dict(npc, name=f"N{k}") for k in range(MAX_NPCS + 1)]
    village_dict["relationships"], village_dict["events"] = [], []
    world_file = tmp_path / "crowd.toml"
    world_file.write_text(tomli_w.dumps(village_dict), encoding="utf-8")
    with pytest.raises(WorldError) as info:
        load_world(world_file)
    assert built == []
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(world_file))
    assert f"npcs: expected at most {MAX_NPCS} entries" in message and f"got {MAX_NPCS + 1}" in message
    village_dict["npcs"] = village_dict["npcs"][:MAX_NPCS]  # the limit itself loads
    assert len(world_from_dict(village_dict).npcs) == MAX_NPCS


def test_an_oversized_world_file_is_refused_before_parsing(tmp_path: Path) -> None:
    from worlds.spec import MAX_WORLD_FILE_BYTES

    world_file = tmp_path / "huge.toml"
    with world_file.open("wb") as handle:
        handle.truncate(MAX_WORLD_FILE_BYTES + 1)  # sparse: no time spent writing
    with pytest.raises(WorldError) as info:
        load_world(world_file)
    assert str(info.value).startswith(f"{world_file}: expected a world file of at most 16 MiB, got 16.0 MiB")
    assert info.value.path is None


def test_the_size_limit_is_documented() -> None:
    from worlds.spec import MAX_ACTORS, MAX_NPCS

    text = DOC.read_text(encoding="utf-8")
    assert f"{MAX_NPCS:,} NPCs" in text and f"{MAX_ACTORS} actors" in text
